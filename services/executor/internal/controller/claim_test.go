package controller

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
)

// TestClaimPods pins the reference's getPodsForJob: orphans the selector
// matches are adopted (controller reference and tracking finalizer), after
// one live read of the Job; owned pods whose labels no longer match are
// released; the planner is sent the pods the Job controls after that.
func TestClaimPods(t *testing.T) {
	job := newJob("job")
	other := newJob("other")
	matching := func(name string, opts ...podOption) *corev1.Pod {
		return newPod(name, nil, append([]podOption{withLabels(job.Spec.Template.Labels), withFinalizers()}, opts...)...)
	}
	adopt := func(name string) string {
		return fmt.Sprintf(`{"metadata":{"finalizers":[%q],"ownerReferences":[{"apiVersion":"batch/v1","kind":"Job","name":"job","uid":"job-uid","controller":true,"blockOwnerDeletion":true}],"uid":"%s-uid"}}`, testFinalizer, name)
	}
	release := func(name string) string {
		return fmt.Sprintf(`{"metadata":{"$deleteFromPrimitiveList/finalizers":[%q],"ownerReferences":[{"$patch":"delete","uid":"job-uid"}],"uid":"%s-uid"}}`, testFinalizer, name)
	}
	relabelled := withLabels(map[string]string{"app": "moved"})
	cases := []struct {
		name string
		// cached are in the informer caches and the API server; live
		// replaces the Job in the API server only.
		cached []runtime.Object
		live   *batchv1.Job
		inject func(f *fixture)
		// wantActions are the API calls, patches sorted; wantPatches the
		// patch bodies by pod.
		wantActions []string
		wantPatches map[string][]string
		wantErr     bool
		// wantPlanned are the pods sent to the planner, with their
		// controller and finalizers; nil when it was not asked.
		wantPlanned []plannedPod
	}{{
		name:        "orphan matching the selector: adopted after a live read of the Job",
		cached:      []runtime.Object{job, newPod("own", job), matching("orphan")},
		wantActions: []string{"get jobs job", "patch pods orphan"},
		wantPatches: map[string][]string{"orphan": {adopt("orphan")}},
		wantPlanned: []plannedPod{{"orphan", "job-uid", []string{testFinalizer}}, {"own", "job-uid", []string{testFinalizer}}},
	}, {
		name:        "orphans with other finalizers keep them",
		cached:      []runtime.Object{job, matching("orphan", withFinalizers("example.com/keep"))},
		wantActions: []string{"get jobs job", "patch pods orphan"},
		wantPatches: map[string][]string{"orphan": {adopt("orphan")}},
		wantPlanned: []plannedPod{{"orphan", "job-uid", []string{"example.com/keep", testFinalizer}}},
	}, {
		name:        "two orphans: one live read for both",
		cached:      []runtime.Object{job, matching("orphan-1"), matching("orphan-2")},
		wantActions: []string{"get jobs job", "patch pods orphan-1", "patch pods orphan-2"},
		wantPatches: map[string][]string{"orphan-1": {adopt("orphan-1")}, "orphan-2": {adopt("orphan-2")}},
		wantPlanned: []plannedPod{{"orphan-1", "job-uid", []string{testFinalizer}}, {"orphan-2", "job-uid", []string{testFinalizer}}},
	}, {
		name:        "owned pod whose labels no longer match: released, not sent",
		cached:      []runtime.Object{job, newPod("own", job), newPod("moved", job, relabelled)},
		wantActions: []string{"patch pods moved"},
		wantPatches: map[string][]string{"moved": {release("moved")}},
		wantPlanned: []plannedPod{{"own", "job-uid", []string{testFinalizer}}},
	}, {
		// The reference's ClaimObject does not look at the pod's deletion.
		name:        "owned pod being deleted whose labels no longer match: released as well",
		cached:      []runtime.Object{job, newPod("moved", job, relabelled, terminating)},
		wantActions: []string{"patch pods moved"},
		wantPatches: map[string][]string{"moved": {release("moved")}},
		wantPlanned: []plannedPod{},
	}, {
		name:   "owned pod gone before its release: ignored",
		cached: []runtime.Object{job, newPod("moved", job, relabelled)},
		inject: func(f *fixture) {
			f.failNamed("patch", "pods", "", "moved", apierrors.NewNotFound(podsResource, "moved"))
		},
		wantActions: []string{"patch pods moved"},
		wantPatches: map[string][]string{"moved": {release("moved")}},
		wantPlanned: []plannedPod{},
	}, {
		name:        "owned pod replaced by one of the same name before its release (uid refused): ignored",
		cached:      []runtime.Object{job, newPod("moved", job, relabelled)},
		inject:      func(f *fixture) { f.failNamed("patch", "pods", "", "moved", uidChanged("moved")) },
		wantActions: []string{"patch pods moved"},
		wantPatches: map[string][]string{"moved": {release("moved")}},
		wantPlanned: []plannedPod{},
	}, {
		name:        "orphans being deleted, not matching, or controlled by another Job: left alone",
		cached:      []runtime.Object{job, other, matching("deleting", terminating), newPod("unrelated", nil, relabelled), newPod("others", other, withLabels(job.Spec.Template.Labels))},
		wantPlanned: []plannedPod{},
	}, {
		// Owner references are namespace-local: neither pod is the Job's, and
		// the one naming its UID does not break its sync.
		name: "pods of another namespace, controlled by the Job's UID or matching its selector: not the Job's, not adopted",
		cached: []runtime.Object{job, newPod("own", job),
			newPod("intruder", job, inNamespace("other-team"), withLabels(job.Spec.Template.Labels), succeeded),
			matching("stray", inNamespace("other-team"))},
		wantPlanned: []plannedPod{{"own", "job-uid", []string{testFinalizer}}},
	}, {
		name:   "orphan gone before its adoption: ignored",
		cached: []runtime.Object{job, matching("orphan")},
		inject: func(f *fixture) {
			f.failNamed("patch", "pods", "", "orphan", apierrors.NewNotFound(podsResource, "orphan"))
		},
		wantActions: []string{"get jobs job", "patch pods orphan"},
		wantPatches: map[string][]string{"orphan": {adopt("orphan")}},
		wantPlanned: []plannedPod{},
	}, {
		name:        "adoption refused: the sync fails, the planner is not asked",
		cached:      []runtime.Object{job, matching("orphan")},
		inject:      func(f *fixture) { f.failNamed("patch", "pods", "", "orphan", internalError()) },
		wantActions: []string{"get jobs job", "patch pods orphan"},
		wantPatches: map[string][]string{"orphan": {adopt("orphan")}},
		wantErr:     true,
	}, {
		name:        "Job recreated since it was cached (another UID): nothing adopted, the sync fails",
		cached:      []runtime.Object{job, matching("orphan")},
		live:        newJob("job", func(j *batchv1.Job) { j.UID = "new-uid" }),
		wantActions: []string{"get jobs job"},
		wantErr:     true,
	}, {
		name:        "Job being deleted according to the live read: nothing adopted, the sync fails",
		cached:      []runtime.Object{job, matching("orphan")},
		live:        newJob("job", func(j *batchv1.Job) { j.DeletionTimestamp = ptr.To(metav1.NewTime(testNow)) }),
		wantActions: []string{"get jobs job"},
		wantErr:     true,
	}, {
		// The reference's ClaimObject: a controller being deleted neither
		// adopts nor releases.
		name:        "Job being deleted in the cache: orphans not adopted, mismatched pods not released",
		cached:      []runtime.Object{newJob("job", func(j *batchv1.Job) { j.DeletionTimestamp = ptr.To(metav1.NewTime(testNow)) }), matching("orphan"), newPod("moved", job, relabelled)},
		wantPlanned: []plannedPod{},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.cached...)
			if tc.live != nil {
				if err := f.client.Tracker().Update(batchv1.SchemeGroupVersion.WithResource("jobs"), tc.live, testNamespace); err != nil {
					t.Fatal(err)
				}
			}
			if tc.inject != nil {
				tc.inject(f)
			}
			_, _, err := f.sync(jobKey)
			if (err != nil) != tc.wantErr {
				t.Errorf("sync error = %v, want one: %v", err, tc.wantErr)
			}
			actions := f.actions()
			sort.Strings(actions) // "get" sorts before "patch"; patches run in order anyway
			if !slices.Equal(actions, tc.wantActions) {
				t.Errorf("actions = %v, want %v", actions, tc.wantActions)
			}
			if got := f.patches(); len(got)+len(tc.wantPatches) > 0 && !reflect.DeepEqual(got, tc.wantPatches) {
				t.Errorf("patches =\n%v\nwant\n%v", got, tc.wantPatches)
			}
			calls := f.planner.calls()
			if tc.wantPlanned == nil {
				if len(calls) > 0 {
					t.Errorf("planner asked with pods %v, want not asked", plannedPods(calls[0].GetPods()))
				}
				return
			}
			if len(calls) != 1 {
				t.Fatalf("planner asked %d times, want once", len(calls))
			}
			if got := plannedPods(calls[0].GetPods()); !reflect.DeepEqual(got, tc.wantPlanned) {
				t.Errorf("pods sent to the planner = %+v, want %+v", got, tc.wantPlanned)
			}
		})
	}
}

// plannedPod is what the planner is told of a pod's ownership.
type plannedPod struct {
	Name       string
	Controller types.UID
	Finalizers []string
}

func plannedPods(pods []*jobplanev1.Pod) []plannedPod {
	out := []plannedPod{}
	for _, p := range pods {
		m := p.GetMetadata()
		pp := plannedPod{Name: m.GetName(), Finalizers: m.GetFinalizers()}
		for _, ref := range m.GetOwnerReferences() {
			if ref.GetController() {
				pp.Controller = types.UID(ref.GetUid())
			}
		}
		out = append(out, pp)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
