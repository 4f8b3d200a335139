package apierr

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// PropagationPolicy reads a delete request's propagation policy at path:
// empty is Background (as kubectl), an unknown one an error.
func PropagationPolicy(path *field.Path, policy string) (metav1.DeletionPropagation, *field.Error) {
	propagation := metav1.DeletionPropagation(policy)
	switch propagation {
	case "":
		return metav1.DeletePropagationBackground, nil
	case metav1.DeletePropagationBackground, metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan:
		return propagation, nil
	}
	return propagation, field.NotSupported(path, propagation, []metav1.DeletionPropagation{
		metav1.DeletePropagationBackground, metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan})
}
