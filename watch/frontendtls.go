package watch

// Client certificate validation of HTTPS listeners (Gateway
// spec.tls.frontend): which validation a listener gets, the listener
// conditions of references that do not resolve, and the Gateway condition
// that warns of AllowInsecureFallback. The data plane applies a listener's
// validation to the handshakes whose server name selects that listener.

import (
	"fmt"
	"strings"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// frontendField is one validation of spec.tls.frontend and where it is.
type frontendField struct {
	validation *gatewayv1.FrontendTLSValidation
	field      string
	// port is the perPort entry's port, 0 for the default.
	port gatewayv1.PortNumber
}

// frontendFields are the validations of gw's spec.tls.frontend: the
// perPort entries, then the default.
func frontendFields(gw *gatewayv1.Gateway) []frontendField {
	if gw.Spec.TLS == nil || gw.Spec.TLS.Frontend == nil {
		return nil
	}
	frontend := gw.Spec.TLS.Frontend
	var out []frontendField
	for i, p := range frontend.PerPort {
		out = append(out, frontendField{p.TLS.Validation, fmt.Sprintf("spec.tls.frontend.perPort[%d].tls.validation", i), p.Port})
	}
	return append(out, frontendField{frontend.Default.Validation, "spec.tls.frontend.default.validation", 0})
}

// frontendValidation is the validation spec.tls.frontend asks of a
// Gateway's HTTPS listeners on port: the perPort entry of the port, which
// replaces the default whole, else the default. Its validation is nil
// when none applies.
func frontendValidation(gw *gatewayv1.Gateway, port gatewayv1.PortNumber) frontendField {
	for _, f := range frontendFields(gw) {
		if f.port == port || f.port == 0 {
			return f
		}
	}
	return frontendField{}
}

// listenerClientValidation gives l, an HTTPS listener, the validation its
// Gateway asks for. A reference that does not resolve makes ResolvedRefs
// False; when none resolves, the listener is not accepted, and so not
// served: serving it without the validation would let in the clients it
// was meant to keep out.
func (t *translator) listenerClientValidation(l *listener) {
	gw := l.gw.obj
	f := frontendValidation(gw, l.spec.Port)
	v, field := f.validation, f.field
	if v == nil {
		return
	}
	optional := false
	switch v.Mode {
	case "", gatewayv1.AllowValidOnly:
	case gatewayv1.AllowInsecureFallback:
		optional = true
	default:
		l.accepted.first(string(gatewayv1.ListenerReasonUnsupportedValue),
			fmt.Sprintf("%s.mode %q: must be %s or %s", field, v.Mode, gatewayv1.AllowValidOnly, gatewayv1.AllowInsecureFallback))
		return
	}
	var bundle []byte
	for i, ref := range v.CACertificateRefs {
		// Listeners are translated afresh every time: nothing to depend on.
		certs, err := t.caBundle(refFrom{kind: "Gateway", namespace: gw.Namespace}, ref, nil)
		if err != nil {
			l.resolvedRefs.first(string(listenerCAReason[err.fault]), err.at(fmt.Sprintf("%s.caCertificateRefs[%d]", field, i)))
			continue
		}
		bundle = append(bundle, certs...)
	}
	if bundle == nil {
		l.accepted.first(string(gatewayv1.ListenerReasonNoValidCACertificate),
			fmt.Sprintf("%s.caCertificateRefs: no reference resolves to a CA certificate", field))
		return
	}
	l.validation = &ClientValidation{
		Name:     l.path(),
		Hostname: l.hostname,
		CAPEM:    bundle,
		Optional: optional,
	}
}

// listenerCAReason is the listener ResolvedRefs reason of each fault of a
// caCertificateRef.
var listenerCAReason = map[caRefFault]gatewayv1.ListenerConditionReason{
	caUnsupportedKind: gatewayv1.ListenerReasonInvalidCACertificateKind,
	caNotPermitted:    gatewayv1.ListenerReasonRefNotPermitted,
	caInvalid:         gatewayv1.ListenerReasonInvalidCACertificateRef,
}

// insecureFrontendValidation is the message of the Gateway condition
// InsecureFrontendValidationMode, which says that spec.tls.frontend lets
// clients without a valid certificate through somewhere; "" when it does
// not, and the condition is left out.
func insecureFrontendValidation(gw *gatewayv1.Gateway) string {
	var fields []string
	for _, f := range frontendFields(gw) {
		if f.validation != nil && f.validation.Mode == gatewayv1.AllowInsecureFallback {
			fields = append(fields, f.field+".mode")
		}
	}
	if len(fields) == 0 {
		return ""
	}
	return strings.Join(fields, ", ") + ": " + string(gatewayv1.AllowInsecureFallback) +
		" lets clients without a valid certificate through, leaving the backends to check them"
}
