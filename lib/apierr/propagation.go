package apierr

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// PropagationPolicy reads a delete request's propagation policy: empty is
// Background (as kubectl), an unknown one a violation of field.
func PropagationPolicy(v *Violations, field, policy string) metav1.DeletionPropagation {
	propagation := metav1.DeletionPropagation(policy)
	switch propagation {
	case "":
		return metav1.DeletePropagationBackground
	case metav1.DeletePropagationBackground, metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan:
	default:
		v.Add(field, "Unsupported value: %q: supported values: %q, %q, %q", propagation,
			metav1.DeletePropagationBackground, metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan)
	}
	return propagation
}
