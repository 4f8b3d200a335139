package kubetest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// crdResource is apiextensions.k8s.io/v1 CustomResourceDefinitions, reached
// with a dynamic client: the apiextensions clientset is not worth a module.
var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// crdEstablishTimeout bounds the wait for the API server to serve a CRD.
const crdEstablishTimeout = 30 * time.Second

// InstallCRDs creates every CustomResourceDefinition of deploy/kubernetes
// and waits until the API server serves each (Established), so a test can
// use the resources at once. It returns the names of the CRDs.
func InstallCRDs(tb testing.TB, cfg *rest.Config) []string {
	tb.Helper()
	root, err := repoRoot()
	if err != nil {
		tb.Fatal(err)
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	crds := client.Resource(crdResource)
	ctx := context.Background()
	var names []string
	for _, crd := range deployedCRDs(tb, filepath.Join(root, "deploy", "kubernetes")) {
		if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
			tb.Fatalf("creating CRD %s: %v", crd.GetName(), err)
		}
		names = append(names, crd.GetName())
	}
	for _, name := range names {
		waitEstablished(tb, crds, name)
	}
	return names
}

// deployedCRDs returns the CustomResourceDefinitions of the YAML files in dir.
func deployedCRDs(tb testing.TB, dir string) []*unstructured.Unstructured {
	tb.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, path := range paths {
		for _, obj := range yamlObjects(tb, path) {
			if obj.GetKind() == "CustomResourceDefinition" && obj.GroupVersionKind().Group == crdResource.Group {
				out = append(out, obj)
			}
		}
	}
	if len(out) == 0 {
		tb.Fatalf("no CustomResourceDefinition in %s", dir)
	}
	return out
}

// yamlObjects decodes every document of a YAML file.
func yamlObjects(tb testing.TB, path string) []*unstructured.Unstructured {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*unstructured.Unstructured
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			tb.Fatalf("%s: %v", path, err)
		}
		obj := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &obj.Object); err != nil {
			tb.Fatalf("%s: %v", path, err)
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
}

// waitEstablished waits for the CRD's Established condition: before it, the
// API server answers 404 for the resource.
func waitEstablished(tb testing.TB, crds dynamic.ResourceInterface, name string) {
	tb.Helper()
	var last *unstructured.Unstructured
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, crdEstablishTimeout, true, func(ctx context.Context) (bool, error) {
		crd, err := crds.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = crd
		return conditionTrue(crd, "Established"), nil
	})
	if err != nil {
		var status any
		if last != nil {
			status = last.Object["status"]
		}
		tb.Fatalf("CRD %s not established: %v (status %v)", name, err, status)
	}
}

func conditionTrue(obj *unstructured.Unstructured, conditionType string) bool {
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conditions {
		if m, ok := c.(map[string]any); ok && m["type"] == conditionType && m["status"] == "True" {
			return true
		}
	}
	return false
}
