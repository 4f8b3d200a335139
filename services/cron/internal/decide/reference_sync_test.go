package decide

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// syncAdaptation changes a reference case where the pure decision must
// differ, and says why.
type syncAdaptation struct {
	why string
	// existingDueJob: the reference's Job control answers AlreadyExists; here
	// that is an owned Job of the due time's name in the input.
	existingDueJob bool
	expect         func(tc *syncCase)
}

// missScheduleFixed is fault 3: the run is past its deadline, which the
// reference cannot see (it clamps before looking); here it is missed with
// MissSchedule. The requeue is the reference's.
var missScheduleFixed = syncAdaptation{
	why:    "fault 3 fixed: MissSchedule fires for the run past its deadline",
	expect: func(tc *syncCase) { tc.expectedWarnings++ },
}

var syncAdaptations = map[string]syncAdaptation{
	"prev ran but done, is time, create job failed, A": {
		why: "fault 1 fixed: the AlreadyExists Job (owned, of the due time's name, unfinished) is in the input; " +
			"it is reported as UnexpectedJob like any owned Job missing from active, then counted as created: active, lastScheduleTime, no create",
		existingDueJob: true,
		expect: func(tc *syncCase) {
			tc.expectedWarnings++
			tc.expectActive = 1
			tc.expectRequeueAfter, tc.expectedRequeueDuration = true, time.Hour-time.Minute+nextScheduleDelta
		},
	},
	"prev ran but done, is time, job not present in CJ active status, create job failed, A": {
		why:            "fault 1 fixed, as the case above",
		existingDueJob: true,
		expect: func(tc *syncCase) {
			tc.expectedWarnings++
			tc.expectActive = 1
			tc.expectRequeueAfter, tc.expectedRequeueDuration = true, time.Hour-time.Minute+nextScheduleDelta
		},
	},
	"still active, is time, get job failed, R": {
		why: "the GET before a Replace deletion and its FailedGet event are the performer's: the plan deletes and creates as in 'still active, is time, R'",
		expect: func(tc *syncCase) {
			tc.expectCreate, tc.expectDelete, tc.expectedWarnings, tc.expectUpdateStatus = true, true, 0, true
			tc.expectRequeueAfter, tc.expectedRequeueDuration = true, time.Hour-time.Minute+nextScheduleDelta
		},
	},
	"do nothing if the namespace is terminating": {
		why: "the creation fails in the performer (namespace terminating); the plan creates, the performer's failure leaves BaseStatus",
		expect: func(tc *syncCase) {
			tc.expectCreate, tc.expectActive, tc.expectUpdateStatus = true, 2, true
			tc.expectRequeueAfter, tc.expectedRequeueDuration = true, time.Hour-time.Minute+nextScheduleDelta
		},
	},
	"set lastsuccessfultime if successfulJobHistoryLimit is zero": {
		why: "Sync runs cleanupFinishedJobs first (the reference's test calls syncCronJob alone): the completed Job is deleted and leaves active before syncCronJob sees it, so no SawCompletedJob",
		expect: func(tc *syncCase) {
			tc.expectDelete, tc.expectCompleted = true, false
		},
	},
	"never ran, is time in zone, but TZ is also set in schedule": {
		why:    "the reference's active count is never checked for this case (its fake records no status update); the created Job is active",
		expect: func(tc *syncCase) { tc.expectActive = 1 },
	},
	"never ran, is time, past deadline":                               missScheduleFixed,
	"prev ran but done, is time, past deadline":                       missScheduleFixed,
	"still active, is time, past deadline":                            missScheduleFixed,
	"with @every schedule, never ran, is time, past deadline":         missScheduleFixed,
	"with @every schedule, prev ran but done, is time, past deadline": missScheduleFixed,
	"with @every schedule, still active, is time, past deadline":      missScheduleFixed,
	"with @every schedule, prev ran but done, long overdue, past deadline": {
		why: "fault 3 fixed (MissSchedule); and the reference's active count (1) is never checked for this case: " +
			"its completed Job leaves active and nothing is created",
		expect: func(tc *syncCase) { tc.expectedWarnings, tc.expectActive = tc.expectedWarnings+1, 0 },
	},
}

func TestControllerV2SyncCronJob(t *testing.T) {
	cases := referenceSyncCases()
	// The reference comments this case out: "This test will fail: the logic
	// around StartingDeadlineSecond ... with @every X". Fault 5, fixed here.
	cases["with @every schedule, prev ran but done, is time, not past deadline"] = syncCase{
		concurrencyPolicy:          "Allow",
		schedule:                   everyHour,
		deadline:                   shortDead,
		ranPreviously:              true,
		cronjobCreationTime:        justBeforeThePriorHour(),
		jobCreationTime:            justBeforeThePriorHour(),
		lastScheduleTime:           justBeforeTheHour(),
		now:                        justBeforeTheNextHour().Add(time.Second * time.Duration(shortDead-1)),
		expectCreate:               true,
		expectActive:               1,
		expectRequeueAfter:         true,
		expectedRequeueDuration:    1*time.Hour - time.Second*time.Duration(shortDead-1) + nextScheduleDelta,
		expectUpdateStatus:         true,
		jobPresentInCJActiveStatus: true,
		expectCompleted:            true,
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			adaptation, adapted := syncAdaptations[name]
			if adapted {
				t.Logf("adapted: %s", adaptation.why)
				adaptation.expect(&tc)
			}
			cj := cronJob()
			cj.Spec.ConcurrencyPolicy = tc.concurrencyPolicy
			cj.Spec.Suspend = &tc.suspend
			cj.Spec.Schedule = tc.schedule
			cj.Spec.TimeZone = tc.timeZone
			cj.Spec.SuccessfulJobsHistoryLimit = tc.successfulJobsHistoryLimit
			if tc.deadline != noDead {
				cj.Spec.StartingDeadlineSeconds = &tc.deadline
			}

			var job *batchv1.Job
			js := []*batchv1.Job{}
			realCJ := cj.DeepCopy()
			if tc.ranPreviously {
				cj.CreationTimestamp = metav1.Time{Time: justBeforeThePriorHour()}
				if !tc.cronjobCreationTime.IsZero() {
					cj.CreationTimestamp = metav1.Time{Time: tc.cronjobCreationTime}
				}
				cj.Status.LastScheduleTime = &metav1.Time{Time: justAfterThePriorHour()}
				if !tc.lastScheduleTime.IsZero() {
					cj.Status.LastScheduleTime = &metav1.Time{Time: tc.lastScheduleTime}
				}
				job, _ = getJobFromTemplate2(&cj, tc.jobCreationTime)
				job.UID = "1234"
				job.Namespace = cj.Namespace
				ref := jobRef(job)
				if tc.jobPresentInCJActiveStatus {
					cj.Status.Active = []v1.ObjectReference{ref}
				}
				if tc.stillActive {
					realCJ.Status.Active = []v1.ObjectReference{ref}
				} else {
					job.Status.CompletionTime = &metav1.Time{Time: job.CreationTimestamp.Add(time.Second * 10)}
					job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{Type: batchv1.JobComplete, Status: v1.ConditionTrue})
				}
				// A Job the lister has not seen yet is found by the
				// reference's live GET; the controller puts what its GET
				// found in the input, so the Job is there either way.
				js = append(js, job)
			} else {
				cj.CreationTimestamp = metav1.Time{Time: justBeforeTheHour()}
				if !tc.cronjobCreationTime.IsZero() {
					cj.CreationTimestamp = metav1.Time{Time: tc.cronjobCreationTime}
				}
			}
			in := Input{CronJob: &cj, Jobs: js, Now: tc.now, Local: time.UTC}
			if tc.stillActive && !tc.jobPresentInCJActiveStatus {
				// The reference re-reads the CronJob on an unfinished Job
				// missing from active and goes on with the fresh copy; the
				// controller passes the freshest CronJob.
				in.CronJob = realCJ
			}
			if adapted && adaptation.existingDueJob {
				due, _ := getJobFromTemplate2(in.CronJob, *topOfTheHour())
				due.UID = "5678"
				in.Jobs = append(in.Jobs, due)
			}
			if tc.jobCreateError != nil && !adapted && !errors.IsAlreadyExists(tc.jobCreateError) {
				t.Fatalf("case depends on a Job control error and has no adaptation")
			}

			plan := Sync(in)

			if tc.expectRequeueAfter {
				if plan.RequeueAfter == nil || *plan.RequeueAfter != tc.expectedRequeueDuration {
					t.Errorf("requeueAfter %v, want %v", ptrString(plan.RequeueAfter), tc.expectedRequeueDuration)
				}
			}
			if plan.UpdateStatus != tc.expectUpdateStatus {
				t.Errorf("updateStatus %t, want %t", plan.UpdateStatus, tc.expectUpdateStatus)
			}
			if tc.ranPreviously && !tc.stillActive {
				completionTime := tc.jobCreationTime.Add(10 * time.Second)
				if plan.Status.LastSuccessfulTime == nil || !plan.Status.LastSuccessfulTime.Time.Equal(completionTime) {
					t.Errorf("lastSuccessfulTime %v, want %s", plan.Status.LastSuccessfulTime, completionTime)
				}
			}
			creates, deletes, events, warnings := countActions(plan)
			if want := boolToInt(tc.expectCreate); len(creates) != want {
				t.Errorf("%d creations, want %d", len(creates), want)
			}
			for _, c := range creates {
				ref := metav1.GetControllerOf(c.Job)
				switch {
				case ref == nil:
					t.Errorf("created Job has no controller reference")
				case ref.APIVersion != "batch/v1" || ref.Kind != "CronJob" || ref.Name != cj.Name || ref.UID != cj.UID || !ptr.Deref(ref.Controller, false):
					t.Errorf("controller reference %+v", ref)
				}
			}
			if want := boolToInt(tc.expectDelete); deletes != want {
				t.Errorf("%d deletions, want %d", deletes, want)
			}
			expectedEvents := boolToInt(tc.expectCreate) + boolToInt(tc.expectDelete) + boolToInt(tc.expectCompleted) + tc.expectedWarnings
			if name == "still active, is time, F" {
				expectedEvents++
			}
			// The performer records SuccessfulCreate and SuccessfulDelete.
			if got := events + len(creates) + deletes; got != expectedEvents {
				t.Errorf("%d events, want %d: %s", got, expectedEvents, eventList(plan))
			}
			if warnings != tc.expectedWarnings {
				t.Errorf("%d warnings, want %d: %s", warnings, tc.expectedWarnings, eventList(plan))
			}
			if len(plan.Status.Active) != tc.expectActive {
				t.Errorf("%d active, want %d", len(plan.Status.Active), tc.expectActive)
			}
		})
	}
}

func countActions(p Plan) (creates []*CreateJob, deletes, events, warnings int) {
	for _, a := range p.Actions {
		switch {
		case a.Create != nil:
			creates = append(creates, a.Create)
		case a.Delete != nil:
			deletes++
		case a.Event != nil:
			events++
			if a.Event.Type == v1.EventTypeWarning {
				warnings++
			}
		}
	}
	return creates, deletes, events, warnings
}

func eventList(p Plan) string {
	var out []string
	for _, a := range p.Actions {
		if a.Event != nil {
			out = append(out, a.Event.Type+" "+a.Event.Reason+": "+a.Event.Message)
		}
	}
	return "[" + strings.Join(out, "; ") + "]"
}

func boolToInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func ptrString(d *time.Duration) string {
	if d == nil {
		return "nil"
	}
	return d.String()
}
