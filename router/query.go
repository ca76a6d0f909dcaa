package router

import (
	"net/url"
	"strings"
)

// queryValue returns the first value of the query parameter name in raw,
// parsing as net/url.ParseQuery does (pairs it rejects are skipped). Plain
// keys and values are compared in place, so a lookup allocates only for
// escaped query strings.
func queryValue(raw, name string) (string, bool) {
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if strings.Contains(pair, ";") {
			continue // net/url rejects such pairs; so does every Go backend
		}
		key, value, _ := strings.Cut(pair, "=")
		if strings.ContainsAny(key, "%+") {
			decoded, err := url.QueryUnescape(key)
			if err != nil {
				continue
			}
			key = decoded
		}
		if key != name {
			continue
		}
		if strings.ContainsAny(value, "%+") {
			decoded, err := url.QueryUnescape(value)
			if err != nil {
				continue
			}
			value = decoded
		}
		return value, true
	}
	return "", false
}
