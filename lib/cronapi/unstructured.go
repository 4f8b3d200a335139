package cronapi

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// FromUnstructured decodes a CronJob read with a dynamic client.
func FromUnstructured(u *unstructured.Unstructured) (*CronJob, error) {
	c := &CronJob{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, c); err != nil {
		return nil, fmt.Errorf("decoding CronJob %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return c, nil
}

// ToUnstructured encodes a CronJob for a dynamic client, with its apiVersion
// and kind set.
func ToUnstructured(c *CronJob) (*unstructured.Unstructured, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c)
	if err != nil {
		return nil, fmt.Errorf("encoding CronJob %s/%s: %w", c.Namespace, c.Name, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(APIVersion)
	u.SetKind(Kind)
	return u, nil
}
