package pipeline

import (
	"net/http"
	"strings"

	"github.com/hostgate/hostgate/proxy/h1wire"
	"github.com/hostgate/hostgate/router"
)

// rewriteResponse applies a ResponseRewrite to the Set-Cookie, Location
// and Refresh fields of a backend's answer, in place: a field that does
// not match costs no allocation.
func rewriteResponse(h headerEditor, rw *router.ResponseRewrite) {
	switch h := h.(type) {
	case http.Header:
		for name, values := range h {
			for i, v := range values {
				// Written only when rewritten: a value may be shared
				// by every response (the Server field modifyResponse
				// adds), and other requests read it meanwhile.
				if rewritten := rewriteField(rw, name, v); rewritten != v {
					values[i] = rewritten
				}
			}
		}
	case *h1wire.Fields:
		for i := range *h {
			f := &(*h)[i]
			f.Value = rewriteField(rw, f.Name, f.Value)
		}
	}
}

// rewriteField is value rewritten by rw, if name is a field rw rewrites.
func rewriteField(rw *router.ResponseRewrite, name, value string) string {
	switch {
	case strings.EqualFold(name, "Set-Cookie"):
		return rewriteCookie(rw, value)
	case strings.EqualFold(name, "Location"):
		return replacePrefix(rw.Redirect, value)
	case strings.EqualFold(name, "Refresh"):
		// "5; url=http://...": only the URL is rewritten, as nginx does.
		if i := indexFold(value, "url="); i >= 0 {
			return splice(value, i+len("url="), len(value), replacePrefix(rw.Redirect, value[i+len("url="):]))
		}
	}
	return value
}

// rewriteCookie rewrites the Domain and Path attributes of a Set-Cookie
// value; they follow the first ';', before which is the cookie itself.
func rewriteCookie(rw *router.ResponseRewrite, value string) string {
	if rw.CookieDomain == nil && rw.CookiePath == nil {
		return value
	}
	for at := strings.IndexByte(value, ';'); at >= 0; {
		at++
		end := len(value)
		if i := strings.IndexByte(value[at:], ';'); i >= 0 {
			end = at + i
		}
		if name, _, ok := strings.Cut(value[at:end], "="); ok {
			from, to := at+len(name)+1, end
			for from < to && value[from] == ' ' {
				from++
			}
			for to > from && value[to-1] == ' ' {
				to--
			}
			before := len(value)
			switch name = strings.TrimSpace(name); {
			case strings.EqualFold(name, "domain"):
				value = splice(value, from, to, replaceDomain(rw.CookieDomain, value[from:to]))
			case strings.EqualFold(name, "path"):
				value = splice(value, from, to, replacePrefix(rw.CookiePath, value[from:to]))
			}
			end += len(value) - before
		}
		if end >= len(value) {
			break
		}
		at = end
	}
	return value
}

// splice replaces value[from:to] by now, allocating only for a change.
func splice(value string, from, to int, now string) string {
	if now == value[from:to] {
		return value
	}
	return value[:from] + now + value[to:]
}

// replacePrefix replaces r.From at the start of s by r.To; nginx compares
// case-sensitively.
func replacePrefix(r *router.Replacement, s string) string {
	if r == nil || !strings.HasPrefix(s, r.From) {
		return s
	}
	return r.To + s[len(r.From):]
}

// replaceDomain replaces a cookie domain equal to r.From by r.To; as in
// nginx, the comparison is case-insensitive and ignores leading dots, and
// a leading dot of the domain stays.
func replaceDomain(r *router.Replacement, s string) string {
	if r == nil {
		return s
	}
	domain := strings.TrimPrefix(s, ".")
	if !strings.EqualFold(domain, strings.TrimPrefix(r.From, ".")) {
		return s
	}
	return s[:len(s)-len(domain)] + strings.TrimPrefix(r.To, ".")
}

// indexFold is the index of the first ASCII-case-insensitive occurrence
// of sub in s, -1 if none.
func indexFold(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return i
		}
	}
	return -1
}
