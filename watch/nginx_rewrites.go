package watch

// ingress-nginx's rewrites of backend answers: proxy-cookie-domain and
// proxy-cookie-path (nginx's proxy_cookie_domain and proxy_cookie_path)
// and proxy-redirect-from/-to (proxy_redirect), one router.ResponseRewrite
// on each path of the Ingress.

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hostgate/hostgate/router"
)

// nginxRewrites are the typed values of the rewrite annotations.
type nginxRewrites struct {
	// rewrite is the filter; its Redirect is settled from redirectFrom
	// and redirectTo, which nginx reads together.
	rewrite                  router.ResponseRewrite
	redirectFrom, redirectTo string
}

// The characters ingress-nginx's validators allow, besides letters and
// digits: a domain's, a URL's.
const (
	nginxCookieDomainText = "-._~/:"
	nginxURLText          = nginxCookieDomainText + ",?&="
)

// nginxRewriteAnnotations rewrite what backends answer.
var nginxRewriteAnnotations = map[string]nginxParse{
	"proxy-cookie-domain": func(v string, s *nginxSettings) (err error) {
		s.rewrites.rewrite.CookieDomain, err = parseNginxReplacement(v, nginxCookieDomainText)
		return err
	},
	"proxy-cookie-path": func(v string, s *nginxSettings) (err error) {
		s.rewrites.rewrite.CookiePath, err = parseNginxReplacement(v, nginxURLText)
		return err
	},
	"proxy-redirect-from": func(v string, s *nginxSettings) error {
		s.rewrites.redirectFrom = v
		return checkNginxRewriteText(v, nginxURLText)
	},
	"proxy-redirect-to": func(v string, s *nginxSettings) error {
		s.rewrites.redirectTo = v
		return checkNginxRewriteText(v, nginxURLText)
	},
}

// parseNginxReplacement reads "off" (no rewrite) or "from to".
func parseNginxReplacement(v, text string) (*router.Replacement, error) {
	if v == "off" {
		return nil, nil
	}
	fields := strings.Fields(v)
	if len(fields) != 2 {
		return nil, errors.New(`must be "off" or the text to replace and its replacement, separated by a space`)
	}
	for _, f := range fields {
		if err := checkNginxRewriteText(f, text); err != nil {
			return nil, err
		}
	}
	return &router.Replacement{From: fields[0], To: fields[1]}, nil
}

// checkNginxRewriteText accepts a literal text of letters, digits and
// the characters of text.
func checkNginxRewriteText(v, text string) error {
	switch {
	case strings.HasPrefix(v, "~"):
		// nginx reads "~" as the start of a regular expression.
		return fmt.Errorf("%q: regular expressions are not supported", v)
	case v == "" || strings.ContainsFunc(v, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune(text, r))
	}):
		return fmt.Errorf("%q: must be letters, digits and the characters %s", v, text)
	}
	return nil
}

// settleRewrites reads proxy-redirect-from and -to together, as
// ingress-nginx's template does: "off" and "default" stand alone, and a
// text needs a replacement other than "off". nginx's default rewrites
// only the name of its own upstream, which backends never see: hostgate
// forwards the Host of the request, so "default" rewrites nothing either.
func (s *nginxSettings) settleRewrites(outcomes []AnnotationOutcome) {
	from, to := s.rewrites.redirectFrom, s.rewrites.redirectTo
	valid := func(name string) bool {
		o := nginxOutcome(outcomes, name)
		return o != nil && o.Outcome == Honoured
	}
	switch {
	case !valid("proxy-redirect-from"):
		setOutcome(outcomes, "proxy-redirect-to", Ignored, "without a valid proxy-redirect-from")
	case from == "off" || from == "default":
		setOutcome(outcomes, "proxy-redirect-to", Ignored, "proxy-redirect-from is "+from)
	case !valid("proxy-redirect-to"):
		setOutcome(outcomes, "proxy-redirect-from", Ignored, "without a valid proxy-redirect-to")
	case to == "off":
		setOutcome(outcomes, "proxy-redirect-from", Ignored, "proxy-redirect-to is off")
	default:
		s.rewrites.rewrite.Redirect = &router.Replacement{From: from, To: to}
	}
}

// filters are the rewrite filter of each path, none where nothing is
// rewritten.
func (r *nginxRewrites) filters() []router.Filter {
	if r.rewrite == (router.ResponseRewrite{}) {
		return nil
	}
	rewrite := r.rewrite
	return []router.Filter{{Type: router.FilterResponseRewrite, ResponseRewrite: &rewrite}}
}
