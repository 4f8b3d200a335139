package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobplane/jobplane/lib/featuregates"
	"github.com/jobplane/jobplane/services/executor/internal/dropin"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
)

// Which Jobs the controller runs: its own managedBy always; in drop-in mode
// the built-in Job controller's too (managedBy unset or
// kubernetes.io/job-controller); another controller's never.
func TestManagedJobs(t *testing.T) {
	for _, tc := range []struct {
		managedBy   *string
		own, dropIn bool
	}{
		{managedBy: ptr.To(testManagedBy), own: true, dropIn: true},
		{managedBy: nil, own: false, dropIn: true},
		{managedBy: ptr.To(dropin.BuiltinManagedBy), own: false, dropIn: true},
		{managedBy: ptr.To("kueue.x-k8s.io/multikueue"), own: false, dropIn: false},
		{managedBy: ptr.To(""), own: false, dropIn: true},
	} {
		job := newJob("job", managedBy(tc.managedBy))
		for _, mode := range []struct {
			dropIn bool
			want   bool
		}{{false, tc.own}, {true, tc.dropIn}} {
			c := &Controller{cfg: Config{ManagedBy: testManagedBy, DropIn: mode.dropIn}}
			if got := c.managed(job); got != mode.want {
				t.Errorf("managedBy %q, drop-in %v: managed %v, want %v", ptr.Deref(tc.managedBy, "<unset>"), mode.dropIn, got, mode.want)
			}
		}
	}
}

// The Job cache keeps a Job the controller runs whole (but its
// managedFields), and of another controller's Job only what is read of it:
// its metadata and spec.managedBy.
func TestTheJobCacheKeepsWhatIsRead(t *testing.T) {
	c := &Controller{cfg: Config{ManagedBy: testManagedBy}}
	fields := []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	ours := newJob("ours", managedBy(ptr.To(testManagedBy)))
	ours.ManagedFields = fields
	theirs := newJob("theirs", managedBy(ptr.To("kueue.x-k8s.io/multikueue")))
	theirs.ManagedFields = fields
	theirs.Labels = map[string]string{"team": "a"}

	got, _ := c.trimJob(ours.DeepCopy())
	want := ours.DeepCopy()
	want.ManagedFields = nil
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("our Job cached as %+v, want it whole", got)
	}
	got, _ = c.trimJob(theirs.DeepCopy())
	trimmed := got.(*batchv1.Job)
	if trimmed.UID != theirs.UID || trimmed.Name != theirs.Name || trimmed.Labels["team"] != "a" || trimmed.ManagedFields != nil ||
		ptr.Deref(trimmed.Spec.ManagedBy, "") != "kueue.x-k8s.io/multikueue" || trimmed.Spec.Template.Spec.Containers != nil || c.managed(trimmed) {
		t.Errorf("another controller's Job cached as %+v", trimmed)
	}
}

// With JobManagedBy off (a cluster emulating a version before it), the
// built-in controller runs every Job whatever its spec.managedBy; so does
// the controller in its place, and only there.
func TestWithoutJobManagedByEveryJobIsRunInPlaceOfTheBuiltin(t *testing.T) {
	other := newJob("job", managedBy(ptr.To("kueue.x-k8s.io/multikueue")))
	gates := featuregates.Features{JobManagedByOff: true}
	if c := (&Controller{cfg: Config{ManagedBy: testManagedBy, DropIn: true, FeatureGates: gates}}); !c.managed(other) {
		t.Error("in drop-in mode with JobManagedBy off, another controller's Job is not run")
	}
	if c := (&Controller{cfg: Config{ManagedBy: testManagedBy, FeatureGates: gates}}); c.managed(other) {
		t.Error("outside drop-in mode the gate made another controller's Job jobplane's")
	}
}
