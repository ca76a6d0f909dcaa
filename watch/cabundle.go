package watch

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

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
	// ConfigMap.
	caUnsupportedKind caRefFault = iota + 1
	// caNotPermitted: a ConfigMap of another namespace that no
	// ReferenceGrant lets the referrer use.
	caNotPermitted
	// caInvalid: the ConfigMap is missing, or its ca.crt holds no
	// certificate or one that does not parse.
	caInvalid
)

type caRefError struct {
	fault caRefFault
	err   error
}

func (e *caRefError) Error() string { return e.err.Error() }

func caRefErr(fault caRefFault, format string, args ...any) *caRefError {
	return &caRefError{fault: fault, err: fmt.Errorf(format, args...)}
}

// caBundle resolves a reference from an object of from to CA certificates:
// those of the ConfigMap's ca.crt, checked and PEM-encoded anew, so that
// bundles of several references concatenate cleanly.
func (t *translator) caBundle(from refFrom, ref gatewayv1.ObjectReference) ([]byte, *caRefError) {
	if ref.Group != "" || ref.Kind != "ConfigMap" {
		return nil, caRefErr(caUnsupportedKind, "%s: only ConfigMaps are supported", groupKind(&ref.Group, ref.Kind))
	}
	namespace := from.namespace
	if ref.Namespace != nil {
		namespace = string(*ref.Namespace)
	}
	if !t.permitted(from, "", "ConfigMap", namespace, string(ref.Name)) {
		return nil, caRefErr(caNotPermitted, "ConfigMap %s/%s: no ReferenceGrant allows the reference", namespace, ref.Name)
	}
	cm := t.configMaps.last(types.NamespacedName{Namespace: namespace, Name: string(ref.Name)})
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
