// Package decide is the cron service's decision as a pure function: from a
// CronJob, the Jobs of its namespace and the current time, what one sync
// does (Jobs to create and delete, events, the next status, when to look
// again). No I/O, no clock: the same input gives the same plan. The
// controller performs it; PlanCronJob exposes it.
//
// Without extension fields a sync is the reference's (k8s.io/kubernetes
// v1.36.3 pkg/controller/cronjob: cleanupFinishedJobs then syncCronJob),
// except for the reference's faults listed in the contract (cronjob.proto,
// cron_service.proto), which are fixed here.
package decide

import (
	"errors"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jobplane/jobplane/lib/cronapi"
)

// Input is what a sync reads.
type Input struct {
	// CronJob with its status; not modified.
	CronJob *cronapi.CronJob
	// Jobs of the CronJob's namespace; those whose controller owner
	// reference has the CronJob's UID are its own. Not modified.
	Jobs []*batchv1.Job
	// Now is the current time.
	Now time.Time
	// Local is the zone of a CronJob without spec.timeZone (the service's
	// own, as the reference uses kube-controller-manager's).
	Local *time.Location
	// Unread are active Jobs (namespace and name) the performer has not
	// looked up this sync (it reads a few live a sync): kept listed as
	// they are, and no run starts while any is listed, since each may be
	// running. The performer syncs again soon.
	Unread map[types.NamespacedName]bool
}

// Plan is what a sync decides. The performer runs the actions in order
// (deletions, then creations), then writes Status when UpdateStatus.
type Plan struct {
	Actions []Action
	// Status once every action succeeds. Active references to Jobs still
	// to be created have no UID. It equals BaseStatus with ApplyCreated
	// applied to every creation, each with its Job as planned.
	Status cronapi.CronJobStatus
	// BaseStatus is the status after everything but the creations. The
	// performer starts from a copy of it and calls ApplyCreated for each
	// creation that succeeded, so a failed creation leaves its Job out of
	// active, lastScheduleTime unchanged and its pending run queued.
	BaseStatus cronapi.CronJobStatus
	// UpdateStatus says Status differs from the input's and must be written.
	UpdateStatus bool
	// RequeueAfter is when to sync again; nil means only on a change.
	RequeueAfter *time.Duration
	// MissedRuns are the scheduled times given up on by this sync, oldest
	// first, at most maxListedMissedRuns.
	MissedRuns []time.Time
	// Skipped are the times a backfill left out because their Job exists or
	// they are already pending.
	Skipped []time.Time
	// Summary says in a sentence what the sync decided.
	Summary string
}

// Action is one step. Exactly one of Create, Delete and Event is set.
type Action struct {
	// Reason is machine-readable, in the reference's vocabulary where it
	// has one.
	Reason string
	// Explanation is a sentence saying why.
	Explanation string

	Create *CreateJob
	Delete *corev1.ObjectReference
	Event  *Event
}

// CreateJob is a Job to create.
type CreateJob struct {
	// Job is complete: deterministic name, namespace, template, annotations,
	// controller owner reference.
	Job           *batchv1.Job
	ScheduledTime time.Time
	// Trigger is cronapi.TriggerSchedule, TriggerCatchUp, TriggerManual or
	// TriggerBackfill.
	Trigger string
	// FromPending says the run was taken from status.pendingRuns: once
	// created it leaves the queue.
	FromPending bool
}

// Event is an event to record on the CronJob.
type Event struct {
	Type    string // corev1.EventTypeNormal or corev1.EventTypeWarning
	Reason  string
	Message string
}

// Errors of Trigger and Backfill, to be matched with errors.Is.
var (
	// ErrConcurrencyPolicy: the concurrency policy forbids the run now.
	ErrConcurrencyPolicy = errors.New("the concurrency policy forbids the run")
	// ErrDeleting: the CronJob is being deleted.
	ErrDeleting = errors.New("the CronJob is being deleted")
	// ErrInvalidBackfill: the backfill request is invalid.
	ErrInvalidBackfill = errors.New("invalid backfill")
	// ErrInvalidSchedule: the CronJob's schedule or time zone cannot be read.
	ErrInvalidSchedule = errors.New("invalid schedule")
)

// ReasonReplace is the reason of the deletions the Replace concurrency
// policy decides: the performer creates nothing more when one fails, as the
// reference.
const ReasonReplace = "Replace"
