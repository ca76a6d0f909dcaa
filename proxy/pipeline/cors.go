package pipeline

// The CORS filter's execution, the same on every engine: a rule with one
// answers preflight requests here, never forwarding them, and the other
// responses of the rule carry the allow fields for the origins it allows.
// Nothing of it runs for a rule without one.

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hostgate/hostgate/router"
)

// applyCORS records what the rule's CORS filter c makes of the request:
// the Access-Control-Allow-Origin of its responses, none when its origin
// is not allowed. It reports whether the request is a preflight.
func (p *plan) applyCORS(c *router.CORS, req *router.Request) (preflight bool) {
	p.cors = c
	origins := req.Header.Values("Origin")
	if len(origins) == 0 {
		return false
	}
	if c.AllowsOrigin(origins[0]) {
		p.allowOrigin = origins[0]
		if !dependsOnOrigin(c) {
			p.allowOrigin = "*"
		}
	}
	return req.Method == http.MethodOptions && len(req.Header.Values("Access-Control-Request-Method")) > 0
}

// dependsOnOrigin reports whether c's answers differ from one origin to
// another. Only one that allows every origin without credentials can say
// "*": with credentials, browsers take "*" for no origin at all, which is
// what one with LiteralWildcard means.
func dependsOnOrigin(c *router.CORS) bool {
	return !c.AnyOrigin() || c.AllowCredentials && !c.LiteralWildcard
}

// corsFields adds the allow fields of the plan's CORS filter to a
// response header.
func corsFields(p *plan, h headerEditor) {
	c := p.cors
	if dependsOnOrigin(c) {
		// Whether the request's origin is allowed or not, a cache must
		// not give this response to another origin.
		h.Add("Vary", "Origin")
	}
	if p.allowOrigin == "" {
		return
	}
	h.Set("Access-Control-Allow-Origin", p.allowOrigin)
	if c.AllowCredentials {
		h.Set("Access-Control-Allow-Credentials", "true")
	}
	setAllowList(h, "Access-Control-Expose-Headers", c.ExposeHeaders, c.AllowCredentials, nil)
}

// preflightFields adds to a preflight's answer what it carries beyond
// corsFields: the methods and request fields allowed, and for how long.
func preflightFields(p *plan, req router.Headers, h headerEditor) {
	if p.allowOrigin == "" {
		return
	}
	c := p.cors
	setAllowList(h, "Access-Control-Allow-Methods", c.AllowMethods, c.AllowCredentials, req.Values("Access-Control-Request-Method"))
	setAllowList(h, "Access-Control-Allow-Headers", c.AllowHeaders, c.AllowCredentials, req.Values("Access-Control-Request-Headers"))
	if c.MaxAge > 0 {
		h.Set("Access-Control-Max-Age", strconv.FormatInt(int64(c.MaxAge/time.Second), 10))
	}
}

// setAllowList sets the field name to the values allowed, if any. With
// credentials browsers take "*" for a name, not a wildcard, so an allowed
// "*" stands for what the request asked for (requested) instead.
func setAllowList(h headerEditor, name string, allowed []string, credentials bool, requested []string) {
	value := strings.Join(allowed, ", ")
	if value == "*" && credentials {
		value = strings.Join(requested, ", ")
	}
	if value != "" {
		h.Set(name, value)
	}
}
