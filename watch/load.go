package watch

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"
)

// kindInfo says how to decode one kind found in a file.
type kindInfo struct {
	versions   []string
	namespaced bool
	decode     func(doc []byte) (metav1.Object, error)
}

func decodeAs[T any, PT interface {
	*T
	metav1.Object
}](doc []byte) (metav1.Object, error) {
	var v T
	if err := yaml.UnmarshalStrict(doc, &v); err != nil {
		return nil, err
	}
	return PT(&v), nil
}

// fileKinds are the kinds file mode reads. Gateway API kinds also accept
// v1beta1, whose fields are those of v1 for everything hostgate reads.
var fileKinds = map[schema.GroupKind]kindInfo{
	{Kind: "Service"}:   {[]string{"v1"}, true, decodeAs[corev1.Service]},
	{Kind: "Secret"}:    {[]string{"v1"}, true, decodeAs[corev1.Secret]},
	{Kind: "ConfigMap"}: {[]string{"v1"}, true, decodeAs[corev1.ConfigMap]},
	{Kind: "Namespace"}: {[]string{"v1"}, false, decodeAs[corev1.Namespace]},
	{Kind: "Node"}:      {[]string{"v1"}, false, decodeAs[corev1.Node]},
	{Group: "discovery.k8s.io", Kind: "EndpointSlice"}: {[]string{"v1"}, true, decodeAs[discoveryv1.EndpointSlice]},
	// v1beta1's fields are v1's: clusters before Kubernetes 1.37 serve
	// at most v1beta1, and files may come from them.
	{Group: certificatesv1.GroupName, Kind: "ClusterTrustBundle"}: {[]string{"v1", "v1beta1"}, false, decodeAs[certificatesv1.ClusterTrustBundle]},
	{Group: "networking.k8s.io", Kind: "Ingress"}:                 {[]string{"v1"}, true, decodeAs[networkingv1.Ingress]},
	{Group: "networking.k8s.io", Kind: "IngressClass"}:            {[]string{"v1"}, false, decodeAs[networkingv1.IngressClass]},
	{Group: gatewayv1.GroupName, Kind: "GatewayClass"}:            {gatewayVersions, false, decodeAs[gatewayv1.GatewayClass]},
	{Group: gatewayv1.GroupName, Kind: "Gateway"}:                 {gatewayVersions, true, decodeAs[gatewayv1.Gateway]},
	{Group: gatewayv1.GroupName, Kind: "ListenerSet"}:             {[]string{"v1"}, true, decodeAs[gatewayv1.ListenerSet]},
	{Group: gatewayv1.GroupName, Kind: "HTTPRoute"}:               {gatewayVersions, true, decodeAs[gatewayv1.HTTPRoute]},
	{Group: gatewayv1.GroupName, Kind: "GRPCRoute"}:               {[]string{"v1"}, true, decodeAs[gatewayv1.GRPCRoute]},
	{Group: gatewayv1.GroupName, Kind: "TLSRoute"}:                {[]string{"v1"}, true, decodeAs[gatewayv1.TLSRoute]},
	{Group: gatewayv1.GroupName, Kind: "TCPRoute"}:                {[]string{"v1"}, true, decodeAs[gatewayv1.TCPRoute]},
	{Group: gatewayv1.GroupName, Kind: "UDPRoute"}:                {[]string{"v1"}, true, decodeAs[gatewayv1.UDPRoute]},
	{Group: gatewayv1.GroupName, Kind: "ReferenceGrant"}:          {gatewayVersions, true, decodeAs[gatewayv1.ReferenceGrant]},
	{Group: gatewayv1.GroupName, Kind: "BackendTLSPolicy"}:        {[]string{"v1"}, true, decodeAs[gatewayv1.BackendTLSPolicy]},
}

var gatewayVersions = []string{"v1", "v1beta1"}

// maxDocuments bounds how many documents one file may hold, so that a
// pathological input cannot make a reload unbounded.
const maxDocuments = 10000

// adder receives decoded objects: the store, or one file's list of them.
type adder interface {
	add(obj any, hint int) bool
}

// decodeYAML adds the objects of a multi-document YAML stream to objs. A
// document that cannot be decoded is reported and skipped; the others are
// kept. name is the file name errors start with.
func decodeYAML(name string, r io.Reader, objs adder) []error {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var errs []error
	for i := 0; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return errs
		}
		if err != nil {
			return append(errs, fmt.Errorf("%s: document %d: %w", name, i, err))
		}
		if i >= maxDocuments {
			return append(errs, fmt.Errorf("%s: more than %d documents", name, maxDocuments))
		}
		if err := decodeDocument(doc, objs); err != nil {
			errs = append(errs, fmt.Errorf("%s: document %d: %w", name, i, err))
		}
	}
}

func decodeDocument(doc []byte, objs adder) error {
	if len(stripComments(doc)) == 0 {
		return nil
	}
	var head struct {
		metav1.TypeMeta `json:",inline"`
		Items           []any `json:"items"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return err
	}
	if head.Kind == "" || head.APIVersion == "" {
		return errors.New("apiVersion and kind: missing")
	}
	gv, err := schema.ParseGroupVersion(head.APIVersion)
	if err != nil {
		return fmt.Errorf("apiVersion %q: %w", head.APIVersion, err)
	}
	if head.Kind == "List" && gv.Group == "" {
		return decodeList(head.Items, objs)
	}
	info, ok := fileKinds[schema.GroupKind{Group: gv.Group, Kind: head.Kind}]
	if !ok {
		// Deployments and the like may share a file with what hostgate
		// serves; they are not an error.
		return nil
	}
	if !slices.Contains(info.versions, gv.Version) {
		return fmt.Errorf("%s %s: apiVersion %q: not supported (use one of %v)", head.Kind, gv.Group, head.APIVersion, info.versions)
	}
	obj, err := info.decode(doc)
	if err != nil {
		return fmt.Errorf("%s: %w", head.Kind, err)
	}
	if obj.GetName() == "" {
		return fmt.Errorf("%s: metadata.name: must not be empty", head.Kind)
	}
	switch {
	case !info.namespaced && obj.GetNamespace() != "":
		return fmt.Errorf("%s %s: metadata.namespace: %s is cluster-scoped", head.Kind, obj.GetName(), head.Kind)
	case info.namespaced && obj.GetNamespace() == "":
		obj.SetNamespace(metav1.NamespaceDefault)
	}
	if s, ok := obj.(*corev1.Secret); ok {
		mergeStringData(s)
	}
	objs.add(obj, 0)
	return nil
}

// mergeStringData does what the API server does on write: stringData
// entries are merged into data, and win.
func mergeStringData(s *corev1.Secret) {
	if len(s.StringData) == 0 {
		return
	}
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	for k, v := range s.StringData {
		s.Data[k] = []byte(v)
	}
	s.StringData = nil
}

func decodeList(items []any, objs adder) error {
	var errs []error
	for i, item := range items {
		doc, err := yaml.Marshal(item)
		if err == nil {
			err = decodeDocument(doc, objs)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("items[%d]: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// stripComments returns doc without blank and comment lines, to tell an
// empty document from one that lacks its type.
func stripComments(doc []byte) []byte {
	var out []byte
	for line := range bytes.Lines(doc) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out = append(out, t...)
		}
	}
	return out
}
