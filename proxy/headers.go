package proxy

import (
	"net"
	"net/http"
	"strings"

	"github.com/hostgate/hostgate/router"
)

// eachFilter calls fn for the filters of type t: the rule's, then the
// chosen backend's.
func eachFilter(p *plan, t router.FilterType, fn func(*router.Filter)) {
	for i := range p.target.Rule.Filters {
		if f := &p.target.Rule.Filters[i]; f.Type == t {
			fn(f)
		}
	}
	if p.backend == nil {
		return
	}
	for i := range p.backend.Filters {
		if f := &p.backend.Filters[i]; f.Type == t {
			fn(f)
		}
	}
}

// modifyHeader applies a header modifier: set, then add, then remove.
func modifyHeader(h http.Header, m *router.HeaderModifier) {
	for _, s := range m.Set {
		h.Set(s.Name, s.Value)
	}
	for _, a := range m.Add {
		h.Add(a.Name, a.Value)
	}
	for _, name := range m.Remove {
		h.Del(name)
	}
}

// setForwarded sets X-Forwarded-For, -Proto and -Host on out from in.
// Values the client sent are kept (and -For appended to) only when trusted;
// otherwise a client could pose as any address.
func setForwarded(in *http.Request, out http.Header, scheme string, trusted bool) {
	client, _, err := net.SplitHostPort(in.RemoteAddr)
	if err != nil {
		client = in.RemoteAddr
	}
	proto, host := scheme, in.Host
	if trusted {
		if prior := in.Header["X-Forwarded-For"]; len(prior) > 0 {
			client = strings.Join(prior, ", ") + ", " + client
		}
		if v := in.Header.Get("X-Forwarded-Proto"); v != "" {
			proto = v
		}
		if v := in.Header.Get("X-Forwarded-Host"); v != "" {
			host = v
		}
	}
	out["X-Forwarded-For"] = []string{client}
	out["X-Forwarded-Proto"] = []string{proto}
	out["X-Forwarded-Host"] = []string{host}
}
