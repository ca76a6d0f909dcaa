package router

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// CORS is a Cross-Origin Resource Sharing filter: proxy/ answers the
// preflight requests of a rule that has one itself, and adds the allow
// fields to the responses to the other requests of the origins it allows.
type CORS struct {
	AllowOrigins []Origin
	// AllowMethods, AllowHeaders and ExposeHeaders list field values as
	// sent; a list of "*" alone allows any.
	AllowMethods     []string
	AllowHeaders     []string
	ExposeHeaders    []string
	AllowCredentials bool
	// MaxAge is how long a client may keep a preflight's answer; 0 sends
	// no Access-Control-Max-Age.
	MaxAge time.Duration
	// LiteralWildcard sends "*" for an AllowOrigins of "*" even with
	// AllowCredentials, as ingress-nginx does: browsers then give no page
	// an answer to a request with credentials. Without it such a filter
	// echoes the request's origin, as the Gateway API asks.
	LiteralWildcard bool `json:",omitempty"`
}

// Origin is an allowed origin as ParseOrigin reads it. Host is lower case
// and may be "*" (any host) or begin with "*." (one or more labels in
// place of the "*"); Port 0 stands for the scheme's default. The zero
// Origin is "*", which allows every origin.
type Origin struct {
	Scheme string
	Host   string
	Port   int
}

// ParseOrigin reads an allowed origin as the Gateway API writes it:
// "*", or <scheme>://<host>[:<port>] with scheme http or https, a host of
// DNS labels or an IPv4 address, optionally after "*." or "*" alone, and
// a port from 1 to 65535. The error quotes s.
func ParseOrigin(s string) (Origin, error) {
	o, err := parseOrigin(s)
	if err != nil {
		return Origin{}, fmt.Errorf("%s: %w", quote(s), err)
	}
	return o, nil
}

func parseOrigin(s string) (Origin, error) {
	if s == "*" {
		return Origin{}, nil
	}
	scheme, authority, ok := strings.Cut(s, "://")
	if !ok || (scheme != "http" && scheme != "https") {
		return Origin{}, errors.New(`must be "*" or begin with http:// or https://`)
	}
	host, port, hasPort := strings.Cut(authority, ":")
	o := Origin{Scheme: scheme, Host: strings.ToLower(host)}
	if hasPort {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '+' || port[0] == '-' {
			return Origin{}, errors.New("port: must be a number from 1 to 65535")
		}
		o.Port = n
	}
	if err := validateOriginHost(o.Host); err != nil {
		return Origin{}, fmt.Errorf("host: %w", err)
	}
	return o, nil
}

func validateOriginHost(host string) error {
	if host == "*" {
		return nil
	}
	if len(host) > maxHostnameLen {
		return fmt.Errorf("longer than %d characters", maxHostnameLen)
	}
	for label := range strings.SplitSeq(strings.TrimPrefix(host, "*."), ".") {
		if label == "" || strings.Trim(label, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			return errors.New(`must be DNS labels of letters, digits and '-', optionally after "*." or "*" alone`)
		}
	}
	return nil
}

func (o Origin) String() string {
	if o.Scheme == "" {
		return "*"
	}
	if o.Port == 0 {
		return o.Scheme + "://" + o.Host
	}
	return o.Scheme + "://" + o.Host + ":" + strconv.Itoa(o.Port)
}

// AnyOrigin reports whether c allows every origin.
func (c *CORS) AnyOrigin() bool {
	return len(c.AllowOrigins) == 1 && c.AllowOrigins[0].Scheme == ""
}

// AllowsOrigin reports whether c allows the origin a request's Origin
// field names. Schemes and hosts compare without regard to case, and a
// port left out is the scheme's default, as browsers leave it out.
func (c *CORS) AllowsOrigin(origin string) bool {
	scheme, authority, ok := strings.Cut(origin, "://")
	host, port := authority, 0
	if i := strings.LastIndexByte(authority, ':'); i >= 0 {
		if n, err := strconv.Atoi(authority[i+1:]); err == nil && n > 0 {
			host, port = authority[:i], n
		}
	}
	for _, o := range c.AllowOrigins {
		if o.Scheme == "" {
			return true
		}
		if ok && strings.EqualFold(scheme, o.Scheme) && effectivePort(o.Scheme, o.Port) == effectivePort(o.Scheme, port) && o.matchesHost(host) {
			return true
		}
	}
	return false
}

func (o Origin) matchesHost(host string) bool {
	suffix, wild := strings.CutPrefix(o.Host, "*")
	if !wild {
		return strings.EqualFold(host, o.Host)
	}
	return len(host) > len(suffix) && strings.EqualFold(host[len(host)-len(suffix):], suffix)
}

func effectivePort(scheme string, port int) int {
	switch {
	case port != 0:
		return port
	case scheme == "https":
		return 443
	}
	return 80
}
