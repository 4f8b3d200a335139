package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha2 "k8s.io/api/scheduling/v1alpha2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/plan"
	"github.com/jobplane/jobplane/services/executor/internal/gang"
	"github.com/jobplane/jobplane/services/executor/internal/jobstate"
)

// Outcomes of an action, as the contract names them.
const (
	resultDone    = "Done"
	resultFailed  = "Failed"
	resultSkipped = "Skipped"
)

// Event reasons of single pod writes, the reference's.
const (
	reasonSuccessfulCreate = "SuccessfulCreate"
	reasonFailedCreate     = "FailedCreate"
	reasonSuccessfulDelete = "SuccessfulDelete"
	reasonFailedDelete     = "FailedDelete"
	// reasonSnapshotTooLarge is jobplane's: a Job whose snapshot is more
	// than the planner keeps, or whose Job or one pod alone is more than
	// it takes in one request, is not planned.
	reasonSnapshotTooLarge = "SnapshotTooLarge"
)

// slowStartInitialBatchSize is the reference's first creation batch.
const slowStartInitialBatchSize = 1

// performer performs one plan on one Job.
type performer struct {
	c   *Controller
	key string
	// job is the Job as last written (its resourceVersion is the next
	// write's precondition).
	job  *batchv1.Job
	plan *plan.Plan
	// podGroup is the PodGroup the Job's pods join; nil: none.
	podGroup *schedulingv1alpha2.PodGroup
	// turns gives the sync's pod requests their tokens (yield.go).
	turns *requestTurns
}

// perform performs p's actions in order and stops at the first that fails;
// the actions after it are Skipped. It returns one outcome per action and
// the Job after. The pods it creates join podGroup, when not nil.
func (c *Controller) perform(ctx context.Context, key string, job *batchv1.Job, p *plan.Plan, podGroup *schedulingv1alpha2.PodGroup) ([]*jobplanev1.ActionOutcome, *batchv1.Job, error) {
	w := &performer{c: c, key: key, job: job, plan: p, podGroup: podGroup, turns: c.requestTurns(ctx, key)}
	outcomes := make([]*jobplanev1.ActionOutcome, len(p.Actions))
	var failure error
	for i, a := range p.Actions {
		if failure != nil {
			outcomes[i] = &jobplanev1.ActionOutcome{Result: resultSkipped, Failed: int32(actionSize(a))}
			continue
		}
		succeeded, failed, err := w.do(ctx, i, a)
		outcomes[i] = &jobplanev1.ActionOutcome{Result: resultDone, Succeeded: int32(succeeded), Failed: int32(failed)}
		if errors.Is(err, errYielded) {
			c.metrics.recordYield(a)
		}
		if err != nil {
			outcomes[i].Result, outcomes[i].Error = resultFailed, err.Error()
			reason, _ := a.Why()
			failure = fmt.Errorf("action %d (%s): %w", i, reason, err)
		}
	}
	if failure == nil {
		if p.ReleaseJobState {
			c.state.Release(key)
			c.metrics.jobDone(key)
		}
		c.metrics.recordPlan(p)
	}
	return outcomes, w.job, failure
}

func actionSize(a plan.Action) int {
	switch a := a.(type) {
	case plan.CreatePods:
		return len(a.Pods)
	case plan.DeletePods:
		return len(a.Pods)
	case plan.RemoveFinalizers:
		return len(a.Pods)
	}
	return 1
}

// do performs action i: how many items succeeded and failed, and why it
// failed.
func (w *performer) do(ctx context.Context, i int, a plan.Action) (succeeded, failed int, err error) {
	switch a := a.(type) {
	case plan.CreatePods:
		return w.createPods(ctx, a)
	case plan.DeletePods:
		return w.deletePods(ctx, i, a)
	case plan.RemoveFinalizers:
		return w.removeFinalizers(ctx, i, a)
	case plan.WriteStatus:
		if err := w.writeStatus(ctx, a.Status); err != nil {
			return 0, 1, err
		}
		if a.BackoffRecord != nil {
			w.c.state.SetBackoff(w.key, *a.BackoffRecord)
		}
		return 1, 0, nil
	case plan.RecordEvent:
		w.c.recorder.Event(w.job, a.Type, a.Reason, a.Message)
		return 1, 0, nil
	case plan.Requeue:
		w.c.queue.AddAfter(w.key, a.After)
		return 1, 0, nil
	}
	return 0, 1, fmt.Errorf("unknown action %T", a)
}

// createPods creates the pods in slow-start batches of 1, 2, 4, ... each
// created in parallel, stopping after a batch with a failure, as the
// reference: a quota or admission refusal costs one failed call per batch,
// not one per pod. Creations failed or never made lower the expectations
// again, since the informer will not see them. A worker's sync may stop
// sooner, giving its worker up to another namespace (yield.go).
func (w *performer) createPods(ctx context.Context, a plan.CreatePods) (succeeded, failed int, err error) {
	w.c.state.ExpectCreations(w.key, len(a.Pods))
	var created, refused, notMade atomic.Int32
	var errs errorList
	pending := a.Pods
	yielded := false
	for batch := min(len(pending), slowStartInitialBatchSize); len(pending) > 0 && !yielded; batch = min(2*batch, len(pending)) {
		failuresBefore := errs.len()
		r := w.turns.round(ctx)
		var wg sync.WaitGroup
		for _, spec := range pending[:batch] {
			wg.Go(func() {
				reqCtx, ok := r.admit()
				if !ok {
					return
				}
				pod := plan.NewPod(w.job, spec)
				gang.Join(pod, w.podGroup)
				newPod, err := w.c.pods.create(reqCtx, pod)
				if err != nil && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
					// Every later creation fails the same way; the
					// namespace's deletion takes the Job with it.
					return
				}
				if err != nil {
					w.c.recorder.Eventf(w.job, corev1.EventTypeWarning, reasonFailedCreate, "Error creating: %v", err)
					w.c.state.CreationsObserved(w.key, 1)
					refused.Add(1)
					errs.add(err)
					return
				}
				w.c.recorder.Eventf(w.job, corev1.EventTypeNormal, reasonSuccessfulCreate, "Created pod: %v", newPod.Name)
				created.Add(1)
			})
		}
		wg.Wait()
		yielded = r.end(len(pending) > batch)
		notMade.Add(r.notMade.Load())
		pending = pending[batch:]
		if errs.len() > failuresBefore && len(pending) > 0 {
			break
		}
	}
	if n := int(notMade.Load()) + len(pending); n > 0 {
		w.c.state.CreationsObserved(w.key, n)
	}
	w.c.metrics.recordCreations(a.CreationReason, int(created.Load()), int(refused.Load()))
	failed = int(refused.Load()) + int(notMade.Load()) + len(pending)
	return int(created.Load()), failed, requestsEnded(ctx, yielded, int(notMade.Load()), &errs)
}

// deletePods deletes the pods in parallel, each after removing its tracking
// finalizer when the plan says so. A pod already gone counts as deleted. A
// worker's sync may stop sooner, giving its worker up to another namespace
// (yield.go): expected deletions not made lower the expectations again; a
// finishing Job's deletions, which count none, are tracked instead until
// the informer shows them, and a pod whose deletion is in flight counts as
// deleted without a second request.
func (w *performer) deletePods(ctx context.Context, i int, a plan.DeletePods) (succeeded, failed int, err error) {
	pods := a.Pods
	var deleted atomic.Int32
	if a.ExpectDeletions {
		w.c.state.ExpectDeletions(w.key, len(pods))
	} else {
		pods = w.deletionsNotInFlight(pods)
		deleted.Add(int32(len(a.Pods) - len(pods)))
		w.c.state.TrackDeletions(w.key, uidsOf(pods))
	}
	var errs errorList
	r := w.turns.round(ctx)
	var wg sync.WaitGroup
	for _, ref := range pods {
		wg.Go(func() {
			// noDeletionToSee: the informer will show no deletion of the
			// pod by this request.
			noDeletionToSee := func() {
				if a.ExpectDeletions {
					w.c.state.DeletionsObserved(w.key, 1)
				} else {
					w.c.state.ForgetDeletion(w.key, ref.UID)
				}
			}
			failDelete := func(err error) {
				noDeletionToSee()
				if gone(err) {
					deleted.Add(1)
					return
				}
				errs.add(err)
			}
			// The pod's first request takes its turn; its deletion after
			// its finalizer's removal is made whatever the round, so that
			// giving the worker up never leaves a pod half done.
			reqCtx, ok := r.admit()
			if !ok {
				noDeletionToSee()
				return
			}
			if a.RemoveTrackingFinalizer {
				if err := w.c.pods.removeFinalizer(reqCtx, w.job.Namespace, ref.Name, ref.UID, w.c.cfg.Finalizer); err != nil {
					failDelete(fmt.Errorf("removing the tracking finalizer: %w", err))
					return
				}
				w.c.metrics.finalizersRemoved.WithLabelValues("delete").Inc()
				reqCtx = ctx
			}
			err := w.c.pods.delete(reqCtx, w.job.Namespace, ref.Name, ref.UID)
			switch {
			case err == nil:
				w.c.recorder.Eventf(w.job, corev1.EventTypeNormal, reasonSuccessfulDelete, "Deleted pod: %v", ref.Name)
				deleted.Add(1)
			case gone(err):
				failDelete(err)
			default:
				w.c.recorder.Eventf(w.job, corev1.EventTypeWarning, reasonFailedDelete, "Error deleting: %v", err)
				failDelete(err)
			}
		})
	}
	wg.Wait()
	yielded := r.end(false)
	err = requestsEnded(ctx, yielded, int(r.notMade.Load()), &errs)
	if errors.Is(err, errYielded) && !a.ExpectDeletions {
		// A failed write is the sync's error: retried with backoff, the
		// yield not counted.
		if werr := w.keepFinishingDecision(ctx, i); werr != nil {
			err = werr
		}
	}
	return int(deleted.Load()), len(a.Pods) - int(deleted.Load()), err
}

// keepFinishingDecision writes, when a finishing Job's deletions gave the
// worker up, the interim condition the status after action i would have
// added (FailureTarget, SuccessCriteriaMet), on the status as it is. The
// reference writes it with the deletions' counts, and its later syncs keep
// a condition already written; without it, the next sync would decide
// again, from pods the deletions made count as failed: a Job past its
// deadline would fail with BackoffLimitExceeded, a succeeded one too. The
// reference never shows the condition beside the counts of before the
// deletions; the next sync, queued at once, writes them.
func (w *performer) keepFinishingDecision(ctx context.Context, i int) error {
	next := w.nextStatus(i)
	if next == nil {
		return nil
	}
	status := *w.job.Status.DeepCopy()
	added := false
	for _, c := range next.Conditions {
		interim := c.Type == batchv1.JobFailureTarget || c.Type == batchv1.JobSuccessCriteriaMet
		if interim && c.Status == corev1.ConditionTrue && !hasCondition(&status, c.Type) {
			status.Conditions = append(status.Conditions, c)
			added = true
		}
	}
	if !added {
		return nil
	}
	return w.writeStatus(ctx, status)
}

func hasCondition(status *batchv1.JobStatus, typ batchv1.JobConditionType) bool {
	for _, c := range status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// deletionsNotInFlight is pods less those whose deletion, issued by an
// earlier sync, the informer has not shown yet: deleting them again would
// succeed as the first deletion did (the reference's stale cache does so),
// at the cost of a request.
func (w *performer) deletionsNotInFlight(pods []plan.PodRef) []plan.PodRef {
	left := make([]plan.PodRef, 0, len(pods))
	for _, ref := range pods {
		if !w.c.state.DeletionInFlight(w.key, ref.UID) {
			left = append(left, ref)
		}
	}
	return left
}

func uidsOf(pods []plan.PodRef) []types.UID {
	uids := make([]types.UID, len(pods))
	for i, ref := range pods {
		uids[i] = ref.UID
	}
	return uids
}

// removeFinalizers patches the pods in parallel. When some fail, the
// uncounted pods whose finalizer did go are counted in a status write of
// their own, as the reference does, before the action reports its failure.
// A worker's sync may stop sooner, giving its worker up to another namespace
// (yield.go): the pods not patched keep their finalizer and stay uncounted,
// and the next sync removes it.
func (w *performer) removeFinalizers(ctx context.Context, i int, a plan.RemoveFinalizers) (succeeded, failed int, err error) {
	w.c.state.ExpectFinalizersRemoved(w.key, uidsOf(a.Pods))
	var errs errorList
	var mu sync.Mutex
	var kept []types.UID // pods whose finalizer was not removed
	r := w.turns.round(ctx)
	var wg sync.WaitGroup
	for _, ref := range a.Pods {
		wg.Go(func() {
			var err error
			if reqCtx, ok := r.admit(); ok {
				if err = w.c.pods.removeFinalizer(reqCtx, w.job.Namespace, ref.Name, ref.UID, w.c.cfg.Finalizer); err == nil {
					w.c.metrics.finalizersRemoved.WithLabelValues("finished").Inc()
					return
				}
			}
			// No update will show this removal: forget it now.
			w.c.state.FinalizerRemovalObserved(w.key, ref.UID)
			if gone(err) {
				return
			}
			if err != nil {
				errs.add(err)
			}
			mu.Lock()
			kept = append(kept, ref.UID)
			mu.Unlock()
		})
	}
	wg.Wait()
	yielded := r.end(false)
	err = requestsEnded(ctx, yielded, int(r.notMade.Load()), &errs)
	if err == nil || errors.Is(err, errYielded) {
		return len(a.Pods) - len(kept), len(kept), err
	}
	if next := w.nextStatus(i); next != nil {
		if partial, ok := plan.PartialCount(w.job.Status, next, kept); ok {
			if werr := w.writeStatus(ctx, partial); werr != nil {
				return len(a.Pods) - len(kept), len(kept), errors.Join(err, werr)
			}
		}
	}
	return len(a.Pods) - len(kept), len(kept), err
}

// nextStatus is the status of the first write after action i, if any.
func (w *performer) nextStatus(i int) *batchv1.JobStatus {
	for _, a := range w.plan.Actions[i+1:] {
		if ws, ok := a.(plan.WriteStatus); ok {
			return &ws.Status
		}
	}
	return nil
}

// writeStatus replaces the Job's status, with the resourceVersion last seen
// as precondition: a conflict fails the action and the Job is synced again.
func (w *performer) writeStatus(ctx context.Context, status batchv1.JobStatus) error {
	// w.job is this sync's own copy, and a write does not change what it
	// sends: the status is replaced on a shallow copy.
	job := *w.job
	job.Status = status
	updated, err := updateStatus(ctx, w.c.cfg.Client, &job)
	if err != nil {
		return fmt.Errorf("writing the status: %w", err)
	}
	w.job = updated
	w.c.state.WroteAt(w.key, jobstate.Jobs, updated.ResourceVersion)
	if isFinished(updated) {
		w.c.state.MarkFinished(updated.UID)
	}
	return nil
}

// gone says whether err means the pod no longer exists (or is another pod
// of the same name).
func gone(err error) bool {
	return apierrors.IsNotFound(err) || isUIDPreconditionFailure(err)
}

// isUIDPreconditionFailure says whether a write was refused because the pod
// has another UID: a delete's UID precondition fails with a conflict, while
// a patch whose metadata.uid differs is refused as an invalid change of the
// immutable uid (the reference's ReleasePod relies on the same).
func isUIDPreconditionFailure(err error) bool {
	if apierrors.IsConflict(err) {
		return strings.Contains(err.Error(), "UID")
	}
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, cause := range status.Status().Details.Causes {
		if cause.Field == "metadata.uid" {
			return true
		}
	}
	return false
}

// errorList gathers the errors of parallel calls.
type errorList struct {
	mu   sync.Mutex
	errs []error
}

func (l *errorList) add(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err)
}

func (l *errorList) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.errs)
}

// err summarises: the first error and how many there were.
func (l *errorList) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch len(l.errs) {
	case 0:
		return nil
	case 1:
		return l.errs[0]
	}
	return fmt.Errorf("%w (and %d more errors)", l.errs[0], len(l.errs)-1)
}
