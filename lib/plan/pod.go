package plan

import (
	"maps"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NewPod is the pod the reference's controller creates for a Job: the Job's
// template, a controller owner reference to the Job, and the overlays of p
// (generateName, hostname, labels, annotations, finalizers, and the
// environment variables every container and init container gets unless it
// defines them already).
func NewPod(job *batchv1.Job, p PodToCreate) *corev1.Pod {
	tmpl := &job.Spec.Template
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       job.Namespace,
			GenerateName:    p.GenerateName,
			Labels:          overlay(tmpl.Labels, p.Labels),
			Annotations:     overlay(tmpl.Annotations, p.Annotations),
			Finalizers:      slices.Clone(tmpl.Finalizers),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))},
		},
		Spec: *tmpl.Spec.DeepCopy(),
	}
	for _, f := range p.Finalizers {
		if !slices.Contains(pod.Finalizers, f) {
			pod.Finalizers = append(pod.Finalizers, f)
		}
	}
	if p.Hostname != "" {
		pod.Spec.Hostname = p.Hostname
	}
	for i := range pod.Spec.InitContainers {
		addEnv(&pod.Spec.InitContainers[i], p.Env)
	}
	for i := range pod.Spec.Containers {
		addEnv(&pod.Spec.Containers[i], p.Env)
	}
	return pod
}

// overlay is base with extra's entries added; nil when both are empty.
func overlay(base, extra map[string]string) map[string]string {
	if len(base)+len(extra) == 0 {
		return nil
	}
	out := make(map[string]string, len(base)+len(extra))
	maps.Copy(out, base)
	maps.Copy(out, extra)
	return out
}

func addEnv(c *corev1.Container, env []EnvVarFromField) {
	for _, e := range env {
		if slices.ContainsFunc(c.Env, func(v corev1.EnvVar) bool { return v.Name == e.Name }) {
			continue
		}
		c.Env = append(c.Env, corev1.EnvVar{Name: e.Name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: e.FieldPath}}})
	}
}
