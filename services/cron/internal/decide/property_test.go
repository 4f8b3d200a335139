package decide

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/services/cron/internal/schedule"
)

// randomSchedule draws a five-field expression with steps, ranges and
// lists, a descriptor or an "@every".
func randomSchedule(r *rand.Rand) string {
	field := func(lo, hi int) string {
		switch r.IntN(6) {
		case 0:
			return "*"
		case 1:
			return fmt.Sprintf("*/%d", 1+r.IntN(max(1, (hi-lo)/2)))
		case 2:
			a := lo + r.IntN(hi-lo)
			return fmt.Sprintf("%d-%d", a, a+r.IntN(hi-a+1))
		case 3:
			a, b := lo+r.IntN(hi-lo+1), lo+r.IntN(hi-lo+1)
			return fmt.Sprintf("%d,%d", min(a, b), max(a, b))
		case 4:
			a := lo + r.IntN(hi-lo)
			return fmt.Sprintf("%d-%d/%d", a, hi, 1+r.IntN(3))
		}
		return fmt.Sprint(lo + r.IntN(hi-lo+1))
	}
	switch r.IntN(8) {
	case 0:
		return []string{"@hourly", "@daily", "@midnight", "@weekly"}[r.IntN(4)]
	case 1:
		return fmt.Sprintf("@every %dm", 1+r.IntN(180))
	}
	dom, dow := "*", "*"
	if r.IntN(4) == 0 {
		dom = field(1, 28)
	} else if r.IntN(4) == 0 {
		dow = field(0, 6)
	}
	return fmt.Sprintf("%s %s %s * %s", field(0, 59), field(0, 23), dom, dow)
}

var propertyZones = []string{"", "UTC", "America/New_York", "Europe/London", "Australia/Sydney", "Asia/Kolkata"}

// simulation is a controller performing plans: it creates Jobs with UIDs,
// writes the status and lets Jobs finish at random.
type simulation struct {
	t       *testing.T
	r       *rand.Rand
	cj      *cronapi.CronJob
	jobs    []*batchv1.Job
	local   *time.Location
	sched   schedule.Schedule
	nextUID int
	// createdScheduled are the scheduled times created so far.
	createdScheduled map[int64]bool
	plans            int
	// lostWrites: now and then the status write of a plan that creates
	// (and deletes nothing) is lost, as when the controller stops between
	// creating and writing.
	lostWrites bool
}

func newSimulation(t *testing.T, r *rand.Rand, cj *cronapi.CronJob) (*simulation, bool) {
	s := &simulation{t: t, r: r, cj: cj, local: time.UTC, createdScheduled: map[int64]bool{}}
	d := newDecision(Input{CronJob: cj, Local: s.local})
	sched, err := d.readSchedule()
	if err != nil {
		return nil, false
	}
	if next := sched.Next(cj.CreationTimestamp.Time); next.IsZero() || sched.Next(next).Sub(next) < time.Second {
		return nil, false
	}
	s.sched = sched
	return s, true
}

// sync decides at now, checks the plan's invariants and performs it.
func (s *simulation) sync(now time.Time) Plan {
	t := s.t
	t.Helper()
	in := Input{CronJob: s.cj, Jobs: s.jobs, Now: now, Local: s.local}
	cjBefore := s.cj.DeepCopy()
	var jobsBefore []*batchv1.Job
	for _, j := range s.jobs {
		jobsBefore = append(jobsBefore, j.DeepCopy())
	}
	plan := Sync(in)
	if again := Sync(in); !reflect.DeepEqual(plan, again) {
		t.Fatalf("%s at %s: two syncs of one input differ:\n%+v\n%+v", s.cj.Spec.Schedule, now, plan, again)
	}
	if !reflect.DeepEqual(cjBefore, in.CronJob.DeepCopy()) {
		t.Fatalf("Sync modified the CronJob")
	}
	for i, j := range in.Jobs {
		if !reflect.DeepEqual(jobsBefore[i], j.DeepCopy()) {
			t.Fatalf("Sync modified Job %s", j.Name)
		}
	}
	rebuilt := *plan.BaseStatus.DeepCopy()
	for _, a := range plan.Actions {
		if a.Create != nil {
			ApplyCreated(&rebuilt, a.Create, a.Create.Job)
		}
	}
	if !reflect.DeepEqual(rebuilt.DeepCopy(), plan.Status.DeepCopy()) {
		t.Fatalf("Status is not BaseStatus with the creations applied:\n%+v\n%+v", rebuilt, plan.Status)
	}
	checkDeletions(t, in, plan)
	s.perform(plan, now)
	s.plans++
	return plan
}

func (s *simulation) perform(plan Plan, now time.Time) {
	t := s.t
	status := *plan.BaseStatus.DeepCopy()
	creates, deletes, _, _ := countActions(plan)
	lostWrite := s.lostWrites && len(creates) > 0 && deletes == 0 && s.r.IntN(3) == 0
	for _, a := range plan.Actions {
		switch {
		case a.Delete != nil:
			s.jobs = slices.DeleteFunc(s.jobs, func(j *batchv1.Job) bool { return j.Name == a.Delete.Name })
		case a.Create != nil:
			c := a.Create
			if c.Trigger == cronapi.TriggerSchedule || c.Trigger == cronapi.TriggerCatchUp {
				key := c.ScheduledTime.Unix()
				if s.createdScheduled[key] {
					t.Fatalf("%s: scheduled time %s created twice", s.cj.Spec.Schedule, c.ScheduledTime)
				}
				s.createdScheduled[key] = true
				jitter := jitterDelay(string(s.cj.UID), ptr.Deref(s.cj.Spec.JitterSeconds, 0), c.ScheduledTime, s.sched)
				if now.Before(c.ScheduledTime.Add(jitter)) {
					t.Fatalf("%s: run of %s (jitter %s) created at %s", s.cj.Spec.Schedule, c.ScheduledTime, jitter, now)
				}
			}
			job := c.Job.DeepCopy()
			s.nextUID++
			job.UID = types.UID(fmt.Sprintf("uid-%d", s.nextUID))
			job.ResourceVersion = fmt.Sprint(s.nextUID)
			job.Status.StartTime = &metav1.Time{Time: now}
			s.jobs = append(s.jobs, job)
			ApplyCreated(&status, c, job)
		}
	}
	if !lostWrite {
		s.cj.Status = status
	}
}

// restoreOne replaces a Job at random with one of the same name and a new
// UID, not started yet: someone deleted it and created it again from its
// manifest. An active reference to it is then stale.
func (s *simulation) restoreOne(now time.Time) {
	if len(s.jobs) == 0 {
		return
	}
	i := s.r.IntN(len(s.jobs))
	restored := s.jobs[i].DeepCopy()
	s.nextUID++
	restored.UID = types.UID(fmt.Sprintf("uid-%d", s.nextUID))
	restored.ResourceVersion = fmt.Sprint(s.nextUID)
	restored.Status = batchv1.JobStatus{StartTime: &metav1.Time{Time: now}}
	s.jobs[i] = restored
}

// checkDeletions checks what a plan's deletions leave: no Job is deleted
// twice, and no active reference (with or without the creations) holds the
// UID of a Job the plan deletes or of a finished Job of the CronJob, nor
// the name of a Job the history cleanup deletes. (A Replace deletion drops
// only the references with the deleted Job's UID, as the reference's:
// TestReplaceDeletesTheJobOfTheReferencedNameAndKeepsAStaleReference.)
func checkDeletions(t *testing.T, in Input, plan Plan) {
	t.Helper()
	seen := map[string]bool{}
	historyDeleted := map[string]bool{}
	gone := map[types.UID]string{}
	for _, a := range plan.Actions {
		if a.Delete == nil {
			continue
		}
		key := a.Delete.Namespace + "/" + a.Delete.Name
		if seen[key] {
			t.Fatalf("%s at %s: Job %s deleted twice: %v", in.CronJob.Spec.Schedule, in.Now, key, deleted(plan))
		}
		seen[key] = true
		if a.Reason == "HistoryLimit" {
			historyDeleted[key] = true
		}
		gone[a.Delete.UID] = "deleted"
	}
	for _, job := range ownedJobs(in.CronJob, in.Jobs) {
		if isFinished(job) {
			gone[job.UID] = "finished"
		}
	}
	for _, status := range []cronapi.CronJobStatus{plan.BaseStatus, plan.Status} {
		for _, ref := range status.Active {
			if why, ok := gone[ref.UID]; ok && ref.UID != "" {
				t.Fatalf("%s at %s: active holds %s/%s, a %s Job", in.CronJob.Spec.Schedule, in.Now, ref.Name, ref.UID, why)
			}
			if historyDeleted[ref.Namespace+"/"+ref.Name] {
				t.Fatalf("%s at %s: active holds %s/%s, whose Job the history cleanup deletes", in.CronJob.Spec.Schedule, in.Now, ref.Name, ref.UID)
			}
		}
	}
}

// finishSome completes or fails running Jobs at random.
func (s *simulation) finishSome(now time.Time, chance float64) {
	for i, job := range s.jobs {
		if isFinished(job) || s.r.Float64() >= chance {
			continue
		}
		done := job.DeepCopy()
		condition := batchv1.JobComplete
		if s.r.IntN(4) == 0 {
			condition = batchv1.JobFailed
		}
		done.Status.Conditions = []batchv1.JobCondition{{Type: condition, Status: v1.ConditionTrue}}
		done.Status.CompletionTime = &metav1.Time{Time: now}
		s.jobs[i] = done
	}
}

func randomCronJob(r *rand.Rand) *cronapi.CronJob {
	cj := cronJob()
	cj.Name, cj.Namespace, cj.UID = "prop", "ns", types.UID(fmt.Sprintf("uid-%d", r.Int64()))
	cj.CreationTimestamp = metav1.Time{Time: at("2026-01-01T00:00:00Z").Add(time.Duration(r.Int64N(int64(365 * 24 * time.Hour)))).Truncate(time.Second)}
	cj.Spec.Schedule = randomSchedule(r)
	if zone := propertyZones[r.IntN(len(propertyZones))]; zone != "" {
		cj.Spec.TimeZone = ptr.To(zone)
	}
	return &cj
}

// Random CronJobs with every extension, synced at random times: syncs are
// deterministic and leave their input alone, Status is BaseStatus with the
// creations applied, no scheduled time is created twice, no run starts
// before its time plus jitter, and checkDeletions holds.
func TestPropertySyncInvariants(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	policies := []batchv1.ConcurrencyPolicy{"", "Allow", "Forbid", "Replace", cronapi.BufferOne, cronapi.BufferAll}
	catchUps := []string{"", cronapi.CatchUpLatest, cronapi.CatchUpSkip, cronapi.CatchUpAll}
	scenarios, runs := 0, 0
	defer func() {
		if runs < 500 {
			t.Errorf("only %d scheduled runs created: the property is nearly vacuous", runs)
		}
	}()
	for scenarios < 120 {
		cj := randomCronJob(r)
		cj.Spec.ConcurrencyPolicy = policies[r.IntN(len(policies))]
		if p := catchUps[r.IntN(len(catchUps))]; p != "" {
			cj.Spec.CatchUp = &cronapi.CatchUpPolicy{Policy: p}
			if r.IntN(2) == 0 {
				cj.Spec.CatchUp.WindowSeconds = ptr.To(r.Int64N(6 * 3600))
			}
			if r.IntN(2) == 0 {
				cj.Spec.CatchUp.MaxRuns = ptr.To(1 + r.Int32N(20))
			}
		}
		if r.IntN(3) == 0 {
			cj.Spec.StartingDeadlineSeconds = ptr.To(r.Int64N(7200))
		}
		if r.IntN(3) == 0 {
			cj.Spec.JitterSeconds = ptr.To(r.Int32N(900))
		}
		if r.IntN(3) == 0 {
			cj.Spec.DaylightSaving = &cronapi.DaylightSavingPolicy{
				SkippedHour:  []string{"Skip", "RunAtNextValidTime"}[r.IntN(2)],
				RepeatedHour: []string{"Twice", "Once"}[r.IntN(2)],
			}
		}
		if r.IntN(3) == 0 {
			cj.Spec.SuccessfulJobsHistoryLimit = ptr.To(r.Int32N(4))
			cj.Spec.FailedJobsHistoryLimit = ptr.To(r.Int32N(2))
		}
		sim, ok := newSimulation(t, r, cj)
		if !ok {
			continue
		}
		scenarios++
		now := cj.CreationTimestamp.Time
		for range 40 {
			if r.IntN(3) == 0 {
				plan := sim.sync(now)
				if plan.RequeueAfter != nil && *plan.RequeueAfter < 4*time.Hour {
					now = now.Add(*plan.RequeueAfter)
					continue
				}
			} else {
				sim.sync(now)
			}
			now = now.Add(time.Duration(r.Int64N(int64(6 * time.Hour))))
			sim.finishSome(now, 0.5)
			if r.IntN(10) == 0 {
				// A manual run now and then.
				if p, err := Trigger(Input{CronJob: sim.cj, Jobs: sim.jobs, Now: now, Local: sim.local}, r.IntN(2) == 0); err == nil {
					sim.perform(p, now)
				}
			}
		}
		runs += len(sim.createdScheduled)
	}
}

// Under the reference's rules (Latest, Allow, no deadline) a controller that
// syncs when the plan asks (and sometimes earlier) misses no run.
func TestPropertyLatestMissesNothingWhenSyncedEveryInterval(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	scenarios := 0
	for scenarios < 60 {
		cj := randomCronJob(r)
		if r.IntN(3) == 0 {
			cj.Spec.DaylightSaving = &cronapi.DaylightSavingPolicy{SkippedHour: "RunAtNextValidTime", RepeatedHour: "Once"}
		}
		sim, ok := newSimulation(t, r, cj)
		if !ok {
			continue
		}
		scenarios++
		now := cj.CreationTimestamp.Time.Add(time.Duration(r.Int64N(int64(time.Minute))))
		end := now
		for range 30 {
			plan := sim.sync(now)
			if len(plan.MissedRuns) > 0 {
				t.Fatalf("%s in %v: missed %v at %s", cj.Spec.Schedule, cj.Spec.TimeZone, plan.MissedRuns, now)
			}
			end = now
			wait := *plan.RequeueAfter
			if r.IntN(4) == 0 {
				wait = time.Duration(r.Int64N(int64(wait)))
			}
			now = now.Add(wait)
			sim.finishSome(now, 0.7)
		}
		for t0 := sim.sched.Next(cj.CreationTimestamp.Time); !t0.After(end); t0 = sim.sched.Next(t0) {
			if !sim.createdScheduled[t0.Unix()] {
				t.Fatalf("%s in %v: %s never ran (synced until %s)", cj.Spec.Schedule, cj.Spec.TimeZone, t0, end)
			}
		}
	}
}

// MissedRuns of a Latest sync are exactly what a walk of the schedule from
// earliest finds before the run it starts.
func TestPropertyMissedRunsMatchABruteForceWalk(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	scenarios, withMisses := 0, 0
	defer func() {
		if withMisses < 20 {
			t.Errorf("only %d runs with missed times: the property is nearly vacuous", withMisses)
		}
	}()
	for scenarios < 60 {
		cj := randomCronJob(r)
		sim, ok := newSimulation(t, r, cj)
		if !ok {
			continue
		}
		scenarios++
		now := cj.CreationTimestamp.Time
		interval := sim.sched.Next(sim.sched.Next(now)).Sub(sim.sched.Next(now))
		for range 20 {
			earliestTime := earliest(sim.cj, &sim.cj.Status)
			var walk []time.Time
			for t0 := sim.sched.Next(earliestTime); !t0.After(now) && len(walk) <= maxListedMissedRuns; t0 = sim.sched.Next(t0) {
				walk = append(walk, t0)
			}
			plan := sim.sync(now)
			creates, _, _, _ := countActions(plan)
			switch {
			case len(creates) == 1:
				ran := creates[0].ScheduledTime
				if !ran.Equal(walk[len(walk)-1]) {
					t.Fatalf("%s: ran %s, the walk's latest is %s", cj.Spec.Schedule, ran, walk[len(walk)-1])
				}
				if len(plan.MissedRuns) > 0 {
					withMisses++
				}
				if want := walk[:len(walk)-1]; !slices.EqualFunc(plan.MissedRuns, want, time.Time.Equal) {
					t.Fatalf("%s: missed %v, walk %v", cj.Spec.Schedule, plan.MissedRuns, want)
				}
			case len(creates) == 0 && len(plan.MissedRuns) != 0:
				t.Fatalf("%s: missed %v without a run", cj.Spec.Schedule, plan.MissedRuns)
			}
			now = now.Add(time.Duration(r.Int64N(int64(min(5*interval, 300*time.Minute)) + 1)))
			sim.finishSome(now, 0.8)
		}
	}
}

// Random CronJobs with history limits, whose status writes are now and then
// lost and whose Jobs are now and then created again under their name:
// every plan passes checkDeletions, and both ways a history cleanup can
// delete a Job the sync then looks for happen (a stale active reference to
// its name, the Job of the run due).
func TestPropertyHistoryCleanupLeavesOnlyTheRemainingJobs(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	policies := []batchv1.ConcurrencyPolicy{"", "Forbid", "Replace", cronapi.BufferOne, cronapi.BufferAll}
	scenarios, staleReferences, recordedRuns := 0, 0, 0
	defer func() {
		if staleReferences < 10 || recordedRuns < 5 {
			t.Errorf("%d cleanups of a Job named by a stale reference, %d of the Job of a run recorded: the property is nearly vacuous",
				staleReferences, recordedRuns)
		}
	}()
	for scenarios < 100 {
		cj := randomCronJob(r)
		cj.Spec.ConcurrencyPolicy = policies[r.IntN(len(policies))]
		if r.IntN(3) == 0 {
			cj.Spec.CatchUp = &cronapi.CatchUpPolicy{Policy: cronapi.CatchUpAll, MaxRuns: ptr.To(1 + r.Int32N(5))}
		}
		cj.Spec.SuccessfulJobsHistoryLimit = ptr.To(r.Int32N(2))
		cj.Spec.FailedJobsHistoryLimit = ptr.To(r.Int32N(2))
		sim, ok := newSimulation(t, r, cj)
		if !ok {
			continue
		}
		sim.lostWrites = true
		scenarios++
		now := cj.CreationTimestamp.Time
		interval := sim.sched.Next(sim.sched.Next(now)).Sub(sim.sched.Next(now))
		for range 40 {
			before := sim.cj.Status.DeepCopy()
			plan := sim.sync(now)
			for _, a := range plan.Actions {
				if a.Delete == nil || a.Reason != "HistoryLimit" {
					continue
				}
				if slices.ContainsFunc(before.Active, func(ref v1.ObjectReference) bool { return ref.Name == a.Delete.Name && ref.UID != a.Delete.UID }) {
					staleReferences++
				}
				if last := plan.Status.LastScheduleTime; last != nil && !last.Equal(before.LastScheduleTime) && JobName(cj.Name, last.Time) == a.Delete.Name {
					recordedRuns++
				}
			}
			now = now.Add(time.Duration(r.Int64N(int64(min(interval, 3*time.Hour)) + 1)))
			sim.finishSome(now, 0.6)
			if r.IntN(5) == 0 {
				sim.restoreOne(now)
			}
		}
	}
}
