// The suite's echo server, built by hack/conformance.sh. v1.7.0's manifests
// name the image registry.k8s.io/gateway-api/conformance/echo-basic, built
// from sigs.k8s.io/gateway-api-conformance-images, which the module proxy
// does not serve here; the same program (the same /retry/, gRPC, TCP and UDP
// modes and environment variables) is in sigs.k8s.io/gateway-api/conformance
// v1.6.3. Its go.mod replaces the root module with ../, which only works
// when it is a dependency, so this small module requires it.
module github.com/hostgate/hostgate/conformance/echo

go 1.27.0

toolchain go1.27.3

tool sigs.k8s.io/gateway-api/conformance/echo-basic

require (
	golang.org/x/net v0.55.0 // indirect
	golang.org/x/sys v0.45.0 // indirect
	golang.org/x/text v0.37.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260427160629-7cedc36a6bc4 // indirect
	google.golang.org/grpc v1.81.1 // indirect
	google.golang.org/protobuf v1.36.12-0.20260120151049-f2248ac996af // indirect
	sigs.k8s.io/gateway-api/conformance v1.6.3 // indirect
)
