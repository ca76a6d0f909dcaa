package kubetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// gatewayAPIModule provides the CRDs, at the version go.mod requires, so
// the tests run against exactly the API the code is compiled with.
const gatewayAPIModule = "sigs.k8s.io/gateway-api"

// gatewayAPIDir finds the module's experimental-channel manifests in the
// module cache. The go command is there whenever tests run (go test puts
// its own at the front of PATH), and "go mod download" also fetches the
// module on a fresh machine where nothing compiled has needed it yet.
var gatewayAPIDir = sync.OnceValues(func() (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", gatewayAPIModule)
	var output bytes.Buffer // on failure the reason is in the JSON or on stderr
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("locate module %s: go mod download: %w: %s", gatewayAPIModule, err, bytes.TrimSpace(output.Bytes()))
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(output.Bytes(), &mod); err != nil {
		return "", fmt.Errorf("locate module %s: decode go mod download's answer: %w", gatewayAPIModule, err)
	}
	return filepath.Join(mod.Dir, "config", "crd", "experimental"), nil
})

// InstallGatewayAPI applies the Gateway API CRDs of the experimental channel
// (and the channel's ValidatingAdmissionPolicy) with server-side apply, and
// waits until every CRD is Established. Start and Shared do this unless
// WithoutGatewayAPI is given.
func (e *Env) InstallGatewayAPI(ctx context.Context) error {
	dir, err := gatewayAPIDir()
	if err != nil {
		return err
	}
	objects, err := readManifests(dir)
	if err != nil {
		return err
	}

	disco, err := discovery.NewDiscoveryClientForConfig(e.Config)
	if err != nil {
		return fmt.Errorf("install Gateway API: %w", err)
	}
	groups, err := restmapper.GetAPIGroupResources(disco)
	if err != nil {
		return fmt.Errorf("install Gateway API: discover resources: %w", err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	client, err := dynamic.NewForConfig(e.Config)
	if err != nil {
		return fmt.Errorf("install Gateway API: %w", err)
	}

	resources := make([]schema.GroupVersionResource, len(objects))
	for i, obj := range objects {
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("install Gateway API: %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		resources[i] = mapping.Resource
	}

	// Applied concurrently: the API server spends most of an apply of a CRD
	// on its schema, and this way the CRDs share that time.
	var wg sync.WaitGroup
	errs := make([]error, len(objects))
	for i, obj := range objects {
		wg.Go(func() {
			// Force: the harness owns these objects, whoever applied them before.
			if _, err := client.Resource(resources[i]).Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "kubetest", Force: true}); err != nil {
				errs[i] = fmt.Errorf("install Gateway API: apply %s %s: %w", obj.GetKind(), obj.GetName(), err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}

	crdResource := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for _, obj := range objects {
		if obj.GetKind() != "CustomResourceDefinition" {
			continue
		}
		name := obj.GetName()
		err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			crd, err := client.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return established(crd), nil
		})
		if err != nil {
			return fmt.Errorf("install Gateway API: wait for CRD %s to be Established: %w", name, err)
		}
	}
	return nil
}

func established(crd *unstructured.Unstructured) bool {
	conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conditions {
		c, _ := c.(map[string]any)
		if c["type"] == "Established" && c["status"] == "True" {
			return true
		}
	}
	return false
}

// readManifests decodes every object of the YAML files in dir, in the
// order of the file names, leaving out kustomization.yaml.
func readManifests(dir string) ([]*unstructured.Unstructured, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("read manifests in %s: %w", dir, err)
	}
	var objects []*unstructured.Unstructured
	for _, path := range paths {
		if filepath.Base(path) == "kustomization.yaml" {
			continue
		}
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("read manifests: %w", err)
		}
		decoder := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
		for {
			obj := &unstructured.Unstructured{}
			err := decoder.Decode(&obj.Object)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("read manifests: decode %s: %w", path, err)
			}
			if len(obj.Object) > 0 { // an empty document between two "---"
				objects = append(objects, obj)
			}
		}
		f.Close()
	}
	if len(objects) == 0 {
		return nil, fmt.Errorf("read manifests: no objects in %s", dir)
	}
	return objects, nil
}
