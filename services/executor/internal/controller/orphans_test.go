package controller

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// TestOrphanFinalizerCleanup pins the reference's handleSingleOrphanPod:
// jobplane's finalizer is removed from a pod no running jobplane Job will
// count, and only from those.
func TestOrphanFinalizerCleanup(t *testing.T) {
	job := newJob("job")
	done := newJob("done", finished)
	foreign := newJob("foreign", managedBy(ptr.To("example.com/other")))
	foreignDone := newJob("foreign-done", managedBy(ptr.To("example.com/other")), finished)
	removeFinalizer := func(name string) string {
		return fmt.Sprintf(`{"metadata":{"$deleteFromPrimitiveList/finalizers":[%q],"uid":"%s-uid"}}`, testFinalizer, name)
	}
	byName := func(name string) orphanKey { return podOrphan(testNamespace, name) }
	bySelector := func(selector string) orphanKey { return selectorOrphan(testNamespace, selector) }
	cases := []struct {
		name    string
		objects []runtime.Object
		key     orphanKey
		inject  func(f *fixture)
		// wantPatches are the patch bodies by pod.
		wantPatches map[string][]string
		wantErr     bool
	}{{
		name:        "pod with our finalizer whose Job is gone: finalizer removed",
		objects:     []runtime.Object{newPod("pod", job)},
		key:         byName("pod"),
		wantPatches: map[string][]string{"pod": {removeFinalizer("pod")}},
	}, {
		name:        "pod with our finalizer and no controller: finalizer removed",
		objects:     []runtime.Object{newPod("pod", nil)},
		key:         byName("pod"),
		wantPatches: map[string][]string{"pod": {removeFinalizer("pod")}},
	}, {
		name:        "pod of a finished jobplane Job: finalizer removed",
		objects:     []runtime.Object{done, newPod("pod", done, succeeded)},
		key:         byName("pod"),
		wantPatches: map[string][]string{"pod": {removeFinalizer("pod")}},
	}, {
		name:    "pod of a running jobplane Job: untouched",
		objects: []runtime.Object{job, newPod("pod", job)},
		key:     byName("pod"),
	}, {
		// TestManagedBy_UsingReservedJobFinalizers of the reference: the
		// finalizer may be shared with the Job's own controller.
		name:    "pod with our finalizer of a running Job another controller manages: untouched",
		objects: []runtime.Object{foreign, newPod("pod", foreign)},
		key:     byName("pod"),
	}, {
		name:    "pod with our finalizer of a finished Job another controller manages: untouched",
		objects: []runtime.Object{foreignDone, newPod("pod", foreignDone, succeeded)},
		key:     byName("pod"),
	}, {
		name:    "pod controlled by a ReplicaSet: untouched",
		objects: []runtime.Object{newPod("pod", nil, ownedBy("ReplicaSet", "apps/v1", "rs", "rs-uid"))},
		key:     byName("pod"),
	}, {
		name:    "pod controlled by a Job of another API group: untouched",
		objects: []runtime.Object{newPod("pod", nil, ownedBy("Job", "example.com/v1", "job", "job-uid"))},
		key:     byName("pod"),
	}, {
		name:    "pod with only the built-in finalizer batch.kubernetes.io/job-tracking: untouched",
		objects: []runtime.Object{newPod("pod", nil, withFinalizers(builtinFinalizer))},
		key:     byName("pod"),
	}, {
		name: "pod gone from the cache: nothing to do",
		key:  byName("pod"),
	}, {
		name:        "pod gone before the patch: done",
		objects:     []runtime.Object{newPod("pod", nil)},
		key:         byName("pod"),
		inject:      func(f *fixture) { f.failNamed("patch", "pods", "", "pod", apierrors.NewNotFound(podsResource, "pod")) },
		wantPatches: map[string][]string{"pod": {removeFinalizer("pod")}},
	}, {
		name:        "pod replaced by one of the same name before the patch (uid refused): done",
		objects:     []runtime.Object{newPod("pod", nil)},
		key:         byName("pod"),
		inject:      func(f *fixture) { f.failNamed("patch", "pods", "", "pod", uidChanged("pod")) },
		wantPatches: map[string][]string{"pod": {removeFinalizer("pod")}},
	}, {
		name:        "patch refused: an error, to retry",
		objects:     []runtime.Object{newPod("pod", nil)},
		key:         byName("pod"),
		inject:      func(f *fixture) { f.failNamed("patch", "pods", "", "pod", internalError()) },
		wantPatches: map[string][]string{"pod": {removeFinalizer("pod")}},
		wantErr:     true,
	}, {
		name: "selector of a finished Job: its pods with our finalizer released, the others untouched",
		objects: []runtime.Object{done,
			newPod("tracked", done, succeeded),
			newPod("untracked", done, succeeded, withFinalizers()),
			newPod("builtin", done, succeeded, withFinalizers(builtinFinalizer)),
			newPod("unrelated", nil, withLabels(map[string]string{"app": "other"})),
		},
		key:         bySelector("batch.kubernetes.io/controller-uid=done-uid"),
		wantPatches: map[string][]string{"tracked": {removeFinalizer("tracked")}},
	}, {
		name: "selector of a finished Job: a pod of another namespace with its labels and our finalizer untouched",
		objects: []runtime.Object{done,
			newPod("tracked", done, succeeded),
			newPod("elsewhere", done, succeeded, inNamespace("team-b")),
		},
		key:         bySelector("batch.kubernetes.io/controller-uid=done-uid"),
		wantPatches: map[string][]string{"tracked": {removeFinalizer("tracked")}},
	}, {
		// A manual selector need not require the controller-uid label: every
		// pod of the namespace holding the finalizer is a candidate.
		name: "manual selector of a finished Job: the pods it matches released, those it does not untouched",
		objects: []runtime.Object{
			newPod("matched", nil, withLabels(map[string]string{"app": "batch", "tier": "a"})),
			newPod("other-tier", nil, withLabels(map[string]string{"app": "batch", "tier": "b"})),
			newPod("uid-labelled", nil, withLabels(map[string]string{"app": "batch", "tier": "a", batchv1.ControllerUidLabel: "x"})),
		},
		key: bySelector("app=batch,tier=a"),
		wantPatches: map[string][]string{
			"matched":      {removeFinalizer("matched")},
			"uid-labelled": {removeFinalizer("uid-labelled")},
		},
	}, {
		name: "selector requiring a controller-uid and another label: pods with the uid but not the label untouched",
		objects: []runtime.Object{
			newPod("both", nil, withLabels(map[string]string{batchv1.ControllerUidLabel: "x", "app": "batch"})),
			newPod("uid-only", nil, withLabels(map[string]string{batchv1.ControllerUidLabel: "x"})),
			newPod("other-uid", nil, withLabels(map[string]string{batchv1.ControllerUidLabel: "y", "app": "batch"})),
		},
		key:         bySelector("app=batch,batch.kubernetes.io/controller-uid in (x)"),
		wantPatches: map[string][]string{"both": {removeFinalizer("both")}},
	}, {
		name: "selector allowing two controller-uids: the pods of both released",
		objects: []runtime.Object{
			newPod("x", nil, withLabels(map[string]string{batchv1.ControllerUidLabel: "x"})),
			newPod("y", nil, withLabels(map[string]string{batchv1.ControllerUidLabel: "y"})),
			newPod("z", nil, withLabels(map[string]string{batchv1.ControllerUidLabel: "z"})),
		},
		key:         bySelector("batch.kubernetes.io/controller-uid in (x,y)"),
		wantPatches: map[string][]string{"x": {removeFinalizer("x")}, "y": {removeFinalizer("y")}},
	}, {
		name:        "selector of a deleted Job: its pods released",
		objects:     []runtime.Object{newPod("a", done), newPod("b", done)},
		key:         bySelector("batch.kubernetes.io/controller-uid=done-uid"),
		wantPatches: map[string][]string{"a": {removeFinalizer("a")}, "b": {removeFinalizer("b")}},
	}, {
		name:        "selector with one refused patch: the others still released, an error to retry",
		objects:     []runtime.Object{newPod("a", done), newPod("b", done)},
		key:         bySelector("batch.kubernetes.io/controller-uid=done-uid"),
		inject:      func(f *fixture) { f.failNamed("patch", "pods", "", "a", internalError()) },
		wantPatches: map[string][]string{"a": {removeFinalizer("a")}, "b": {removeFinalizer("b")}},
		wantErr:     true,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.objects...)
			if tc.inject != nil {
				tc.inject(f)
			}
			f.c.orphans.Add(tc.key)
			f.c.processNextOrphan(context.Background())
			if got := f.patches(); len(got)+len(tc.wantPatches) > 0 && !reflect.DeepEqual(got, tc.wantPatches) {
				t.Errorf("patches =\n%v\nwant\n%v", got, tc.wantPatches)
			}
			if n := len(f.client.Actions()); n != len(f.patches()) {
				t.Errorf("actions = %v, want only patches", f.actions())
			}
			wantQueue := []queueCall[orphanKey]{{"Add", tc.key, 0}}
			if tc.wantErr {
				wantQueue = append(wantQueue, queueCall[orphanKey]{"AddRateLimited", tc.key, 0})
			}
			if got := f.orphans.recorded(); !reflect.DeepEqual(got, wantQueue) {
				t.Errorf("orphan queue additions = %+v, want %+v", got, wantQueue)
			}
		})
	}
}

// One namespace's orphans do not hold back another's: the orphan queue
// takes namespaces in turn, as the Job queue does.
func TestOrphansAreServedByNamespaceInTurn(t *testing.T) {
	f := newFixture(t)
	for i := range 3 {
		f.c.orphans.Add(podOrphan("team-a", fmt.Sprintf("pod-%d", i)))
	}
	f.c.orphans.Add(selectorOrphan("team-b", batchv1.ControllerUidLabel+"=b-uid"))
	var namespaces []string
	for range 4 {
		key, _ := f.c.orphans.Get()
		namespace, name, selector := parseOrphanKey(key)
		if (name == "") == (selector == "") {
			t.Fatalf("key %q: name %q, selector %q", key, name, selector)
		}
		namespaces = append(namespaces, namespace)
		f.c.orphans.Done(key)
	}
	if want := []string{"team-a", "team-b", "team-a", "team-a"}; !reflect.DeepEqual(namespaces, want) {
		t.Errorf("served %v, want %v", namespaces, want)
	}
}

func TestRequiredValueIsTheOneValueALabelMustHave(t *testing.T) {
	cases := []struct {
		selector string
		want     string
		wantOK   bool
	}{
		{"batch.kubernetes.io/controller-uid=x", "x", true},
		{"batch.kubernetes.io/controller-uid==x", "x", true},
		{"app=a,batch.kubernetes.io/controller-uid in (x)", "x", true},
		{"batch.kubernetes.io/controller-uid in (x,y)", "", false},
		{"batch.kubernetes.io/controller-uid!=x", "", false},
		{"batch.kubernetes.io/controller-uid notin (x)", "", false},
		{"batch.kubernetes.io/controller-uid", "", false},
		{"app=a", "", false},
		{"", "", false},
	}
	for _, tc := range cases {
		selector, err := labels.Parse(tc.selector)
		if err != nil {
			t.Fatalf("%q: %v", tc.selector, err)
		}
		got, ok := requiredValue(selector, batchv1.ControllerUidLabel)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("requiredValue(%q) = %q, %v; want %q, %v", tc.selector, got, ok, tc.want, tc.wantOK)
		}
	}
}
