package pipeline

import (
	"net/http"
	"testing"

	"github.com/hostgate/hostgate/router"
)

// TestAffinityCookieAttributes: the session cookie carries what the
// affinity asks for, Partitioned (CHIPS) among them, and Secure on HTTPS
// unless told otherwise.
func TestAffinityCookieAttributes(t *testing.T) {
	yes := true
	for _, tc := range []struct {
		affinity router.Affinity
		https    bool
		want     string
	}{
		{router.Affinity{Cookie: "route"}, false, "route=0000000000000001; HttpOnly"},
		{router.Affinity{Cookie: "route"}, true, "route=0000000000000001; Secure; HttpOnly"},
		{router.Affinity{Cookie: "route", Path: "/app", Domain: ".example.com", SameSite: "None", Secure: &yes, Partitioned: true}, false,
			"route=0000000000000001; Path=/app; Domain=.example.com; Secure; HttpOnly; SameSite=None; Partitioned"},
	} {
		if got := affinityCookie(&tc.affinity, 1, tc.https, tc.affinity.SameSite); got != tc.want {
			t.Errorf("%+v (https %t): %q, want %q", tc.affinity, tc.https, got, tc.want)
		}
	}
}

// TestConditionalSameSiteNone: with session-cookie-conditional-samesite-
// none, the browsers that reject SameSite=None get the cookie without it,
// the others with it.
func TestConditionalSameSiteNone(t *testing.T) {
	const (
		with    = "route=0000000000000001; HttpOnly; SameSite=None"
		without = "route=0000000000000001; HttpOnly"
	)
	for _, tc := range []struct {
		name, userAgent, want string
	}{
		{"no User-Agent", "", with},
		{"Chrome 51", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/51.0.2704.103 Safari/537.36", without},
		{"Chrome 66", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/66.0.3359.181 Safari/537.36", without},
		{"Chrome 80", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/80.0.3987.87 Safari/537.36", with},
		{"Chrome 120", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36", with},
		{"iOS 12 Safari", "Mozilla/5.0 (iPhone; CPU iPhone OS 12_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/12.1.2 Mobile/15E148 Safari/604.1", without},
		{"iPadOS 12", "Mozilla/5.0 (iPad; CPU OS 12_2 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148", without},
		{"iOS 13 Safari", "Mozilla/5.0 (iPhone; CPU iPhone OS 13_3 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/13.0.5 Mobile/15E148 Safari/604.1", with},
		{"macOS 10.14 Safari", "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_14_6) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/12.1.2 Safari/605.1.15", without},
		{"macOS 10.14 Chrome 80", "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_14_6) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/80.0.3987.87 Safari/537.36", with},
		{"macOS 10.15 Safari", "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Safari/605.1.15", with},
		{"UC Browser 12.13.0", "Mozilla/5.0 (Linux; U; Android 9; en-US; SM-G960F) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/57.0.2987.108 UCBrowser/12.13.0.1207 Mobile Safari/537.36", without},
		{"UC Browser 12.13.2 on Chrome 57", "Mozilla/5.0 (Linux; U; Android 9; en-US) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/57.0.2987.108 UCBrowser/12.13.2.1208 Mobile Safari/537.36", without},
		{"UC Browser 12.13.5 on Chrome 78", "Mozilla/5.0 (Linux; U; Android 10; en-US) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/78.0.3904.108 UCBrowser/12.13.5.1209 Mobile Safari/537.36", with},
		{"UC Browser 11 on Chrome 78", "Mozilla/5.0 (Linux; U; Android 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/78.0.3904.108 UCBrowser/11.4 Mobile Safari/537.36", without},
		{"Firefox", "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0", with},
		{"curl", "curl/8.5.0", with},
	} {
		h := http.Header{}
		if tc.userAgent != "" {
			h.Set("User-Agent", tc.userAgent)
		}
		a := router.Affinity{Cookie: "route", SameSite: "None", ConditionalSameSiteNone: true}
		if got := affinityCookie(&a, 1, false, a.SameSiteFor(h)); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
		a.ConditionalSameSiteNone = false
		if got := affinityCookie(&a, 1, false, a.SameSiteFor(h)); got != with {
			t.Errorf("%s without the condition: %q, want %q", tc.name, got, with)
		}
	}
	lax := router.Affinity{Cookie: "route", SameSite: "Lax", ConditionalSameSiteNone: true}
	if got := lax.SameSiteFor(http.Header{"User-Agent": {"Chrome/51.0"}}); got != "Lax" {
		t.Errorf("SameSite Lax for Chrome 51: %q, want Lax", got)
	}
}
