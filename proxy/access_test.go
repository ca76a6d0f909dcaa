package proxy

import (
	"encoding/base64"
	"net/http"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/htpasswd"
	"github.com/hostgate/hostgate/router"
)

// TestGuardsOnEngines: the access filters answer the same on every
// engine: 401 with the challenge (and the backend never sees the
// password it checked), 403, and the rate limit's own status.
func TestGuardsOnEngines(t *testing.T) {
	f := newTLSFixture(t)
	backend := startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("authorization=" + r.Header.Get("Authorization")))
	}))
	loopback, err := router.ParseAddressSet("127.0.0.0/8,::1")
	if err != nil {
		t.Fatal(err)
	}
	for _, engine := range []Engine{EngineNative, EngineStdlib} {
		s := startServer(t, func() Options { o := testOptions(); o.HTTP1Engine = engine; return o }())
		s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: backend}}})
		routes := compile(t,
			route("auth", nil, router.Rule{Matches: prefix("/auth"), Backends: backends("web"), Filters: []router.Filter{
				{Type: router.FilterBasicAuth, BasicAuth: &router.BasicAuth{Source: "test", Realm: "Team", Users: []htpasswd.Entry{{User: "bob", Hash: "{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g="}}}},
				{Type: router.FilterRequestHeaderModifier, RequestHeaders: &router.HeaderModifier{Remove: []string{"Authorization"}}}}}),
			route("deny", nil, router.Rule{Matches: prefix("/deny"), Backends: backends("web"), Filters: []router.Filter{
				{Type: router.FilterAccess, Access: &router.Access{Deny: loopback}}}}),
			route("limit", nil, router.Rule{Matches: prefix("/limit"), Backends: backends("web"), Filters: []router.Filter{
				{Type: router.FilterRateLimit, RateLimit: &router.RateLimit{Key: "limit", Rate: 1, Per: time.Hour, StatusCode: 429}}}}),
		)
		secure := freeAddr(t)
		addrs := apply(t, s, Listener{Address: "127.0.0.1:0", Routes: routes}, Listener{Address: secure, Protocol: HTTPS, TLS: f.store(t, "app.test"), Routes: routes})
		clients := map[string]struct {
			c    *http.Client
			base string
		}{
			"HTTP/1.1": {http.DefaultClient, "http://" + addrs[0]},
			"h2c":      {&http.Client{Transport: h2cTransport()}, "http://" + addrs[0]},
			"h2":       {&http.Client{Transport: f.client(secure, true).Transport}, "https://app.test"},
			"HTTP/3":   {&http.Client{Transport: f.h3Transport(t, secure)}, "https://app.test"},
		}
		limited := 0
		for proto, cl := range clients {
			name := string(engine) + " " + proto
			resp, body := get(t, cl.c, cl.base+"/auth", "Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("bob:password")))
			if resp.StatusCode != 200 || body != "authorization=" {
				t.Errorf("%s: good password: %d %q", name, resp.StatusCode, body)
			}
			resp, body = get(t, cl.c, cl.base+"/auth", "Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("bob:wrong")))
			if resp.StatusCode != 401 || body != "unauthorized\n" || resp.Header.Get("WWW-Authenticate") != `Basic realm="Team"` {
				t.Errorf("%s: wrong password: %d %q %q", name, resp.StatusCode, body, resp.Header.Get("WWW-Authenticate"))
			}
			if resp, body = get(t, cl.c, cl.base+"/deny"); resp.StatusCode != 403 || body != "forbidden\n" {
				t.Errorf("%s: denied: %d %q", name, resp.StatusCode, body)
			}
			// One request an hour for all of them, all from loopback.
			switch resp, body = get(t, cl.c, cl.base+"/limit"); resp.StatusCode {
			case 429:
				limited++
				if body != "too many requests\n" {
					t.Errorf("%s: limited: %q", name, body)
				}
			case 200:
			default:
				t.Errorf("%s: limit: %d %q", name, resp.StatusCode, body)
			}
		}
		if limited != len(clients)-1 {
			t.Errorf("%s: %d of %d requests limited, want all but one", engine, limited, len(clients))
		}
	}
}
