package watch

// BackendTLSPolicy: TLS from the proxy to the Services a policy targets.
//
// The policies of a namespace are resolved once per translation, when a
// backend of that namespace is first looked up: which policy wins each
// Service port (one naming the port's name before one naming the whole
// Service; of two naming the same, the oldest, then by name, and the other
// is Conflicted) and the TLS identity each one asks for, shared by every
// backend it applies to. A backend whose policy cannot be served answers
// 5xx rather than fall back to plain text. Each policy's status has one
// entry per Gateway of ours whose routes use a Service it targets.
// Ingress backends are Service ports like any other and get the same TLS
// (an implementation-specific use of the policy), but an Ingress is no
// ancestor: a policy that only Ingresses use gets no status.

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostgate/hostgate/router"
)

// policyTarget is a Service port a BackendTLSPolicy targets; an empty
// section targets every port of the Service.
type policyTarget struct {
	service types.NamespacedName
	section string
}

// backendPolicy is a BackendTLSPolicy resolved by one translation.
type backendPolicy struct {
	obj *gatewayv1.BackendTLSPolicy
	// tls is what backends it applies to are checked with; nil when the
	// policy cannot be served.
	tls                    *router.BackendTLS
	accepted, resolvedRefs problem
	// ca are the objects its CA references name, which a memoized backend
	// using it depends on.
	ca caSources
}

// namespacePolicies are the BackendTLSPolicies of one namespace.
type namespacePolicies struct {
	winners map[policyTarget]*backendPolicy
	// targeted are the Services some policy targets, whether it won or not.
	targeted map[types.NamespacedName]bool
	byObject map[*gatewayv1.BackendTLSPolicy]*backendPolicy
}

// noPolicies are those of most namespaces, where no map is worth making.
var noPolicies namespacePolicies

// policiesOf resolves the BackendTLSPolicies of namespace, once per
// translation.
func (t *translator) policiesOf(namespace string) *namespacePolicies {
	t.dependOnPolicies(namespace)
	if t.policies.last(namespace) == nil {
		return &noPolicies
	}
	if np := t.tlsPolicies[namespace]; np != nil {
		return np
	}
	np := &namespacePolicies{
		winners:  map[policyTarget]*backendPolicy{},
		targeted: map[types.NamespacedName]bool{},
		byObject: map[*gatewayv1.BackendTLSPolicy]*backendPolicy{},
	}
	// In sorted order: the oldest policy, then the first by name, wins.
	var one [1]*gatewayv1.BackendTLSPolicy
	for _, obj := range t.policies.of(namespace, &one) {
		p := t.resolvePolicy(obj)
		np.byObject[obj] = p
		for i, ref := range obj.Spec.TargetRefs {
			if ref.Group != "" || ref.Kind != "Service" {
				continue
			}
			target := policyTarget{types.NamespacedName{Namespace: namespace, Name: string(ref.Name)}, string(derefOr(ref.SectionName, ""))}
			np.targeted[target.service] = true
			if other := np.winners[target]; other != nil && other != p {
				p.accepted.first(string(gatewayv1.PolicyReasonConflicted), fmt.Sprintf("spec.targetRefs[%d]: BackendTLSPolicy %s/%s already applies to %s", i, namespace, other.obj.Name, describeTarget(target)))
				continue
			}
			np.winners[target] = p
		}
	}
	if t.tlsPolicies == nil {
		t.tlsPolicies = map[string]*namespacePolicies{}
	}
	t.tlsPolicies[namespace] = np
	return np
}

func describeTarget(target policyTarget) string {
	if target.section == "" {
		return "Service " + target.service.String()
	}
	return fmt.Sprintf("Service %s port %q", target.service, target.section)
}

// resolvePolicy checks a policy's validation and reads its CA
// certificates.
func (t *translator) resolvePolicy(obj *gatewayv1.BackendTLSPolicy) *backendPolicy {
	p := &backendPolicy{obj: obj}
	v := &obj.Spec.Validation
	tls := &router.BackendTLS{ServerName: string(v.Hostname)}
	if tls.ServerName == "" {
		// The CRD requires it; files are not checked against the CRD.
		p.accepted.first(string(gatewayv1.PolicyReasonInvalid), "spec.validation.hostname: required")
	}
	for i, san := range v.SubjectAltNames {
		switch {
		case san.Type == gatewayv1.HostnameSubjectAltNameType && san.Hostname != "":
			tls.SubjectAltNames = append(tls.SubjectAltNames, router.SubjectAltName{Hostname: string(san.Hostname)})
		case san.Type == gatewayv1.URISubjectAltNameType && san.URI != "":
			tls.SubjectAltNames = append(tls.SubjectAltNames, router.SubjectAltName{URI: string(san.URI)})
		default:
			p.accepted.first(string(gatewayv1.PolicyReasonInvalid), fmt.Sprintf("spec.validation.subjectAltNames[%d]: type %q needs its own field set", i, san.Type))
		}
	}
	switch {
	case v.WellKnownCACertificates != nil && len(v.CACertificateRefs) > 0:
		p.accepted.first(string(gatewayv1.PolicyReasonInvalid), "spec.validation: caCertificateRefs and wellKnownCACertificates exclude each other")
	case v.WellKnownCACertificates != nil:
		if *v.WellKnownCACertificates != gatewayv1.WellKnownCACertificatesSystem {
			p.accepted.first(string(gatewayv1.PolicyReasonInvalid), fmt.Sprintf("spec.validation.wellKnownCACertificates: %q is not supported, only %s", *v.WellKnownCACertificates, gatewayv1.WellKnownCACertificatesSystem))
		}
	case len(v.CACertificateRefs) == 0:
		p.accepted.first(string(gatewayv1.PolicyReasonInvalid), "spec.validation: caCertificateRefs or wellKnownCACertificates is required")
	default:
		from := refFrom{kind: "BackendTLSPolicy", namespace: obj.Namespace}
		for i, ref := range v.CACertificateRefs {
			bundle, err := t.caBundle(from, gatewayv1.ObjectReference{Group: ref.Group, Kind: ref.Kind, Name: ref.Name}, &p.ca)
			if err != nil {
				reason := gatewayv1.BackendTLSPolicyReasonInvalidCACertificateRef
				if err.fault == caUnsupportedKind {
					reason = gatewayv1.BackendTLSPolicyReasonInvalidKind
				}
				p.resolvedRefs.first(string(reason), err.at(fmt.Sprintf("spec.validation.caCertificateRefs[%d]", i)))
				continue
			}
			tls.CAPEM = append(tls.CAPEM, bundle...)
		}
		if tls.CAPEM == nil {
			p.accepted.first(string(gatewayv1.BackendTLSPolicyReasonNoValidCACertificate), "spec.validation.caCertificateRefs: none resolves to CA certificates")
		}
	}
	if p.accepted.ok() {
		p.tls = tls
	}
	return p
}

// servicePolicy returns the policy that applies to port of svc, or nil.
func (t *translator) servicePolicy(svc *service, port *corev1.ServicePort) *backendPolicy {
	np := t.policiesOf(svc.Namespace)
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	var p *backendPolicy
	if port.Name != "" {
		p = np.winners[policyTarget{key, port.Name}]
	}
	if p == nil {
		p = np.winners[policyTarget{key, ""}]
	}
	if p != nil {
		t.dependOnCA(&p.ca)
	}
	return p
}

// withTLS is the protocol of a backend that a policy puts behind TLS:
// HTTP/2 where it was h2c, else HTTP/1.1. appProtocol values the proxy
// does not know are fine then: the policy says what to speak.
func withTLS(protocol string) string {
	if protocol == "h2c" || protocol == "h2" {
		return "h2"
	}
	return "https"
}

// notePolicyService remembers that r uses the Service of ref when a
// BackendTLSPolicy targets it, so that the policy's status names r's
// Gateways.
func (t *translator) notePolicyService(r *route, ref *gatewayv1.BackendObjectReference) {
	if (ref.Group != nil && *ref.Group != "") || (ref.Kind != nil && *ref.Kind != "Service") {
		return
	}
	key := types.NamespacedName{Namespace: r.meta.Namespace, Name: string(ref.Name)}
	if ref.Namespace != nil {
		key.Namespace = string(*ref.Namespace)
	}
	if t.policiesOf(key.Namespace).targeted[key] {
		if tls := r.backendTLSState(); !slices.Contains(tls.policyServices, key) {
			tls.policyServices = append(tls.policyServices, key)
		}
	}
}

// addPolicyAncestors records that g serves a route using the Services of
// r that policies target.
func (t *translator) addPolicyAncestors(r *route, g *gateway) {
	if r.backendTLS == nil {
		return
	}
	for _, svc := range r.backendTLS.policyServices {
		if !slices.Contains(t.policyAncestors[svc], g) {
			if t.policyAncestors == nil {
				t.policyAncestors = map[types.NamespacedName][]*gateway{}
			}
			t.policyAncestors[svc] = append(t.policyAncestors[svc], g)
		}
	}
}

// backendTLSPolicies reports the status of every policy with an ancestor
// of ours, or with an entry of ours to remove.
func (t *translator) backendTLSPolicies() {
	controller := gatewayv1.GatewayController(t.opts.GatewayController)
	for _, obj := range t.objs.backendTLS {
		var gateways []*gateway
		for _, ref := range obj.Spec.TargetRefs {
			for _, g := range t.policyAncestors[types.NamespacedName{Namespace: obj.Namespace, Name: string(ref.Name)}] {
				if !slices.Contains(gateways, g) {
					gateways = append(gateways, g)
				}
			}
		}
		ours := slices.ContainsFunc(obj.Status.Ancestors, func(a gatewayv1.PolicyAncestorStatus) bool { return a.ControllerName == controller })
		if len(gateways) == 0 && !ours {
			continue
		}
		report := PolicyReport{Object: obj}
		if len(gateways) > 0 {
			p := t.policiesOf(obj.Namespace).byObject[obj]
			for _, g := range gateways {
				report.Ancestors = append(report.Ancestors, policyAncestorStatus(p, controller, g))
			}
		}
		t.reports.BackendTLSPolicies = append(t.reports.BackendTLSPolicies, report)
	}
	slices.SortFunc(t.reports.BackendTLSPolicies, func(a, b PolicyReport) int {
		return keyOf(a.Object).compare(keyOf(b.Object))
	})
}

func policyAncestorStatus(p *backendPolicy, controller gatewayv1.GatewayController, g *gateway) gatewayv1.PolicyAncestorStatus {
	gen := p.obj.Generation
	st := gatewayv1.PolicyAncestorStatus{
		AncestorRef: gatewayv1.ParentReference{
			Group:     new(gatewayv1.Group(gatewayv1.GroupName)),
			Kind:      new(gatewayv1.Kind("Gateway")),
			Namespace: new(gatewayv1.Namespace(g.obj.Namespace)),
			Name:      gatewayv1.ObjectName(g.obj.Name),
		},
		ControllerName: controller,
	}
	if p.accepted.ok() {
		setCondition(&st.Conditions, condition(gatewayv1.PolicyConditionAccepted, true, gatewayv1.PolicyReasonAccepted, gen, "accepted"))
	} else {
		setCondition(&st.Conditions, condition(gatewayv1.PolicyConditionAccepted, false, p.accepted.reason, gen, p.accepted.message))
	}
	if p.resolvedRefs.ok() {
		setCondition(&st.Conditions, condition(gatewayv1.BackendTLSPolicyConditionResolvedRefs, true, gatewayv1.BackendTLSPolicyReasonResolvedRefs, gen, "all references resolved"))
	} else {
		setCondition(&st.Conditions, condition(gatewayv1.BackendTLSPolicyConditionResolvedRefs, false, p.resolvedRefs.reason, gen, p.resolvedRefs.message))
	}
	return st
}
