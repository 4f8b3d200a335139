package decide

import (
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/services/cron/internal/schedule"
)

// decision is one plan being decided: a copy of the CronJob whose status is
// the working status (the plan's BaseStatus: creations are kept aside until
// the end), and the plan's parts as they grow.
type decision struct {
	in    Input
	now   time.Time
	local *time.Location
	cj    *cronapi.CronJob
	// jobs are the namespace's Jobs that remain: the input's, less those the
	// plan deletes. owned are the CronJob's own among them, and deleted the
	// CronJob's own the plan deletes.
	jobs    []*batchv1.Job
	owned   []*batchv1.Job
	deleted []*batchv1.Job
	// toForget are deletions planned and not yet dropped from the lists
	// (planDelete, forgetDeleted).
	toForget []corev1.ObjectReference

	actions      []Action
	missed       []time.Time
	updateStatus bool
	// sched is set once the schedule is read; requeue only then.
	sched      *schedule.Schedule
	noRequeue  bool
	jitterWait *time.Time
	// createdScheduled counts the scheduled runs created by this plan.
	createdScheduled int
	// outcome says in a few words why nothing was scheduled, for Summary.
	outcome string
}

func newDecision(in Input) *decision {
	local := in.Local
	if local == nil {
		local = time.UTC
	}
	cj := in.CronJob.DeepCopy()
	// A CronJob's Jobs are of its namespace: an active reference naming
	// another namespace's Job is missing, never that Job (which the
	// reference would keep, and delete under Replace).
	jobs := slices.DeleteFunc(slices.Clone(in.Jobs), func(j *batchv1.Job) bool { return j.Namespace != cj.Namespace })
	return &decision{in: in, now: in.Now, local: local, cj: cj, jobs: jobs, owned: ownedJobs(cj, jobs)}
}

func (d *decision) status() *cronapi.CronJobStatus { return &d.cj.Status }

// event records an event action.
func (d *decision) event(eventType, reason, format string, args ...any) {
	message := fmt.Sprintf(format, args...)
	d.actions = append(d.actions, Action{
		Reason:      reason,
		Explanation: message,
		Event:       &Event{Type: eventType, Reason: reason, Message: message},
	})
}

// planDelete plans the deletion of a Job; forgetDeleted then drops it from
// the active list, as the reference's deleteJob does once the deletion
// succeeded, and the Job is gone for the rest of the decision, as for the
// reference's later GETs. Dropped together, many deletions (thousands, in a
// status anyone allowed to write it may fill) cost one pass over the lists
// rather than one each.
func (d *decision) planDelete(ref corev1.ObjectReference, reason, explanation string) {
	d.actions = append(d.actions, Action{Reason: reason, Explanation: explanation, Delete: &ref})
	d.toForget = append(d.toForget, ref)
	d.updateStatus = true
}

// forgetDeleted drops the Jobs planDelete planned to delete from the active
// list (by UID), the remaining Jobs and the CronJob's own (by namespace,
// name and UID), keeping the CronJob's own among the deleted.
func (d *decision) forgetDeleted() {
	if len(d.toForget) == 0 {
		return
	}
	type key struct {
		namespace, name string
		uid             types.UID
	}
	uids, refs := map[types.UID]bool{}, map[key]bool{}
	for _, ref := range d.toForget {
		uids[ref.UID], refs[key{ref.Namespace, ref.Name, ref.UID}] = true, true
	}
	d.toForget = d.toForget[:0]
	deleteAllFromActiveList(d.status(), uids)
	isRef := func(j *batchv1.Job) bool { return refs[key{j.Namespace, j.Name, j.UID}] }
	for _, j := range d.owned {
		if isRef(j) {
			d.deleted = append(d.deleted, j)
		}
	}
	d.jobs = slices.DeleteFunc(d.jobs, isRef)
	d.owned = slices.DeleteFunc(d.owned, isRef)
}

// ranJob is the CronJob's Job of that name, whether it remains or the plan
// deletes it: the run the name stands for has happened.
func (d *decision) ranJob(name string) *batchv1.Job {
	if job := findJob(d.owned, name); job != nil {
		return job
	}
	return findJob(d.deleted, name)
}

// dueRun is a run to start or queue.
type dueRun struct {
	scheduled   time.Time
	trigger     string
	fromPending bool
}

func (r dueRun) isScheduled() bool {
	return r.trigger == cronapi.TriggerSchedule || r.trigger == cronapi.TriggerCatchUp
}

// create plans the creation of a run's Job. A run never happens twice: a
// Job of that name the CronJob owns, remaining or deleted by this plan, is
// the run, already created (the reference fails on AlreadyExists there, and
// creates the Job again once its history cleanup deleted it). The run is
// recorded, but its Job joins the active list only while it remains and has
// not finished. A Job of that name owned by someone else is left alone and
// the sync ends without a requeue, as the reference's. It reports whether a
// creation was planned.
func (d *decision) create(run dueRun, name string) bool {
	if ran := d.ranJob(name); ran != nil {
		c := &CreateJob{ScheduledTime: run.scheduled, Trigger: run.trigger, FromPending: run.fromPending}
		if isFinished(ran) || slices.Contains(d.deleted, ran) {
			recordRun(d.status(), c)
		} else {
			ApplyCreated(d.status(), c, ran)
		}
		d.updateStatus = true
		return false
	}
	for _, job := range d.jobs {
		if job.Namespace == d.cj.Namespace && job.Name == name {
			d.noRequeue = true
			d.outcome = fmt.Sprintf("a Job named %s exists and is not this CronJob's", name)
			return false
		}
	}
	job := buildJob(d.cj, name, run.scheduled, run.trigger, d.annotationZone())
	d.actions = append(d.actions, Action{
		Reason:      createReason(run.trigger),
		Explanation: createExplanation(run),
		Create:      &CreateJob{Job: job, ScheduledTime: run.scheduled, Trigger: run.trigger, FromPending: run.fromPending},
	})
	d.updateStatus = true
	if run.isScheduled() {
		d.createdScheduled++
	}
	return true
}

// zone is the CronJob's time zone for annotations; the service's own when
// spec.timeZone is unset or cannot be loaded.
func (d *decision) zone() *time.Location {
	if tz := d.cj.Spec.TimeZone; tz != nil {
		if loc, err := schedule.LoadZone(*tz, d.local); err == nil {
			return loc
		}
	}
	return d.local
}

// annotationZone is the zone of the scheduled-timestamp annotation: the
// CronJob's, and UTC when spec.timeZone is unset, as the reference's
// time.LoadLocation("") (not the service's zone the schedule is read in).
func (d *decision) annotationZone() *time.Location {
	if d.cj.Spec.TimeZone == nil {
		return time.UTC
	}
	return d.zone()
}

func createReason(trigger string) string {
	switch trigger {
	case cronapi.TriggerCatchUp:
		return "CatchUp"
	case cronapi.TriggerManual:
		return "Triggered"
	case cronapi.TriggerBackfill:
		return "Backfill"
	}
	return "Scheduled"
}

func createExplanation(run dueRun) string {
	at := run.scheduled.UTC().Format(time.RFC3339)
	queued := ""
	if run.fromPending {
		queued = ", waiting in pendingRuns,"
	}
	switch run.trigger {
	case cronapi.TriggerCatchUp:
		return fmt.Sprintf("The run scheduled at %s%s is caught up: a later scheduled time is also due.", at, queued)
	case cronapi.TriggerManual:
		return fmt.Sprintf("The run triggered at %s%s starts.", at, queued)
	case cronapi.TriggerBackfill:
		return fmt.Sprintf("The run scheduled at %s%s is backfilled.", at, queued)
	}
	return fmt.Sprintf("The run scheduled at %s%s is due.", at, queued)
}

// miss records scheduled times given up on.
func (d *decision) miss(times ...time.Time) {
	d.missed = append(d.missed, times...)
}

// enqueue adds runs to status.pendingRuns: BufferOne keeps only the latest
// run, BufferAll all of them up to maxRuns (the oldest dropped); dropped
// runs are missed. Queued scheduled runs count as handled.
func (d *decision) enqueue(runs []dueRun, keepOnlyLatest bool) {
	status := d.status()
	pending := slices.Clone(status.PendingRuns)
	for _, run := range runs {
		pending = append(pending, cronapi.PendingRun{ScheduledTime: metav1.Time{Time: run.scheduled}, Trigger: run.trigger})
		if run.isScheduled() && (status.LastScheduleTime == nil || run.scheduled.After(status.LastScheduleTime.Time)) {
			status.LastScheduleTime = &metav1.Time{Time: run.scheduled}
		}
	}
	pending = sortPending(pending)
	limit := d.cj.MaxRuns()
	if keepOnlyLatest {
		limit = 1
	}
	if len(pending) > limit {
		for _, dropped := range pending[:len(pending)-limit] {
			d.miss(dropped.ScheduledTime.Time)
		}
		pending = pending[len(pending)-limit:]
	}
	status.PendingRuns = pending
	d.updateStatus = true
}

// sortPending orders pending runs by time and drops repeated times (the
// first queued wins).
func sortPending(pending []cronapi.PendingRun) []cronapi.PendingRun {
	slices.SortStableFunc(pending, func(a, b cronapi.PendingRun) int { return a.ScheduledTime.Time.Compare(b.ScheduledTime.Time) })
	return slices.CompactFunc(pending, func(a, b cronapi.PendingRun) bool { return a.ScheduledTime.Equal(&b.ScheduledTime) })
}

func isPending(status *cronapi.CronJobStatus, t time.Time) bool {
	return slices.ContainsFunc(status.PendingRuns, func(p cronapi.PendingRun) bool { return p.ScheduledTime.Time.Equal(t) })
}

// startOldestPending starts the oldest pending run.
func (d *decision) startOldestPending() {
	oldest := d.status().PendingRuns[0]
	run := dueRun{scheduled: oldest.ScheduledTime.Time, trigger: oldest.Trigger, fromPending: true}
	d.create(run, runJobName(d.cj.Name, run))
}

// runJobName names a run's Job: manual runs by the second they were
// triggered, the others by their scheduled minute.
func runJobName(cronJobName string, run dueRun) string {
	if run.trigger == cronapi.TriggerManual {
		return ManualJobName(cronJobName, run.scheduled)
	}
	return JobName(cronJobName, run.scheduled)
}

// ApplyCreated records in status that c's Job was created: its reference
// joins the active list (replacing one of the same name) and the run is
// recorded.
func ApplyCreated(status *cronapi.CronJobStatus, c *CreateJob, created *batchv1.Job) {
	ref := jobRef(created)
	if i := slices.IndexFunc(status.Active, func(r corev1.ObjectReference) bool {
		return r.Namespace == ref.Namespace && r.Name == ref.Name
	}); i >= 0 {
		status.Active[i] = ref
	} else {
		status.Active = append(status.Active, ref)
	}
	recordRun(status, c)
}

// recordRun records in status that c's run happened: a scheduled run moves
// lastScheduleTime forward, and a run taken from pendingRuns leaves the
// queue.
func recordRun(status *cronapi.CronJobStatus, c *CreateJob) {
	scheduled := c.Trigger == cronapi.TriggerSchedule || c.Trigger == cronapi.TriggerCatchUp
	if scheduled && (status.LastScheduleTime == nil || c.ScheduledTime.After(status.LastScheduleTime.Time)) {
		status.LastScheduleTime = &metav1.Time{Time: c.ScheduledTime}
	}
	if c.FromPending {
		status.PendingRuns = slices.DeleteFunc(slices.Clone(status.PendingRuns), func(p cronapi.PendingRun) bool {
			return p.ScheduledTime.Time.Equal(c.ScheduledTime) && p.Trigger == c.Trigger
		})
		if len(status.PendingRuns) == 0 {
			status.PendingRuns = nil
		}
	}
}

// readSchedule reads the CronJob's schedule in its zone with its
// daylight-saving policy, as the sync does, without events.
func (d *decision) readSchedule() (schedule.Schedule, error) {
	if tz := d.cj.Spec.TimeZone; tz != nil {
		if _, err := schedule.LoadZone(*tz, d.local); err != nil {
			return schedule.Schedule{}, fmt.Errorf("%w: timeZone: %q: %v", ErrInvalidSchedule, *tz, err)
		}
	}
	sched, err := schedule.ParseReference(formatSchedule(d.cj, d.local), d.local)
	if err != nil {
		return schedule.Schedule{}, fmt.Errorf("%w: schedule: %q: %v", ErrInvalidSchedule, d.cj.Spec.Schedule, err)
	}
	return d.withDaylightSaving(sched), nil
}

func (d *decision) withDaylightSaving(sched schedule.Schedule) schedule.Schedule {
	if p := d.cj.Spec.DaylightSaving; p != nil {
		return sched.WithDaylightSaving(p.SkippedHour, p.RepeatedHour)
	}
	return sched
}

// activeRefs are the active references whose Job, when this CronJob owns
// it, has not finished.
func (d *decision) activeRefs() []corev1.ObjectReference {
	var active []corev1.ObjectReference
	for _, ref := range d.status().Active {
		if job := findJob(d.owned, ref.Name); job != nil && isFinished(job) {
			continue
		}
		active = append(active, ref)
	}
	return active
}

// plan assembles the plan: Status is BaseStatus with every creation
// applied.
func (d *decision) plan() Plan {
	p := Plan{Actions: d.actions, UpdateStatus: d.updateStatus}
	d.status().DeepCopyInto(&p.BaseStatus)
	d.status().DeepCopyInto(&p.Status)
	for _, a := range d.actions {
		if a.Create != nil {
			ApplyCreated(&p.Status, a.Create, a.Create.Job)
		}
	}
	if !slices.Equal(pendingKeys(d.in.CronJob.Status.PendingRuns), pendingKeys(p.Status.PendingRuns)) {
		p.UpdateStatus = true
	}
	p.MissedRuns = sortedTimes(d.missed, maxListedMissedRuns)
	return p
}

func pendingKeys(pending []cronapi.PendingRun) []string {
	keys := make([]string, 0, len(pending))
	for _, p := range pending {
		keys = append(keys, p.ScheduledTime.UTC().Format(time.RFC3339Nano)+" "+p.Trigger)
	}
	return keys
}

// sortedTimes sorts and deduplicates times, keeping the oldest limit.
func sortedTimes(times []time.Time, limit int) []time.Time {
	if len(times) == 0 {
		return nil
	}
	out := slices.Clone(times)
	slices.SortFunc(out, time.Time.Compare)
	out = slices.CompactFunc(out, time.Time.Equal)
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

// summarize says in a sentence what the plan does.
func summarize(p *Plan, outcome string) string {
	var creates, deletes []string
	for _, a := range p.Actions {
		switch {
		case a.Create != nil:
			creates = append(creates, a.Create.Job.Name)
		case a.Delete != nil:
			deletes = append(deletes, a.Delete.Name)
		}
	}
	var parts []string
	if len(creates) > 0 {
		parts = append(parts, "creates "+strings.Join(creates, ", "))
	}
	if len(deletes) > 0 {
		parts = append(parts, "deletes "+strings.Join(deletes, ", "))
	}
	if n := len(p.Status.PendingRuns); n > 0 {
		parts = append(parts, fmt.Sprintf("leaves %d run(s) pending", n))
	}
	if n := len(p.MissedRuns); n > 0 {
		parts = append(parts, fmt.Sprintf("gives up %d scheduled run(s)", n))
	}
	if outcome != "" {
		parts = append(parts, outcome)
	}
	if len(parts) == 0 {
		parts = append(parts, "changes nothing")
	}
	sentence := "The sync " + strings.Join(parts, "; ")
	if p.Status.NextScheduleTime != nil {
		sentence += "; next scheduled time " + p.Status.NextScheduleTime.UTC().Format(time.RFC3339)
	}
	return sentence + "."
}
