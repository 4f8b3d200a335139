package decide

// The reference's remaining controller tests (cleanup, ownership,
// AlreadyExists), ported to Sync.

import (
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/jobplane/jobplane/lib/cronapi"
)

func ownedBy(uid string, name string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{Name: name, UID: "uid-" + uidType(uid), Controller: ptr.To(true)}}
}

func uidType(s string) types.UID { return types.UID(s) }

// By owner UID (fault 4 fixed): the reference matches the owner's name, so a
// CronJob recreated under the same name adopts its predecessor's Jobs.
func TestControllerV2GetJobsToBeReconciled(t *testing.T) {
	fooer := &cronapi.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: "foo-ns", Name: "fooer", UID: "uid-fooer"}}
	tests := []struct {
		name     string
		jobs     []*batchv1.Job
		expected []string
	}{
		{"test getting jobs in namespace without controller reference", []*batchv1.Job{
			{ObjectMeta: metav1.ObjectMeta{Name: "foo", Namespace: "foo-ns"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "foo1", Namespace: "foo-ns"}},
		}, nil},
		{"test getting jobs in namespace with a controller reference", []*batchv1.Job{
			{ObjectMeta: metav1.ObjectMeta{Name: "foo", Namespace: "foo-ns"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "foo1", Namespace: "foo-ns", OwnerReferences: ownedBy("fooer", "fooer")}},
		}, []string{"foo1"}},
		{"test getting jobs in other namespaces", []*batchv1.Job{
			{ObjectMeta: metav1.ObjectMeta{Name: "foo1", Namespace: "bar-ns", OwnerReferences: ownedBy("fooer", "fooer")}},
		}, nil},
		{"test getting jobs whose labels do not match job template", []*batchv1.Job{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "foo-ns", Name: "foo-fooer-owner-ref", Labels: map[string]string{"key": "different-value"}, OwnerReferences: ownedBy("fooer", "fooer")}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "foo-ns", Name: "foo-other-owner-ref", Labels: map[string]string{"key": "different-value"}, OwnerReferences: ownedBy("another", "another-cronjob")}},
		}, []string{"foo-fooer-owner-ref"}},
		{"fault 4: a Job of a former CronJob of the same name is not owned", []*batchv1.Job{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "foo-ns", Name: "old", OwnerReferences: ownedBy("former-fooer", "fooer")}},
		}, nil},
		{"by UID alone: a controller reference with the CronJob's UID under another name is owned", []*batchv1.Job{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "foo-ns", Name: "renamed", OwnerReferences: ownedBy("fooer", "another-name")}},
		}, []string{"renamed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, job := range ownedJobs(fooer, tt.jobs) {
				got = append(got, job.Name)
			}
			if !slices.Equal(got, tt.expected) {
				t.Errorf("owned %v, want %v", got, tt.expected)
			}
		})
	}
}

func TestControllerV2CleanupFinishedJobs(t *testing.T) {
	finished := func(name string, started time.Time) *batchv1.Job {
		return &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: "foo-ns", Name: name, UID: "uid-" + uidType(name), OwnerReferences: ownedBy("fooer", "fooer")},
			Status: batchv1.JobStatus{StartTime: &metav1.Time{Time: started},
				Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: v1.ConditionTrue}}},
		}
	}
	tests := []struct {
		name                string
		now                 time.Time
		limit               int32
		finishedJobs        []*batchv1.Job
		expectedDeletedJobs []string
	}{
		{
			// The reference's quota error on the create is the performer's:
			// the deletions come first in the plan whatever happens next.
			name: "jobs are still deleted when a cronjob can't create jobs due to jobs quota being reached (avoiding a deadlock)",
			now:  *justAfterTheHour(), limit: 1,
			finishedJobs: []*batchv1.Job{
				finished("finished-job-started-hour-ago", justBeforeThePriorHour()),
				finished("finished-job-started-minute-ago", justBeforeTheHour()),
			},
			expectedDeletedJobs: []string{"finished-job-started-hour-ago"},
		},
		{
			name: "jobs are not deleted if history limit not reached",
			now:  justBeforeTheHour(), limit: 2,
			finishedJobs:        []*batchv1.Job{finished("finished-job-started-hour-ago", justBeforeThePriorHour())},
			expectedDeletedJobs: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cj := &cronapi.CronJob{
				ObjectMeta: metav1.ObjectMeta{Namespace: "foo-ns", Name: "fooer", UID: "uid-fooer"},
				Spec: cronapi.CronJobSpec{CronJobSpec: batchv1.CronJobSpec{
					Schedule:                   onTheHour,
					SuccessfulJobsHistoryLimit: ptr.To(tt.limit),
					JobTemplate:                batchv1.JobTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"key": "value"}}},
				}},
				Status: cronapi.CronJobStatus{CronJobStatus: batchv1.CronJobStatus{LastScheduleTime: &metav1.Time{Time: justAfterThePriorHour()}}},
			}
			plan := Sync(Input{CronJob: cj, Jobs: tt.finishedJobs, Now: tt.now, Local: time.UTC})
			var deleted []string
			for i, a := range plan.Actions {
				if a.Delete != nil {
					deleted = append(deleted, a.Delete.Name)
					if a.Reason != "HistoryLimit" || i >= len(deleted) {
						t.Errorf("deletion %d: reason %s, not first", i, a.Reason)
					}
				}
			}
			if !slices.Equal(deleted, tt.expectedDeletedJobs) {
				t.Errorf("deleted %v, want %v", deleted, tt.expectedDeletedJobs)
			}
		})
	}
}

// alreadyExistsFixture is the reference's: a Forbid "@every 1h" CronJob
// last run at 08:59, synced at 09:59, with the due run's Job already there.
func alreadyExistsFixture() (*cronapi.CronJob, *batchv1.Job) {
	cj := cronJob()
	cj.Spec.ConcurrencyPolicy = "Forbid"
	cj.Spec.Schedule = everyHour
	cj.Status.LastScheduleTime = &metav1.Time{Time: justBeforeThePriorHour()}
	cj.Status.Active = []v1.ObjectReference{}
	// The reference's fake answers AlreadyExists whatever the name; here the
	// existing Job has the due run's name.
	job, _ := getJobFromTemplate2(&cj, justBeforeTheHour())
	job.UID = "1234"
	job.ResourceVersion = "42"
	return &cj, job
}

func TestControllerV2JobAlreadyExistsButNotInActiveStatus(t *testing.T) {
	cj, job := alreadyExistsFixture()
	plan := Sync(Input{CronJob: cj, Jobs: []*batchv1.Job{job}, Now: justBeforeTheHour(), Local: time.UTC})
	if !plan.UpdateStatus {
		t.Fatal("no status update")
	}
	if creates, _, _, _ := countActions(plan); len(creates) != 0 {
		t.Fatalf("creates %d Jobs", len(creates))
	}
	if len(plan.Status.Active) != 1 || plan.Status.Active[0] != jobRef(job) {
		t.Errorf("active %+v, want %+v", plan.Status.Active, jobRef(job))
	}
	if !plan.Status.LastScheduleTime.Time.Equal(justBeforeTheHour()) {
		t.Errorf("lastScheduleTime %v", plan.Status.LastScheduleTime)
	}
	// Fault 1 fixed: the sync goes on (the reference returns an error and
	// no requeue).
	if plan.RequeueAfter == nil || *plan.RequeueAfter != time.Hour+nextScheduleDelta {
		t.Errorf("requeue %s", ptrString(plan.RequeueAfter))
	}
}

func TestControllerV2JobAlreadyExistsButDifferentOwner(t *testing.T) {
	cj, job := alreadyExistsFixture()
	job.OwnerReferences = []metav1.OwnerReference{}
	plan := Sync(Input{CronJob: cj, Jobs: []*batchv1.Job{job}, Now: justBeforeTheHour(), Local: time.UTC})
	if plan.UpdateStatus {
		t.Errorf("status update for a foreign Job")
	}
	if len(plan.Actions) != 0 || plan.RequeueAfter != nil {
		t.Errorf("actions %+v requeue %s", plan.Actions, ptrString(plan.RequeueAfter))
	}
	if len(plan.Status.Active) != 0 || !plan.Status.LastScheduleTime.Time.Equal(justBeforeThePriorHour()) {
		t.Errorf("status changed: %+v", plan.Status)
	}
}
