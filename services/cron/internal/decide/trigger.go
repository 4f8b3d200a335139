package decide

import (
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/jobplane/jobplane/lib/cronapi"
)

// maxBackfillRuns bounds the scheduled times of one backfill.
const maxBackfillRuns = 100

// Trigger decides a manual run at in.Now (TriggerCronJob). The concurrency
// policy applies unless ignoreConcurrencyPolicy: Forbid refuses while a Job
// is active (ErrConcurrencyPolicy), Replace deletes the active Jobs first,
// BufferOne and BufferAll queue the run while a Job is active. A Job of the
// run's name the CronJob owns is the run already: the plan references it.
// Manual runs never move lastScheduleTime.
func Trigger(in Input, ignoreConcurrencyPolicy bool) (Plan, error) {
	d := newDecision(in)
	if d.cj.DeletionTimestamp != nil {
		return Plan{}, fmt.Errorf("%w: %s/%s", ErrDeleting, d.cj.Namespace, d.cj.Name)
	}
	run := dueRun{scheduled: d.now, trigger: cronapi.TriggerManual}
	name := ManualJobName(d.cj.Name, d.now)
	if existing := findJob(d.owned, name); existing != nil {
		if !isFinished(existing) {
			d.create(run, name)
		}
		return d.manualPlan(fmt.Sprintf("references %s, the run already triggered at this second", name)), nil
	}
	active := d.activeRefs()
	policy := d.cj.Spec.ConcurrencyPolicy
	switch {
	case ignoreConcurrencyPolicy || len(active) == 0:
	case policy == batchv1.ForbidConcurrent:
		return Plan{}, fmt.Errorf("%w: concurrencyPolicy is Forbid and Job %s is active", ErrConcurrencyPolicy, active[0].Name)
	case policy == batchv1.ReplaceConcurrent:
		remaining, stale := d.remainingJobs(), map[types.UID]bool{}
		for _, ref := range active {
			// As a scheduled run's Replace: the Job of the reference's name
			// as it is now, and a stale reference goes with it. A reference
			// naming no Job of the CronJob's namespace deletes nothing.
			if job, ok := remaining.take(ref); ok {
				d.planDelete(job, "Replace", fmt.Sprintf("Job %s is still running when a run is triggered and the concurrency policy is Replace.", ref.Name))
			}
			stale[ref.UID] = true
		}
		d.forgetDeleted()
		deleteAllFromActiveList(d.status(), stale)
		d.updateStatus = true
	case cronapi.IsBuffered(policy):
		d.enqueue([]dueRun{run}, policy == cronapi.BufferOne)
		return d.manualPlan(fmt.Sprintf("queues the run triggered at %s while Job %s is active", d.now.UTC().Format(time.RFC3339), active[0].Name)), nil
	}
	d.create(run, name)
	return d.manualPlan(""), nil
}

// Backfill decides the runs of every scheduled time t with start <= t < end
// (BackfillCronJob), named as scheduled runs are, so a time whose Job exists
// is skipped, as is one already pending. policy is the backfill's own:
// "Allow" (or empty) creates every run now, oldest first; "Forbid" and
// "BufferAll" queue them in pendingRuns and start the oldest at once when
// no Job is active. Backfilled runs never move lastScheduleTime.
func Backfill(in Input, start, end time.Time, policy string) (Plan, error) {
	d := newDecision(in)
	if d.cj.DeletionTimestamp != nil {
		return Plan{}, fmt.Errorf("%w: %s/%s", ErrDeleting, d.cj.Namespace, d.cj.Name)
	}
	switch {
	case !start.Before(end):
		return Plan{}, invalidBackfill(field.Invalid(field.NewPath("start"), start.UTC().Format(time.RFC3339),
			"must be before end "+end.UTC().Format(time.RFC3339)))
	case end.After(d.now):
		return Plan{}, invalidBackfill(field.Invalid(field.NewPath("end"), end.UTC().Format(time.RFC3339),
			"must not be after now ("+d.now.UTC().Format(time.RFC3339)+")"))
	}
	switch batchv1.ConcurrencyPolicy(policy) {
	case "", batchv1.AllowConcurrent, batchv1.ForbidConcurrent, cronapi.BufferAll:
	default:
		return Plan{}, invalidBackfill(field.NotSupported(field.NewPath("concurrencyPolicy"), policy,
			[]batchv1.ConcurrencyPolicy{batchv1.AllowConcurrent, batchv1.ForbidConcurrent, cronapi.BufferAll}))
	}
	sched, err := d.readSchedule()
	if err != nil {
		return Plan{}, err
	}
	times := timesBetween(sched, start.Add(-time.Nanosecond), end, maxBackfillRuns+1)
	if len(times) > maxBackfillRuns {
		return Plan{}, invalidBackfill(field.Invalid(field.NewPath("start"), start.UTC().Format(time.RFC3339),
			fmt.Sprintf("the range holds more than %d scheduled times", maxBackfillRuns)))
	}
	var skipped []time.Time
	var runs []dueRun
	for _, t := range times {
		if findJob(d.owned, JobName(d.cj.Name, t)) != nil || isPending(d.status(), t) {
			skipped = append(skipped, t)
			continue
		}
		runs = append(runs, dueRun{scheduled: t, trigger: cronapi.TriggerBackfill})
	}
	if policy == "" || policy == string(batchv1.AllowConcurrent) {
		for _, run := range runs {
			d.create(run, JobName(d.cj.Name, run.scheduled))
		}
	} else if len(runs) > 0 {
		d.enqueue(runs, false)
		if len(d.activeRefs()) == 0 {
			d.startOldestPending()
		}
	}
	p := d.manualPlan(fmt.Sprintf("backfills %d scheduled time(s) and skips %d", len(runs), len(skipped)))
	p.Skipped = skipped
	return p, nil
}

// manualPlan assembles the plan of a trigger or backfill: no requeue, and
// the status's next scheduled time unchanged.
func (d *decision) manualPlan(outcome string) Plan {
	p := d.plan()
	p.Summary = summarize(&p, outcome)
	return p
}

// invalidBackfill is ErrInvalidBackfill about the request's field fe, which
// errors.As finds for the caller's field violation.
func invalidBackfill(fe *field.Error) error {
	return fmt.Errorf("%w: %w", ErrInvalidBackfill, fe)
}
