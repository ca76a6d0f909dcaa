package watch

import (
	"testing"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gatewayinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"
)

// TestBigKindsHaveNoNamespaceIndex: the informers of the kinds a cluster
// holds by the thousand keep no namespace index (43 bytes an object), and
// the factories still hand them out to whoever asks for the kind.
func TestBigKindsHaveNoNamespaceIndex(t *testing.T) {
	cfg := &rest.Config{Host: "http://127.0.0.1:1"} // never dialled: nothing starts
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gatewayclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := &clusterStore{core: informers.NewSharedInformerFactory(kube, 0), gateway: gatewayinformers.NewSharedInformerFactory(gw, 0)}
	c.registerUnindexedCore()
	kinds := c.gatewayKinds()
	for name, informer := range map[string]cache.SharedIndexInformer{
		"Services":       c.core.Core().V1().Services().Informer(),
		"EndpointSlices": c.core.Discovery().V1().EndpointSlices().Informer(),
		"Ingresses":      c.core.Networking().V1().Ingresses().Informer(),
		"HTTPRoutes":     kinds["httproutes"](),
		"GRPCRoutes":     kinds["grpcroutes"](),
	} {
		if indexers := informer.GetIndexer().GetIndexers(); len(indexers) != 0 {
			t.Errorf("the informer of %s has indexers %v, want none", name, indexers)
		}
	}
	// Asked for again through the factory, the kind's informer is ours.
	if indexers := c.gateway.Gateway().V1().HTTPRoutes().Informer().GetIndexer().GetIndexers(); len(indexers) != 0 {
		t.Errorf("the factory's HTTPRoute informer has indexers %v, want none", indexers)
	}
	// The other kinds keep the factories' informers, index and all.
	if indexers := c.gateway.Gateway().V1().Gateways().Informer().GetIndexer().GetIndexers(); len(indexers) == 0 {
		t.Error("the Gateway informer has no namespace index: the test no longer tells the factories' informers from ours")
	}
}
