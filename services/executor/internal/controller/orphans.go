package controller

import (
	"context"
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/jobplane/jobplane/lib/fairlimit"
)

// orphanKey names one pod, "namespace/name", or every pod of a namespace
// matching a selector (the pods of a finished or deleted Job),
// "namespace/?selector" (a name has no '?'). The namespace leads: the orphan
// queue is fair between namespaces as the Job queue is (fairqueue).
type orphanKey = string

func podOrphan(namespace, name string) orphanKey { return namespace + "/" + name }

func selectorOrphan(namespace, selector string) orphanKey { return namespace + "/?" + selector }

// parseOrphanKey is the namespace and either the pod's name or the selector.
func parseOrphanKey(key orphanKey) (namespace, name, selector string) {
	namespace, rest, _ := strings.Cut(key, "/")
	if selector, ok := strings.CutPrefix(rest, "?"); ok {
		return namespace, "", selector
	}
	return namespace, rest, ""
}

// finalizerHolderIndex indexes the pods holding the tracking finalizer by
// namespace (holdersKey) and, for those with the controller-uid label, by
// namespace and its value (holdersWithUIDKey): a Job's generated selector
// requires that label, so the pods it can match are found without a scan.
const finalizerHolderIndex = "jobplane.dev/finalizer-holders"

func holdersKey(namespace string) string { return namespace }

func holdersWithUIDKey(namespace, uid string) string { return namespace + "/" + uid }

// indexFinalizerHolders is the index function of finalizerHolderIndex.
func (c *Controller) indexFinalizerHolders(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || !c.hasFinalizer(pod) {
		return nil, nil
	}
	if uid, ok := pod.Labels[batchv1.ControllerUidLabel]; ok {
		return []string{holdersKey(pod.Namespace), holdersWithUIDKey(pod.Namespace, uid)}, nil
	}
	return []string{holdersKey(pod.Namespace)}, nil
}

// holdersMatching are the pods of namespace holding the finalizer that
// selector matches. The reference lists every pod of the namespace the
// selector matches, once per finished Job: a cost that grows with the
// namespace's pods, for pods that mostly hold no finalizer any more.
func (c *Controller) holdersMatching(namespace string, selector labels.Selector) ([]*corev1.Pod, error) {
	indexKey := holdersKey(namespace)
	if uid, ok := requiredValue(selector, batchv1.ControllerUidLabel); ok {
		indexKey = holdersWithUIDKey(namespace, uid)
	}
	holders, err := c.podIndex.ByIndex(finalizerHolderIndex, indexKey)
	if err != nil {
		return nil, err
	}
	var pods []*corev1.Pod
	for _, obj := range holders {
		if pod := obj.(*corev1.Pod); selector.Matches(labels.Set(pod.Labels)) {
			pods = append(pods, pod)
		}
	}
	return pods, nil
}

// requiredValue is the one value selector requires label to have, if it
// requires one.
func requiredValue(selector labels.Selector, label string) (string, bool) {
	requirements, selectable := selector.Requirements()
	if !selectable {
		return "", false
	}
	for _, r := range requirements {
		if r.Key() != label || r.Values().Len() != 1 {
			continue
		}
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			return r.Values().UnsortedList()[0], true
		}
	}
	return "", false
}

func (c *Controller) enqueueOrphan(pod *corev1.Pod) {
	c.orphans.Add(podOrphan(pod.Namespace, pod.Name))
}

func (c *Controller) enqueueSelector(job *batchv1.Job) {
	selector, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
	if err != nil {
		c.log.Warn("the Job's selector is invalid", "job", keyOf(job), "err", err)
		return
	}
	c.orphans.Add(selectorOrphan(job.Namespace, selector.String()))
}

func (c *Controller) orphanWorker(ctx context.Context) {
	for c.processNextOrphan(ctx) {
	}
}

func (c *Controller) processNextOrphan(ctx context.Context) bool {
	key, quit := c.orphans.Get()
	if quit {
		return false
	}
	defer c.orphans.Done(key)
	// Its API requests take the namespace's turns of the API budget, as no
	// Job's work.
	if err := c.syncOrphan(fairlimit.WithLane(ctx, key), key); err != nil {
		c.log.Warn("removing the finalizer of orphan pods failed; retrying", "orphans", key, "err", err)
		c.orphans.AddRateLimited(key)
		return true
	}
	c.orphans.Forget(key)
	return true
}

func (c *Controller) syncOrphan(ctx context.Context, key orphanKey) error {
	namespace, name, selectorText := parseOrphanKey(key)
	if name != "" {
		pod, err := c.podStore.Pods(namespace).Get(name)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return c.releaseOrphan(ctx, pod)
	}
	selector, err := labels.Parse(selectorText)
	if err != nil {
		return fmt.Errorf("invalid selector %q: %w", selectorText, err)
	}
	pods, err := c.holdersMatching(namespace, selector)
	if err != nil {
		return err
	}
	var failed int
	for _, pod := range pods {
		if err := c.releaseOrphan(ctx, pod); err != nil {
			failed++
			c.log.Warn("removing an orphan pod's finalizer", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d pods kept the finalizer", failed, len(pods))
	}
	return nil
}

// releaseOrphan removes jobplane's finalizer from a pod no running Job of
// ours will count: no controller, a Job gone or finished.
func (c *Controller) releaseOrphan(ctx context.Context, pod *corev1.Pod) error {
	if !c.hasFinalizer(pod) {
		return nil
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		if ref.Kind != "Job" || ref.APIVersion != batchv1.SchemeGroupVersion.String() {
			return nil // another kind of owner: not ours to touch
		}
		// A pod whose controller Job exists is never an orphan of ours while
		// the Job runs or is another controller's (spec.managedBy): that
		// controller may use the same finalizer (drop-in mode shares the
		// built-in's), and only it may take it off.
		if job := c.controllerJob(pod.Namespace, ref); job != nil && (!c.managed(job) || !isFinished(job)) {
			return nil
		}
	}
	err := c.pods.removeFinalizer(ctx, pod.Namespace, pod.Name, pod.UID, c.cfg.Finalizer)
	if err != nil && !apierrors.IsNotFound(err) && !isUIDPreconditionFailure(err) {
		return err
	}
	c.metrics.finalizersRemoved.WithLabelValues("orphan").Inc()
	return nil
}
