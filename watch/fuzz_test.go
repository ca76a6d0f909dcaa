package watch

import (
	"bytes"
	"testing"
)

// maxFuzzInput bounds fuzz inputs so that one case, and the minimizing of
// an interesting one, stays fast.
const maxFuzzInput = 8 << 10

// fuzzSeeds are small documents of every kind the store keeps. The golden
// inputs are deliberately not used: at several kilobytes each they make
// the fuzzer spend its time minimizing.
var fuzzSeeds = []string{
	`apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: c}
spec: {controllerName: hostgate.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: g}
spec:
  gatewayClassName: c
  listeners: [{name: h, port: 80, protocol: HTTP, hostname: "*.a.b"}, {name: s, port: 443, protocol: HTTPS, tls: {certificateRefs: [{name: t}]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r}
spec:
  parentRefs: [{name: g, sectionName: h}]
  hostnames: [x.a.b]
  rules:
  - matches: [{path: {type: Exact, value: /p}, headers: [{name: h, value: v}]}]
    filters: [{type: CORS, cors: {allowOrigins: ["https://*.a.b:8443"], allowMethods: ["*"], exposeHeaders: [e], allowCredentials: true, maxAge: 9}}]
    backendRefs: [{name: s, port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: s}
spec: {ports: [{port: 80, targetPort: 8080}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: s, labels: {kubernetes.io/service-name: s}}
addressType: IPv4
endpoints: [{addresses: [10.0.0.1]}]
`,
	`apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: i}
spec:
  ingressClassName: hostgate
  rules: [{host: "*.a.b", http: {paths: [{path: /a, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}}]
  defaultBackend: {service: {name: s, port: {name: http}}}
`,
	`apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: r}
spec:
  parentRefs: [{name: g}]
  rules: [{matches: [{method: {type: RegularExpression, service: "a.*"}}], backendRefs: [{name: s, namespace: o, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: g, namespace: o}
spec: {from: [{group: gateway.networking.k8s.io, kind: GRPCRoute, namespace: default}], to: [{group: "", kind: Service}]}
`,
	`apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: g}
spec:
  gatewayClassName: c
  tls:
    frontend:
      default: {validation: {caCertificateRefs: [{kind: ConfigMap, group: "", name: ca}]}}
      perPort: [{port: 8443, tls: {validation: {mode: AllowInsecureFallback, caCertificateRefs: [{kind: ConfigMap, group: "", name: ca, namespace: o}]}}}]
  listeners: [{name: s, port: 443, protocol: HTTPS, hostname: a.b, tls: {certificateRefs: [{name: t}]}}, {name: f, port: 8443, protocol: HTTPS, tls: {certificateRefs: [{name: t}]}}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: ca}
data: {ca.crt: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"}
`,
	`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r}
spec:
  parentRefs: [{name: g}]
  rules: [{backendRefs: [{name: s, port: 443}, {name: t, port: 80}]}]
---
apiVersion: v1
kind: Service
metadata: {name: s}
spec: {ports: [{name: b, port: 443, appProtocol: HTTPS}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: p}
spec:
  targetRefs: [{group: "", kind: Service, name: s, sectionName: b}, {group: "", kind: Service, name: t}]
  validation:
    caCertificateRefs: [{group: "", kind: ConfigMap, name: ca}]
    hostname: s.a.b
    subjectAltNames: [{type: Hostname, hostname: x.a.b}, {type: URI, uri: "spiffe://a/b"}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: q}
spec:
  targetRefs: [{group: "", kind: Service, name: s}]
  validation: {wellKnownCACertificates: System, hostname: s.a.b}
`,
	`apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: g}
spec:
  gatewayClassName: c
  allowedListeners: {namespaces: {from: Selector, selector: {matchLabels: {t: a}}}}
  listeners: [{name: h, port: 80, protocol: HTTP, hostname: a.b}]
---
apiVersion: v1
kind: Namespace
metadata: {name: o, labels: {t: a}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: l, namespace: o}
spec:
  parentRef: {name: g, namespace: default}
  listeners: [{name: h, port: 80, protocol: HTTP, hostname: a.b}, {name: s, port: 443, protocol: HTTPS, tls: {certificateRefs: [{name: t, namespace: default}]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: o}
spec:
  parentRefs: [{kind: ListenerSet, name: l, sectionName: s}, {name: g, namespace: default}]
  rules: [{backendRefs: [{name: s, port: 80}]}]
`,
	"apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Service, metadata: {name: a}}\n",
	"---\n# only a comment\n---\n",
}

func addSeeds(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
}

// FuzzDecodeYAML checks that the file loader never panics and that every
// object it keeps has a name.
func FuzzDecodeYAML(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			return
		}
		var objs objects
		decodeYAML("fuzz.yaml", bytes.NewReader(data), &objs)
		for _, s := range objs.services {
			if s.Name == "" || s.Namespace == "" {
				t.Fatalf("service kept without name or namespace: %+v", s.cachedMeta)
			}
		}
	})
}

// FuzzTranslate checks that translation of whatever loads never panics,
// is deterministic, and only produces routes the router compiles.
func FuzzTranslate(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			return
		}
		load := func() *objects {
			objs := &objects{crdBundleVersion: "v1.7.0"}
			decodeYAML("fuzz.yaml", bytes.NewReader(data), objs)
			return objs
		}
		opts := Options{IngressHTTPAddr: ":80", IngressHTTPSAddr: ":443", AddressPool: []string{"127.0.0.2"}}
		snap, _ := translate(load(), opts)
		first := describeSnapshot(snap)
		if bytes.Contains([]byte(first), []byte("compile error")) {
			t.Fatalf("translation produced a route the router refuses:\n%s", first)
		}
		again, _ := translate(load(), opts)
		if second := describeSnapshot(again); second != first {
			t.Fatalf("translation is not deterministic:\n%s\n---\n%s", first, second)
		}
		// With a memo, as in cluster mode: each object goes and comes back,
		// and every result must be the one a fresh translation makes.
		checkMemo(t, load(), opts, newFeed(), t.Fatalf)
	})
}
