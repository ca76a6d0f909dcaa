package pipeline

import (
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

// editResponse applies the plan's filters to the header of a response
// the proxy sends: the rewrite of the backend's fields, CORS's allow
// fields, then the response header modifiers, which may change those too.
func editResponse(p *plan, h headerEditor) {
	if p.responseRewrite != nil {
		rewriteResponse(h, p.responseRewrite)
	}
	if p.cors != nil {
		corsFields(p, h)
	}
	eachFilter(p, router.FilterResponseHeaderModifier, func(f *router.Filter) { modifyHeader(h, f.ResponseHeaders) })
	if p.balancing != nil && p.balancing.cookie != "" {
		h.Add("Set-Cookie", p.balancing.cookie)
	}
}

// headerEditor is what modifyHeader edits: an http.Header, or the
// engine's field list.
type headerEditor interface {
	Set(name, value string)
	Add(name, value string)
	Del(name string)
}

// modifyHeader applies a header modifier: set, then add, then remove.
func modifyHeader(h headerEditor, m *router.HeaderModifier) {
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

// setForwarded sets X-Forwarded-For, -Proto, -Host, -Client-Cert,
// X-Real-IP and X-Request-ID on out, the header of a request to a
// backend, from in, the client's request.
func setForwarded(in *http.Request, out http.Header, ex *exchange) {
	o := &ex.from
	xff, proto, fhost := forwarded(o.connText, in.Host, ex.scheme, in.Header, o.trusted)
	// One allocation for all; each value's capacity ends with it, so
	// that a modifier adding to one copies it.
	fwd := []string{xff, proto, fhost, o.clientText, o.requestID}
	out["X-Forwarded-For"], out["X-Forwarded-Proto"], out["X-Forwarded-Host"] = fwd[0:1:1], fwd[1:2:2], fwd[2:3:3]
	out["X-Real-Ip"] = fwd[3:4:4]
	if o.requestID != "" {
		out["X-Request-Id"] = fwd[4:5:5]
	} else {
		delete(out, "X-Request-Id")
	}
	setClientCert(out, in, ex.scheme)
	if ex.plan.clientCert != nil {
		ex.plan.clientCert.setFields(out)
	}
}

// forwarded gives the X-Forwarded-For, -Proto and -Host values of a
// request from the address client for host over scheme, whose header is h.
// Values the client sent are kept (and -For appended to) only when trusted;
// otherwise a client could pose as any address.
func forwarded(client, host, scheme string, h router.Headers, trusted bool) (xff, proto, fhost string) {
	xff, proto, fhost = client, scheme, host
	if trusted {
		if prior := h.Values("X-Forwarded-For"); len(prior) > 0 {
			xff = strings.Join(prior, ", ") + ", " + client
		}
		if v := h.Values("X-Forwarded-Proto"); len(v) > 0 && v[0] != "" {
			proto = v[0]
		}
		if v := h.Values("X-Forwarded-Host"); len(v) > 0 && v[0] != "" {
			fhost = v[0]
		}
	}
	return xff, proto, fhost
}
