package pipeline

// External authorization (router.ExternalAuth): before a request is
// forwarded, or before route matching for a listener's filters, a
// request describing it goes to the authorization service, an endpoint
// set like any backend's, over the forwarder's pooled transports. Its
// answer allows the request, with some of its fields copied into the
// forwarded request, or becomes the client's answer.
//
// Only net/http's server runs it: the native HTTP/1.1 engine hands a
// request that needs it over (engineForwards), as it does mirrored ones.
// The call is a request of its own, so its cost is accepted; routes
// without the filter pay one flag test in decide. A filter with a cache
// (authcache.go) asks only when no answer for the request's key is kept.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"time"

	"github.com/hostgate/hostgate/router"
)

const (
	// authTimeout bounds an authorization request, which the client's
	// own deadlines do not (they start with forwarding).
	authTimeout = 30 * time.Second
	// maxAuthDenialBody bounds the body of a denial relayed to the client.
	maxAuthDenialBody = 64 << 10
)

// authorize runs the ExternalAuth filters among filters, in order, with
// the caches of g. It reports whether the request may go on; if not, the
// client has its answer.
func (s *Shared) authorize(w http.ResponseWriter, r *http.Request, ex *exchange, g *guards, filters []router.Filter) bool {
	for i := range filters {
		if a := filters[i].ExternalAuth; a != nil && !s.askAuth(w, r, ex, g, a) {
			return false
		}
	}
	return true
}

// askAuth acts on the answer of a's service about r: one kept in a's
// cache, or else one it gives now.
func (s *Shared) askAuth(w http.ResponseWriter, r *http.Request, ex *exchange, g *guards, a *router.ExternalAuth) bool {
	var cache *authCache
	if a.Cache != nil && g != nil {
		cache = g.authCaches[a.Cache]
	}
	if cache == nil {
		return s.callAuth(w, r, ex, a, nil, [sha256.Size]byte{})
	}
	key := authCacheKey(a.Cache, r, ex)
	if kept, ok := cache.get(key, time.Now()); ok {
		return actOnAuth(w, r, ex, a, kept.status, kept.header, nil)
	}
	return s.callAuth(w, r, ex, a, cache, key)
}

// callAuth asks a's service about r, keeps its answer in cache under key
// (without a cache, none is kept) and acts on it.
func (s *Shared) callAuth(w http.ResponseWriter, r *http.Request, ex *exchange, a *router.ExternalAuth, cache *authCache, key [sha256.Size]byte) bool {
	set := ex.sets.Get(a.Backend.Name)
	if a.Backend.Invalid || set == nil || set.Len() == 0 {
		WriteError(w, r, http.StatusInternalServerError)
		return false
	}
	ctx, cancel := context.WithTimeout(r.Context(), authTimeout)
	defer cancel()
	// The call is one attempt of an exchange of its own, so that the
	// request's state (its endpoint, its body) stays as it is.
	call := exchange{start: ex.start, sets: ex.sets, backendTLS: ex.backendTLS, stats: ex.stats, protocol: a.Backend.Protocol}
	call.plan.backend, call.plan.set = &a.Backend, set
	req, err := authRequest(ctx, r, ex, a)
	if err != nil {
		WriteError(w, r, http.StatusInternalServerError)
		return false
	}
	resp, err := s.fwd.attempt(req, &call)
	if err != nil {
		if r.Context().Err() == nil {
			WriteError(w, r, http.StatusInternalServerError)
		}
		return false
	}
	defer call.host.End()
	defer resp.Body.Close()
	if cache != nil {
		cache.put(key, a.Cache, resp, time.Now())
	}
	return actOnAuth(w, r, ex, a, resp.StatusCode, resp.Header, resp)
}

// actOnAuth acts on an answer of a's service with status and header:
// resp is the answer itself, whose body a denial in the Gateway style
// relays (such answers are never kept, so resp is there).
func actOnAuth(w http.ResponseWriter, r *http.Request, ex *exchange, a *router.ExternalAuth, status int, header http.Header, resp *http.Response) bool {
	if a.Style == router.AuthGateway {
		if allowed(a.Style, status) {
			copyAuthFields(r.Header, header, a)
			return true
		}
		relayDenial(w, resp)
		return false
	}
	cookies := header["Set-Cookie"]
	if a.AlwaysSetCookie {
		// On whatever the client gets: the backend's answer (whose own
		// cookies ReverseProxy adds to these), a denial, an error.
		w.Header()["Set-Cookie"] = append(w.Header()["Set-Cookie"], cookies...)
	}
	if allowed(a.Style, status) {
		copyAuthFields(r.Header, header, a)
		if !a.AlwaysSetCookie && len(cookies) > 0 {
			// The backend's status decides: modifyResponse.
			if ex.authCookies == nil {
				ex.authCookies = new([]string)
			}
			*ex.authCookies = append(*ex.authCookies, cookies...)
		}
		return true
	}
	switch status {
	case http.StatusUnauthorized:
		if a.SignIn != "" {
			if !a.AlwaysSetCookie {
				// A 302 is among the statuses add_header adds to.
				w.Header()["Set-Cookie"] = append(w.Header()["Set-Cookie"], cookies...)
			}
			w.Header().Set("Location", signInURL(a, r, ex.scheme))
			w.WriteHeader(http.StatusFound)
			return false
		}
		if v := header.Values("Www-Authenticate"); len(v) > 0 {
			w.Header()["Www-Authenticate"] = v
		}
		WriteError(w, r, http.StatusUnauthorized)
	case http.StatusForbidden:
		WriteError(w, r, http.StatusForbidden)
	default:
		WriteError(w, r, http.StatusInternalServerError)
	}
	return false
}

func allowed(style router.AuthStyle, status int) bool {
	if style == router.AuthNginx {
		return status >= 200 && status < 300
	}
	return status == http.StatusOK
}

// authRequest builds the request to a's service about r. A body taken
// along is put back in front of the rest of r's, for the backend.
func authRequest(ctx context.Context, r *http.Request, ex *exchange, a *router.ExternalAuth) (*http.Request, error) {
	method := a.Method
	if method == "" {
		method = r.Method
	}
	// The endpoint is picked per attempt.
	u := &url.URL{Scheme: upstreamScheme(a.Backend.Protocol), RawQuery: a.RawQuery}
	if a.PrefixPath {
		setPath(u, strings.TrimSuffix(a.Path, "/")+r.URL.EscapedPath())
		u.RawQuery = r.URL.RawQuery
	} else {
		setPath(u, a.Path)
	}
	var body []byte
	if a.MaxBody > 0 && r.Body != nil && r.Body != http.NoBody {
		var err error
		if body, err = io.ReadAll(io.LimitReader(r.Body, a.MaxBody)); err != nil {
			return nil, err
		}
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
	}
	req, err := http.NewRequestWithContext(ctx, method, "/", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.URL = u
	req.Host = r.Host
	if a.Host != "" {
		req.Host = a.Host
	}
	if a.AllHeaders {
		for name, v := range r.Header {
			req.Header[name] = v
		}
		removeHopFields(req.Header)
		req.Header.Del("Content-Length")
		req.Header.Del("Expect")
		setForwarded(r, req.Header, ex)
	} else {
		for _, name := range append([]string{"Authorization"}, a.AllowedHeaders...) {
			if v := r.Header.Values(name); len(v) > 0 {
				req.Header[textproto.CanonicalMIMEHeaderKey(name)] = v
			}
		}
	}
	if a.OriginalRequest {
		uri := r.URL.RequestURI()
		req.Header.Set("X-Original-Url", ex.scheme+"://"+r.Host+uri)
		req.Header.Set("X-Original-Method", r.Method)
		redirect := a.RequestRedirect
		if redirect == "" {
			redirect = uri
		}
		req.Header.Set("X-Auth-Request-Redirect", redirect)
	}
	for _, h := range a.RequestHeaders {
		req.Header.Set(h.Name, h.Value)
	}
	return req, nil
}

// removeHopFields deletes the fields that belong to one connection.
func removeHopFields(h http.Header) {
	for _, v := range h.Values("Connection") {
		for name := range strings.SplitSeq(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopFields {
		delete(h, name)
	}
}

var hopFields = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// answerFields describe an answer itself: an allowing answer's are not
// copied into the forwarded request even when all of its fields are.
var answerFields = map[string]bool{
	"Content-Length": true, "Content-Type": true, "Content-Encoding": true, "Content-Range": true,
	"Date": true, "Server": true, "Host": true, "Etag": true, "Last-Modified": true, "Expires": true,
	"Cache-Control": true, "Age": true, "Vary": true,
}

// copyAuthFields copies the fields a names from the service's allowing
// answer into the request to forward. A named field the answer lacks is
// removed, so that a client cannot pose as authorized by sending it.
// Host never changes: it chose the listener, and listener filters must
// not change it.
func copyAuthFields(to, from http.Header, a *router.ExternalAuth) {
	if a.AllResponseHeaders {
		for name, v := range from {
			if !answerFields[name] && !isHopField(name) {
				to[name] = v
			}
		}
		return
	}
	for _, name := range a.ResponseHeaders {
		key := textproto.CanonicalMIMEHeaderKey(name)
		if key == "Host" {
			continue
		}
		if v := from[key]; len(v) > 0 {
			to[key] = v
		} else {
			delete(to, key)
		}
	}
}

func isHopField(name string) bool {
	for _, h := range hopFields {
		if h == name {
			return true
		}
	}
	return false
}

// relayDenial gives the client the service's answer, its body cut at
// maxAuthDenialBody.
func relayDenial(w http.ResponseWriter, resp *http.Response) {
	h := w.Header()
	for name, v := range resp.Header {
		if !isHopField(name) && name != "Content-Length" {
			h[name] = v
		}
	}
	if resp.ContentLength >= 0 && resp.ContentLength <= maxAuthDenialBody {
		h["Content-Length"] = resp.Header["Content-Length"]
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, io.LimitReader(resp.Body, maxAuthDenialBody))
}

// signInURL is where a 401 sends the client: a's SignIn with the
// request's URL in its redirect parameter, and its variables expanded.
func signInURL(a *router.ExternalAuth, r *http.Request, scheme string) string {
	uri := r.URL.RequestURI()
	loc := expandAuthVariables(a.SignIn, r.Host, scheme, uri)
	if a.SignInParam == "" {
		return loc
	}
	sep := "?"
	if strings.Contains(loc, "?") {
		sep = "&"
	}
	return loc + sep + a.SignInParam + "=" + scheme + "://" + r.Host + url.QueryEscape(uri)
}

// expandAuthVariables fills the variables router.ExternalAuth.SignIn may
// hold.
func expandAuthVariables(s, host, scheme, uri string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	return strings.NewReplacer(
		"$escaped_request_uri", url.QueryEscape(uri),
		"$request_uri", uri,
		"$scheme", scheme,
		"$host", hostOnly(host),
		"$http_host", host,
	).Replace(s)
}
