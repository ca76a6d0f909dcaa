package watch

// ingress-nginx's annotations of how requests reach the backends: the body
// limit, timeouts and default backends, and the nginx buffers hostgate
// does not have.
//
// hostgate streams bodies both ways through fixed buffers, as nginx does
// with proxy-buffering and proxy-request-buffering off. The annotations
// that size nginx's buffers are read, so that a bad value is reported,
// and ignored; those that turn buffering on are ignored with what the
// difference is.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/hostgate/hostgate/router"
)

// nginxProxy are the settings of nginxProxyAnnotations; nil pointers take
// the Ingress defaults (Options).
type nginxProxy struct {
	bodySize              *int64
	connect, read, send   *time.Duration
	errorCodes            []int
	defaultBackend        string
	disableInterceptError bool
	// fallback is the default backend, resolved (settleNginxProxy).
	fallback *router.Fallback
	// rate bounds the answers' rate (limit-rate, limit-rate-after).
	rate router.ResponseRate
}

// nginxIgnoredBecause are the reasons the values of annotations hostgate
// reads but does not act on are ignored, by annotation; settleNginxProxy
// reports them.
var nginxIgnoredBecause = map[string]func(value string) string{
	"proxy-buffering": func(v string) string {
		if v == "on" {
			return "hostgate streams responses as they come (proxy-buffering off): the answer is the same, but a slow client holds its backend connection longer"
		}
		return ""
	},
	"proxy-request-buffering": func(v string) string {
		if v == "on" {
			return "hostgate streams request bodies as they come (proxy-request-buffering off): the backend sees a request before its body is whole, and one whose client leaves midway"
		}
		return ""
	},
	"proxy-buffer-size":        noNginxBuffers,
	"proxy-buffers-number":     noNginxBuffers,
	"proxy-busy-buffers-size":  noNginxBuffers,
	"proxy-max-temp-file-size": noNginxBuffers,
	"client-body-buffer-size":  noNginxBuffers,
	"proxy-http-version": func(v string) string {
		if v == "1.0" {
			return "hostgate speaks HTTP/1.1 to backends, with keep-alive connections"
		}
		return ""
	},
	"service-upstream": func(v string) string {
		if v == "true" {
			return "hostgate balances over the Service's endpoints itself, the pods the ClusterIP leads to, without kube-proxy's hop"
		}
		return ""
	},
}

func noNginxBuffers(string) string {
	return "hostgate has no nginx buffers or temporary files: bodies stream through fixed buffers, response heads up to 1 MiB"
}

// nginxProxyAnnotations choose the body limit, timeouts and default
// backend of the Ingress's rules.
var nginxProxyAnnotations = map[string]nginxParse{
	"proxy-body-size": func(v string, s *nginxSettings) error {
		n, err := ParseNginxSize(v)
		if err == nil {
			s.proxy.bodySize = &n
		}
		return err
	},
	"proxy-connect-timeout": func(v string, s *nginxSettings) (err error) {
		s.proxy.connect, err = parseNginxSeconds(v)
		return err
	},
	"proxy-read-timeout": func(v string, s *nginxSettings) (err error) {
		s.proxy.read, err = parseNginxSeconds(v)
		return err
	},
	"proxy-send-timeout": func(v string, s *nginxSettings) (err error) {
		s.proxy.send, err = parseNginxSeconds(v)
		return err
	},
	"custom-http-errors": func(v string, s *nginxSettings) (err error) {
		s.proxy.errorCodes, err = parseErrorCodes(v)
		return err
	},
	"default-backend": func(v string, s *nginxSettings) error {
		if errs := validation.IsDNS1035Label(v); len(errs) > 0 {
			return fmt.Errorf("must be the name of a Service of the Ingress's namespace")
		}
		s.proxy.defaultBackend = v
		return nil
	},
	"limit-rate": func(v string, s *nginxSettings) (err error) {
		s.proxy.rate.BytesPerSecond, err = parseKilobytes(v)
		return err
	},
	"limit-rate-after": func(v string, s *nginxSettings) (err error) {
		s.proxy.rate.After, err = parseKilobytes(v)
		return err
	},
	"disable-proxy-intercept-errors": func(v string, s *nginxSettings) (err error) {
		s.proxy.disableInterceptError, err = parseNginxBool(v)
		return err
	},
	// Read for their outcome: nginxIgnoredBecause.
	"proxy-buffering":          func(v string, s *nginxSettings) error { return checkOnOff(v) },
	"proxy-request-buffering":  func(v string, s *nginxSettings) error { return checkOnOff(v) },
	"proxy-buffer-size":        func(v string, s *nginxSettings) error { _, err := ParseNginxSize(v); return err },
	"proxy-busy-buffers-size":  func(v string, s *nginxSettings) error { _, err := ParseNginxSize(v); return err },
	"proxy-max-temp-file-size": func(v string, s *nginxSettings) error { _, err := ParseNginxSize(v); return err },
	"client-body-buffer-size":  func(v string, s *nginxSettings) error { _, err := ParseNginxSize(v); return err },
	"proxy-buffers-number": func(v string, s *nginxSettings) error {
		if n, err := strconv.Atoi(v); err != nil || n < 1 {
			return fmt.Errorf("must be a number of buffers")
		}
		return nil
	},
	"proxy-http-version": func(v string, s *nginxSettings) error {
		if v != "1.0" && v != "1.1" {
			return fmt.Errorf("must be 1.0 or 1.1")
		}
		return nil
	},
	"service-upstream": func(v string, s *nginxSettings) error { _, err := parseNginxBool(v); return err },
}

// maxNginxSize keeps sizes far from overflowing: 1 TiB.
const maxNginxSize = 1 << 40

// ParseNginxSize reads a size as nginx does: a number of bytes, or of
// kilobytes, megabytes or gigabytes (1024-based) with k, m or g after it,
// in either case (ingress-nginx also takes b for bytes).
func ParseNginxSize(v string) (int64, error) {
	bad := fmt.Errorf("must be a size such as 1000, 8k, 8m or 1g")
	unit := int64(1)
	digits := v
	if n := len(v); n > 0 {
		switch v[n-1] {
		case 'b', 'B':
			digits = v[:n-1]
		case 'k', 'K':
			unit, digits = 1<<10, v[:n-1]
		case 'm', 'M':
			unit, digits = 1<<20, v[:n-1]
		case 'g', 'G':
			unit, digits = 1<<30, v[:n-1]
		}
	}
	if digits == "" || strings.ContainsFunc(digits, func(r rune) bool { return r < '0' || r > '9' }) {
		return 0, bad
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n > maxNginxSize/unit {
		return 0, fmt.Errorf("must be at most 1024g")
	}
	return n * unit, nil
}

// maxNginxTimeout bounds the timeouts: longer is no timeout worth the name.
const maxNginxTimeout = 24 * time.Hour

// parseNginxSeconds reads a timeout in whole seconds, as ingress-nginx's
// proxy-*-timeout annotations take them.
func parseNginxSeconds(v string) (*time.Duration, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || time.Duration(n)*time.Second > maxNginxTimeout {
		return nil, fmt.Errorf("must be a number of seconds from 1 to %d", int(maxNginxTimeout/time.Second))
	}
	d := time.Duration(n) * time.Second
	return &d, nil
}

// parseKilobytes reads a whole number of kilobytes (1024 bytes), as
// ingress-nginx writes limit-rate's after nginx's "k", into bytes.
func parseKilobytes(v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > maxNginxSize>>10 {
		return 0, fmt.Errorf("must be a whole number of kilobytes from 0 to %d", maxNginxSize>>10)
	}
	return n << 10, nil
}

// parseErrorCodes reads custom-http-errors: statuses from 400 to 599,
// separated by commas.
func parseErrorCodes(v string) ([]int, error) {
	var codes []int
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		code, err := strconv.Atoi(item)
		if err != nil || code < 400 || code > 599 {
			return nil, fmt.Errorf("%q: not a status from 400 to 599", item)
		}
		if !slices.Contains(codes, code) {
			codes = append(codes, code)
		}
	}
	if len(codes) == 0 {
		return nil, fmt.Errorf("must list statuses from 400 to 599")
	}
	return codes, nil
}

// settleNginxProxy reports the annotations whose value hostgate does not
// act on, and those that need another.
func (s *nginxSettings) settleNginxProxy(outcomes []AnnotationOutcome) {
	for _, o := range outcomes {
		name := strings.TrimPrefix(o.Annotation, NginxAnnotationPrefix)
		if why := nginxIgnoredBecause[name]; why != nil && o.Outcome == Honoured {
			if reason := why(o.Value); reason != "" {
				setOutcome(outcomes, name, Ignored, reason)
			}
		}
	}
	if s.proxy.errorCodes != nil && s.proxy.defaultBackend == "" {
		setOutcome(outcomes, "custom-http-errors", Ignored, "without default-backend: hostgate has no global default backend Service to send errors to")
		s.proxy.errorCodes = nil
	}
	if s.proxy.rate.BytesPerSecond == 0 && s.proxy.rate.After > 0 {
		setOutcome(outcomes, "limit-rate-after", Ignored, "without limit-rate, answers are not limited")
	}
	if s.proxy.disableInterceptError {
		// Only the Ingress's own codes are intercepted here: none then.
		s.proxy.errorCodes = nil
	}
}

// resolveDefaultBackend resolves the default-backend annotation of ing to
// the first port of its Service, as ingress-nginx does, and says in
// outcomes why it cannot be.
func (t *translator) resolveDefaultBackend(ing *networkingv1.Ingress, s *nginxSettings, outcomes []AnnotationOutcome) {
	p := &s.proxy
	if p.defaultBackend == "" {
		return
	}
	ref, err := t.ingressDefaultBackend(ing.Namespace, p.defaultBackend)
	if err != nil {
		setOutcome(outcomes, "default-backend", Invalid, err.Error())
		if p.errorCodes != nil {
			setOutcome(outcomes, "custom-http-errors", Ignored, "the default-backend is invalid")
		}
		return
	}
	p.fallback = &router.Fallback{Backend: ref, Codes: p.errorCodes, Headers: []router.Header{
		{Name: "X-Namespace", Value: ing.Namespace},
		{Name: "X-Ingress-Name", Value: ing.Name},
	}}
}

// ingressDefaultBackend resolves a Service of namespace by its first port.
func (t *translator) ingressDefaultBackend(namespace, name string) (router.BackendRef, error) {
	svc := t.services.last(types.NamespacedName{Namespace: namespace, Name: name})
	if svc != nil && len(svc.Ports) == 0 {
		return router.BackendRef{}, fmt.Errorf("service %s has no ports", name)
	}
	port := networkingv1.ServiceBackendPort{}
	if svc != nil {
		port.Number = svc.Ports[0].Port
	}
	return t.ingressBackend(namespace, &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: name, Port: port}})
}

// proxyRule gives rule, which forwards to b, the body limit, timeouts and
// default backend of the Ingress, or else those of opts.
func (s *nginxSettings) proxyRule(rule router.Rule, b *networkingv1.IngressBackend, opts *Options) router.Rule {
	p := &s.proxy
	rule.MaxRequestBody = opts.IngressMaxRequestBody
	if p.bodySize != nil {
		rule.MaxRequestBody = *p.bodySize
	}
	rule.Timeouts = opts.IngressTimeouts
	for _, t := range []struct {
		set   *time.Duration
		field *time.Duration
	}{{p.connect, &rule.Timeouts.Connect}, {p.read, &rule.Timeouts.BackendRead}, {p.send, &rule.Timeouts.BackendSend}} {
		if t.set != nil {
			*t.field = *t.set
		}
	}
	if p.rate.BytesPerSecond > 0 {
		rate := p.rate
		rule.ResponseRate = &rate
	}
	if p.fallback != nil && b.Service != nil {
		f := *p.fallback
		f.Headers = append(slices.Clip(f.Headers),
			router.Header{Name: "X-Service-Name", Value: b.Service.Name},
			router.Header{Name: "X-Service-Port", Value: strings.Trim(ingressPortString(b.Service.Port), `"`)})
		rule.Fallback = &f
	}
	return rule
}
