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
	"k8s.io/utils/ptr"

	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/services/cron/internal/schedule"
)

// Sync decides one sync of the CronJob: the reference's cleanupFinishedJobs
// then syncCronJob, on a copy, with the reference's faults fixed and the
// extensions applied. syncCronJob sees the Jobs that remain after the
// cleanup, as the reference's API calls do (its list of Jobs, read before
// the cleanup, still holds the deleted ones: only their success counts from
// it, see removeOldestJobs).
//
// The reference drops its status update when its informer lags behind the
// CronJob (fault 2); a pure function has nothing to drop: Status is always
// the whole decided status, and the performer writes it.
func Sync(in Input) Plan {
	d := newDecision(in)
	d.cleanupFinishedJobs()
	d.syncCronJob()
	return d.syncPlan()
}

// cleanupFinishedJobs deletes the oldest finished Jobs beyond the history
// limits, only when a limit is set, as the reference.
func (d *decision) cleanupFinishedJobs() {
	spec := d.cj.Spec
	if spec.FailedJobsHistoryLimit == nil && spec.SuccessfulJobsHistoryLimit == nil {
		return
	}
	var succeeded, failed []*batchv1.Job
	for _, job := range d.owned {
		switch _, condition := finishedCondition(job); condition {
		case batchv1.JobComplete:
			succeeded = append(succeeded, job)
		case batchv1.JobFailed:
			failed = append(failed, job)
		}
	}
	if spec.SuccessfulJobsHistoryLimit != nil {
		d.removeOldestJobs(succeeded, *spec.SuccessfulJobsHistoryLimit, "successful")
	}
	if spec.FailedJobsHistoryLimit != nil {
		d.removeOldestJobs(failed, *spec.FailedJobsHistoryLimit, "failed")
	}
}

// removeOldestJobs deletes the Jobs beyond limit, oldest start first. A
// deleted Job's success still moves lastSuccessfulTime: the reference's
// syncCronJob records it from its lister, which still lists the Job.
func (d *decision) removeOldestJobs(jobs []*batchv1.Job, limit int32, kind string) {
	excess := len(jobs) - int(limit)
	if excess <= 0 {
		return
	}
	oldestFirst := slices.Clone(jobs)
	slices.SortFunc(oldestFirst, byJobStartTime)
	for _, job := range oldestFirst[:excess] {
		d.planDelete(jobRef(job), "HistoryLimit",
			fmt.Sprintf("Job %s is one of the %d oldest %s Jobs beyond the history limit of %d.", job.Name, excess, kind, limit))
		d.recordSuccess(job)
	}
	d.forgetDeleted()
}

// syncCronJob is the reference's syncCronJob.
func (d *decision) syncCronJob() {
	d.reconcileOwnedJobs()
	d.dropMissingActiveJobs()
	d.observeSchedule()

	if d.cj.DeletionTimestamp != nil {
		d.noRequeue, d.outcome = true, "is being deleted: status only"
		return
	}
	if tz := d.cj.Spec.TimeZone; tz != nil {
		if _, err := schedule.LoadZone(*tz, d.local); err != nil {
			d.event(corev1.EventTypeWarning, "UnknownTimeZone", "invalid timeZone: %q: %s", *tz, err)
			d.noRequeue, d.outcome = true, "waits for a valid time zone"
			return
		}
	}
	if ptr.Deref(d.cj.Spec.Suspend, false) {
		d.noRequeue, d.outcome = true, "is suspended: status only"
		return
	}
	sched, ok := d.parseSchedule()
	if !ok {
		d.noRequeue, d.outcome = true, "waits for a parseable schedule"
		return
	}
	d.sched = &sched
	if len(d.in.Unread) > 0 {
		// Active Jobs the performer has not read yet may be running: due
		// runs wait for the next sync, which reads them.
		d.outcome = "waits for its active Jobs to be read"
		return
	}
	activeBefore := len(d.status().Active) > 0
	if d.cj.CatchUpPolicyOf() == cronapi.CatchUpAll {
		d.catchUpAll()
	} else if !d.runMostRecent() {
		return
	}
	d.startPendingRun(activeBefore)
}

// reconcileOwnedJobs follows the owned Jobs: finished ones leave the active
// list, the latest success is recorded, and an unfinished Job missing from
// the active list is reported. The reference re-reads the CronJob first;
// here the input is already the freshest, so the report is all that is left.
func (d *decision) reconcileOwnedJobs() {
	status := d.status()
	active, left := activeUIDs(status), map[types.UID]bool{}
	for _, job := range d.owned {
		found := active[job.UID] && !left[job.UID]
		finished, condition := finishedCondition(job)
		if !found && !finished {
			d.event(corev1.EventTypeWarning, "UnexpectedJob", "Saw a job that the controller did not create or forgot: %s", job.Name)
			continue
		}
		if !finished {
			continue
		}
		if found {
			left[job.UID] = true
			d.event(corev1.EventTypeNormal, "SawCompletedJob", "Saw completed job: %s, condition: %v", job.Name, condition)
			d.updateStatus = true
		}
		d.recordSuccess(job)
	}
	deleteAllFromActiveList(status, left)
}

// recordSuccess moves lastSuccessfulTime to a finished Job's completion
// when it succeeded, as the reference: by jobutil.IsJobSucceeded (any true
// Complete condition, even after a true Failed one that named the event),
// and taking a nil completionTime while lastSuccessfulTime is nil.
func (d *decision) recordSuccess(job *batchv1.Job) {
	if !isSucceeded(job) {
		return
	}
	status := d.status()
	if status.LastSuccessfulTime == nil {
		status.LastSuccessfulTime = job.Status.CompletionTime
		d.updateStatus = true
	}
	if job.Status.CompletionTime != nil && job.Status.CompletionTime.After(status.LastSuccessfulTime.Time) {
		status.LastSuccessfulTime = job.Status.CompletionTime
		d.updateStatus = true
	}
}

// dropMissingActiveJobs removes active references to Jobs that exist no
// more. The reference GETs each from the API server before believing it
// gone; here a remaining Job of that namespace and name (the controller
// puts what its live GET found in the input) keeps the reference.
func (d *decision) dropMissingActiveJobs() {
	status := d.status()
	owned := make(map[types.UID]bool, len(d.owned))
	for _, j := range d.owned {
		owned[j.UID] = true
	}
	remaining := make(map[types.NamespacedName]bool, len(d.jobs))
	for _, j := range d.jobs {
		remaining[types.NamespacedName{Namespace: j.Namespace, Name: j.Name}] = true
	}
	missing := map[types.UID]bool{}
	for _, ref := range status.Active {
		key := types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
		if owned[ref.UID] || remaining[key] || d.in.Unread[key] {
			continue
		}
		d.event(corev1.EventTypeNormal, "MissingJob", "Active job went missing: %v", ref.Name)
		missing[ref.UID] = true
		d.updateStatus = true
	}
	deleteAllFromActiveList(status, missing)
}

// observedSchedule is what status.observedSchedule holds for the spec.
func observedSchedule(cj *cronapi.CronJob) string {
	return ptr.Deref(cj.Spec.TimeZone, "") + " " + cj.Spec.Schedule
}

// observeSchedule notices a schedule or zone change: from now on, no time
// before the change is due (the reference would run the new schedule's
// times between the last run and now).
func (d *decision) observeSchedule() {
	status := d.status()
	current := observedSchedule(d.cj)
	if status.ObservedSchedule != "" && status.ObservedSchedule != current {
		status.ObservedScheduleSince = &metav1.Time{Time: d.now}
		d.updateStatus = true
	}
	status.ObservedSchedule = current
}

// formatSchedule is the reference's: the schedule as it is, when it
// mentions TZ or its zone cannot be loaded, else prefixed with "TZ=<zone> "
// when spec.timeZone is set (robfig then trims what follows the zone).
func formatSchedule(cj *cronapi.CronJob, local *time.Location) string {
	spec := cj.Spec.Schedule
	if strings.Contains(spec, "TZ") {
		return spec
	}
	if tz := cj.Spec.TimeZone; tz != nil {
		if _, err := schedule.LoadZone(*tz, local); err != nil {
			return spec
		}
		return fmt.Sprintf("TZ=%s %s", *tz, spec)
	}
	return spec
}

// parseSchedule reads the schedule as the reference's formatSchedule and
// ParseCronScheduleWithPanicRecovery do, with their events.
func (d *decision) parseSchedule() (schedule.Schedule, bool) {
	spec := d.cj.Spec.Schedule
	if strings.Contains(spec, "TZ") {
		d.event(corev1.EventTypeWarning, "UnsupportedSchedule", "CRON_TZ or TZ used in schedule %q is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details", spec)
	}
	sched, err := schedule.ParseReference(formatSchedule(d.cj, d.local), d.local)
	if err != nil {
		d.event(corev1.EventTypeWarning, "UnparseableSchedule", "unparseable schedule: %q : %s", spec, err)
		return schedule.Schedule{}, false
	}
	return d.withDaylightSaving(sched), true
}

// earliest is the time after which scheduled times are unmet: the last
// scheduled run (or the CronJob's creation), and never before the schedule
// last changed.
func earliest(cj *cronapi.CronJob, status *cronapi.CronJobStatus) time.Time {
	t := cj.CreationTimestamp.Time
	if status.LastScheduleTime != nil {
		t = status.LastScheduleTime.Time
	}
	if since := status.ObservedScheduleSince; since != nil && since.After(t) {
		t = since.Time
	}
	return t
}

// deadline is spec.startingDeadlineSeconds as a duration, or nil.
func (d *decision) deadline() *time.Duration {
	if s := d.cj.Spec.StartingDeadlineSeconds; s != nil {
		return ptr.To(time.Duration(*s) * time.Second)
	}
	return nil
}

// jitter is the delay of the run scheduled at t.
func (d *decision) jitter(t time.Time) time.Duration {
	return jitterDelay(string(d.cj.UID), ptr.Deref(d.cj.Spec.JitterSeconds, 0), t, *d.sched)
}

// tooLate says the run scheduled at t can no longer start: its deadline,
// counted from when it would start (t, or t plus its jitter), has come. A
// deadline of 0 never lets a run start, as in the reference.
func (d *decision) tooLate(t time.Time) bool {
	deadline := d.deadline()
	return deadline != nil && !d.now.Before(t.Add(d.jitter(t)).Add(*deadline))
}

// runMostRecent is the reference's decision on the most recent due time
// (catchUp Latest), and Skip's. It reports false when the sync must stop
// there (an invalid schedule).
//
// The reference clamps earliest to now-startingDeadlineSeconds before
// looking, so its MissSchedule never fires (fault 3) and an "@every"
// schedule whose deadline is shorter than its interval never runs (fault 5,
// "@every" counting from the clamp). Here the clamped look comes first, so
// every run the reference starts is started identically and its
// TooManyMissedTimes warning counts as the reference's does; when it finds
// nothing, an unclamped look finds the time the deadline excluded, which is
// then missed, or, for "@every", the time due since the last run. The
// unclamped look adds nothing else: a time after the clamp that the
// clamped look's approximate count overshot (an irregular schedule) does
// not start, as in the reference, and an error of the unclamped look is
// not the reference's, which requeues.
func (d *decision) runMostRecent() bool {
	sched, status := *d.sched, d.status()
	earliestTime := earliest(d.cj, status)
	clamped := earliestTime
	if deadline := d.deadline(); deadline != nil && d.now.Add(-*deadline).After(clamped) {
		clamped = d.now.Add(-*deadline)
	}
	due, missedGrade, err := mostRecentScheduleTime(clamped, d.now, sched)
	if err == nil && due == nil && clamped != earliestTime {
		if unclamped, _, err := mostRecentScheduleTime(earliestTime, d.now, sched); err == nil && unclamped != nil &&
			(sched.IsEvery() || !unclamped.After(clamped)) {
			due = unclamped
		}
	} else if due != nil && missedGrade == manyMissed {
		d.event(corev1.EventTypeWarning, "TooManyMissedTimes", "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew")
	}
	if err != nil {
		d.event(corev1.EventTypeWarning, "InvalidSchedule", "invalid schedule: %s : %s", d.cj.Spec.Schedule, err)
		d.noRequeue, d.outcome = true, "waits for a schedule that fires"
		return false
	}
	if due == nil {
		return true
	}
	t := *due
	// Checked before the deadline (the reference checks after, harmlessly
	// since its deadline check never fires): a run already started is not
	// missed.
	if inActiveListByName(status, d.cj.Namespace, JobName(d.cj.Name, t)) || status.LastScheduleTime.Equal(&metav1.Time{Time: t}) {
		return true
	}
	if d.tooLate(t) {
		d.event(corev1.EventTypeWarning, "MissSchedule", "Missed scheduled time to start a job: %s", t.UTC().Format(time.RFC1123Z))
		d.miss(timesBetween(sched, earliestTime, t, maxListedMissedRuns)...)
		d.miss(t)
		return true
	}
	if startAt := t.Add(d.jitter(t)); d.now.Before(startAt) {
		d.waitForJitter(t)
		return true
	}
	// Only the most recent time runs: the ones before it are given up.
	d.miss(timesBetween(sched, earliestTime, t, maxListedMissedRuns)...)
	if d.cj.CatchUpPolicyOf() == cronapi.CatchUpSkip {
		late, grace := d.now.Sub(t.Add(d.jitter(t))), skipGrace(t, sched)
		if late > grace {
			// The same message on every sync until the next time, so that
			// the events aggregate as MissSchedule's do.
			d.event(corev1.EventTypeWarning, "SkippedMissedRun", "Skipped the run scheduled at %s: catchUp.policy Skip starts runs at most %s late",
				t.UTC().Format(time.RFC1123Z), grace)
			d.miss(t)
			return true
		}
	}
	d.startDue([]dueRun{{scheduled: t, trigger: cronapi.TriggerSchedule}})
	return true
}

// waitForJitter notes that the run scheduled at t waits for its jitter.
func (d *decision) waitForJitter(t time.Time) {
	if d.jitterWait == nil || t.Before(*d.jitterWait) {
		d.jitterWait = &t
	}
}

// catchUpAll starts every unmet scheduled time within the window and the
// deadline, at most maxRuns (the most recent), oldest first, subject to the
// concurrency policy.
func (d *decision) catchUpAll() {
	sched, status := *d.sched, d.status()
	earliestTime := earliest(d.cj, status)
	from := earliestTime
	if window := d.cj.Spec.CatchUp.WindowSeconds; window != nil {
		// t >= now-window, that is t > now-window-1ns.
		if oldest := d.now.Add(-time.Duration(*window)*time.Second - time.Nanosecond); oldest.After(from) {
			from = oldest
		}
	}
	candidates := latestTimes(sched, from, d.now, d.cj.MaxRuns())
	keptFrom := d.now.Add(time.Nanosecond)
	if len(candidates) > 0 {
		keptFrom = candidates[0]
	}
	var missed, tooLate []time.Time
	if from != earliestTime || len(candidates) > 0 {
		missed = timesBetween(sched, earliestTime, keptFrom, maxListedMissedRuns)
	}
	var runs []dueRun
	for _, t := range candidates {
		name := JobName(d.cj.Name, t)
		switch {
		case d.ranJob(name) != nil || inActiveListByName(status, d.cj.Namespace, name):
			// Already run: handled, never created twice.
			if status.LastScheduleTime == nil || t.After(status.LastScheduleTime.Time) {
				status.LastScheduleTime = &metav1.Time{Time: t}
				d.updateStatus = true
			}
		case d.tooLate(t):
			tooLate = append(tooLate, t)
		case d.now.Before(t.Add(d.jitter(t))):
			d.waitForJitter(t)
		default:
			trigger := cronapi.TriggerCatchUp
			if t.Equal(candidates[len(candidates)-1]) {
				trigger = cronapi.TriggerSchedule
			}
			runs = append(runs, dueRun{scheduled: t, trigger: trigger})
		}
	}
	if len(missed) > 0 {
		d.event(corev1.EventTypeWarning, "MissedRuns", "%d scheduled run(s) from %s are out of catchUp's window or maxRuns and will not run",
			len(missed), missed[0].UTC().Format(time.RFC1123Z))
	}
	for _, t := range tooLate {
		d.event(corev1.EventTypeWarning, "MissSchedule", "Missed scheduled time to start a job: %s", t.UTC().Format(time.RFC1123Z))
	}
	d.miss(missed...)
	d.miss(tooLate...)
	if len(runs) > 0 {
		d.startDue(runs)
	}
}

// startDue starts or queues due runs (oldest first) under the concurrency
// policy.
func (d *decision) startDue(runs []dueRun) {
	status := d.status()
	policy := d.cj.Spec.ConcurrencyPolicy
	latest := runs[len(runs)-1]
	switch {
	case cronapi.IsBuffered(policy):
		// Queued first; startPendingRun starts the oldest when nothing is
		// active.
		d.enqueue(runs, policy == cronapi.BufferOne)
	case policy == batchv1.ForbidConcurrent && len(status.Active) > 0:
		d.event(corev1.EventTypeNormal, "JobAlreadyActive", "Not starting job because prior execution is running and concurrency policy is Forbid")
	case policy == batchv1.ForbidConcurrent:
		// One at a time: later syncs start the next.
		d.create(runs[0], JobName(d.cj.Name, runs[0].scheduled))
	case policy == batchv1.ReplaceConcurrent:
		remaining := d.remainingJobs()
		for _, ref := range slices.Clone(status.Active) {
			job, ok := remaining.take(ref)
			if !ok {
				// The reference reads the Job of each reference's name and
				// ends the sync when none is found: one listed twice and
				// deleted by the first, or one whose UID is a Job of its own
				// under another name.
				d.forgetDeleted()
				d.event(corev1.EventTypeWarning, "FailedGet", "Get job: jobs.batch %q not found", ref.Name)
				d.noRequeue, d.outcome = true, fmt.Sprintf("lists Job %s as active, which is not found", ref.Name)
				return
			}
			d.planDelete(job, "Replace", fmt.Sprintf("Job %s is still running at the next scheduled start time and the concurrency policy is Replace.", ref.Name))
		}
		d.forgetDeleted()
		for _, run := range runs[:len(runs)-1] {
			d.miss(run.scheduled)
		}
		d.create(latest, JobName(d.cj.Name, latest.scheduled))
	default:
		for _, run := range runs {
			d.create(run, JobName(d.cj.Name, run.scheduled))
		}
	}
}

// jobsByName are the remaining Jobs by namespace and name, in their order.
type jobsByName map[types.NamespacedName][]*batchv1.Job

func (d *decision) remainingJobs() jobsByName {
	byName := jobsByName{}
	for _, job := range d.jobs {
		key := types.NamespacedName{Namespace: job.Namespace, Name: job.Name}
		byName[key] = append(byName[key], job)
	}
	return byName
}

// take is the Job Replace deletes for an active reference, which it takes
// out: as the reference, the Job its GET of the reference's namespace and
// name returns (whose UID leaves the active list, so a reference whose UID
// is not that Job's stays); false when no such Job remains, as for a second
// reference of a name whose Job was taken.
func (byName jobsByName) take(ref corev1.ObjectReference) (corev1.ObjectReference, bool) {
	key := types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
	jobs := byName[key]
	if len(jobs) == 0 {
		return corev1.ObjectReference{}, false
	}
	delete(byName, key)
	return jobRef(jobs[0]), true
}

// startPendingRun starts the oldest pending run when no Job was active at
// the start of the decision. Under Forbid and Replace a scheduled run
// created by this sync goes first; under Allow both start.
func (d *decision) startPendingRun(activeBefore bool) {
	status := d.status()
	if activeBefore || len(status.PendingRuns) == 0 || d.noRequeue {
		return
	}
	policy := d.cj.Spec.ConcurrencyPolicy
	if !cronapi.IsBuffered(policy) && policy != batchv1.AllowConcurrent && policy != "" && d.createdScheduled > 0 {
		return
	}
	d.startOldestPending()
}

// syncPlan assembles a sync's plan, with its requeue.
func (d *decision) syncPlan() Plan {
	p := d.plan()
	if d.sched != nil && !d.noRequeue {
		sched := *d.sched
		aim := nextScheduleAim(earliest(d.cj, &p.Status), d.now, sched)
		startAt := aim.Add(d.jitter(aim))
		if w := d.jitterWait; w != nil && !aim.IsZero() {
			if waitUntil := w.Add(d.jitter(*w)); waitUntil.Before(startAt) {
				aim, startAt = *w, waitUntil
			}
		}
		if !aim.IsZero() {
			p.RequeueAfter = ptr.To(startAt.Add(nextScheduleDelta).Sub(d.now))
			p.Status.NextScheduleTime = &metav1.Time{Time: aim}
			p.BaseStatus.NextScheduleTime = &metav1.Time{Time: aim}
		}
	}
	if p.RequeueAfter == nil {
		p.Status.NextScheduleTime, p.BaseStatus.NextScheduleTime = nil, nil
	}
	p.Summary = summarize(&p, d.outcome)
	return p
}
