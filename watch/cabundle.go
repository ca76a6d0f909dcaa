package watch

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// caCertKey is the ConfigMap key Gateway API reads CA certificates from,
// for client certificate validation as for BackendTLSPolicy.
const caCertKey = "ca.crt"

// caRefFault is why a reference to CA certificates does not resolve. Each
// kind of object that holds such references reports it with a reason of
// its own status.
type caRefFault uint8

const (
	// caUnsupportedKind: the reference names something other than a
	// ConfigMap or a ClusterTrustBundle.
	caUnsupportedKind caRefFault = iota + 1
	// caNotPermitted: a ConfigMap of another namespace that no
	// ReferenceGrant lets the referrer use.
	caNotPermitted
	// caInvalid: the object is missing, or holds no certificate or one
	// that does not parse, or the reference gives a ClusterTrustBundle a
	// namespace.
	caInvalid
)

type caRefError struct {
	fault caRefFault
	// field is the field of the reference at fault, after the
	// reference's own path; empty for the reference as a whole.
	field string
	err   error
}

func (e *caRefError) Error() string { return e.err.Error() }

// at is the error's message for the reference at path.
func (e *caRefError) at(path string) string { return path + e.field + ": " + e.err.Error() }

func caRefErr(fault caRefFault, format string, args ...any) *caRefError {
	return &caRefError{fault: fault, err: fmt.Errorf(format, args...)}
}

// caSources are the objects that CA references named, found or not. A
// memoized result that used their certificates depends on them: the
// references resolve to something else once one of them changes.
type caSources struct {
	configMaps   []types.NamespacedName
	trustBundles []string
}

// caBundle resolves a reference from an object of from to CA certificates:
// those of a ConfigMap's ca.crt or of a ClusterTrustBundle, checked and
// PEM-encoded anew, so that bundles of several references concatenate
// cleanly. The objects looked up are added to used, unless it is nil.
func (t *translator) caBundle(from refFrom, ref gatewayv1.ObjectReference, used *caSources) ([]byte, *caRefError) {
	switch {
	case ref.Group == "" && ref.Kind == "ConfigMap":
		return t.configMapBundle(from, ref, used)
	case ref.Group == certificatesv1.GroupName && ref.Kind == "ClusterTrustBundle":
		return t.trustBundle(ref, used)
	}
	return nil, caRefErr(caUnsupportedKind, "%s: only ConfigMap and ClusterTrustBundle.%s are supported", groupKind(&ref.Group, ref.Kind), certificatesv1.GroupName)
}

func (t *translator) configMapBundle(from refFrom, ref gatewayv1.ObjectReference, used *caSources) ([]byte, *caRefError) {
	namespace := from.namespace
	if ref.Namespace != nil {
		namespace = string(*ref.Namespace)
	}
	if !t.permitted(from, "", "ConfigMap", namespace, string(ref.Name)) {
		return nil, caRefErr(caNotPermitted, "ConfigMap %s/%s: no ReferenceGrant allows the reference", namespace, ref.Name)
	}
	key := types.NamespacedName{Namespace: namespace, Name: string(ref.Name)}
	if used != nil {
		used.configMaps = append(used.configMaps, key)
	}
	cm := t.configMaps.last(key)
	if cm == nil {
		return nil, caRefErr(caInvalid, "ConfigMap %s/%s: not found", namespace, ref.Name)
	}
	data, ok := cm.Data[caCertKey]
	if !ok {
		return nil, caRefErr(caInvalid, "ConfigMap %s/%s: no key %s", namespace, ref.Name, caCertKey)
	}
	bundle, err := checkCertificates([]byte(data))
	if err != nil {
		return nil, caRefErr(caInvalid, "ConfigMap %s/%s: %s: %v", namespace, ref.Name, caCertKey, err)
	}
	return bundle, nil
}

// trustBundle resolves a reference to a ClusterTrustBundle: by name alone,
// as the object is cluster-scoped, and so without ReferenceGrant. A
// cluster whose API server serves no ClusterTrustBundle API has none, and
// the reference does not resolve, as one to a missing object.
func (t *translator) trustBundle(ref gatewayv1.ObjectReference, used *caSources) ([]byte, *caRefError) {
	if ref.Namespace != nil {
		e := caRefErr(caInvalid, "must be unset: ClusterTrustBundle %s is cluster-scoped", ref.Name)
		e.field = ".namespace"
		return nil, e
	}
	name := string(ref.Name)
	if used != nil {
		used.trustBundles = append(used.trustBundles, name)
	}
	ctb := t.trustBundles.last(name)
	if ctb == nil {
		return nil, caRefErr(caInvalid, "ClusterTrustBundle %s: not found", name)
	}
	bundle, err := checkCertificates([]byte(ctb.Spec.TrustBundle))
	if err != nil {
		return nil, caRefErr(caInvalid, "ClusterTrustBundle %s: spec.trustBundle: %v", name, err)
	}
	return bundle, nil
}

// checkCertificates returns the PEM certificates of data, re-encoded, or
// why data is not a list of them. Text around the blocks is ignored, as
// tools write comments there.
func checkCertificates(data []byte) ([]byte, error) {
	var out []byte
	for i := 0; ; i++ {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block %d: type %q, want CERTIFICATE", i, block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return nil, fmt.Errorf("PEM block %d: %w", i, err)
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: block.Type, Bytes: block.Bytes})...)
	}
	if out == nil {
		return nil, errors.New("no PEM certificate")
	}
	return out, nil
}
