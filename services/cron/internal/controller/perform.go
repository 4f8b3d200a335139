package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/lib/kubeconv"
	"github.com/jobplane/jobplane/services/cron/internal/decide"
)

// outcome is what performing a plan did.
type outcome struct {
	// created are the Jobs the executor created or already had, in the
	// plan's order.
	created []*jobplanev1.Job
	// status is the status written (or that needed no write).
	status cronapi.CronJobStatus
	// stop: the sync ends without a requeue (the reference's answer to a
	// Job of the same name that another controller owns).
	stop bool
	err  error
}

// perform runs a plan's actions in order, then writes the status if it
// changed. The status starts from the plan's base (everything but the
// creations) and takes each creation that succeeded, so a failed creation
// leaves its run due for the next sync.
func (c *Controller) perform(ctx context.Context, in decide.Input, p decide.Plan) outcome {
	cronJob := in.CronJob
	ref := eventTarget(cronJob)
	st := *p.BaseStatus.DeepCopy()
	var out outcome
	// stopCreating: no run is handed over after this point; yielded: no
	// call to the executor is made either, the worker given up.
	stopCreating, yielded := false, false
	for _, a := range p.Actions {
		switch {
		case a.Event != nil:
			c.recorder.Event(ref, a.Event.Type, a.Event.Reason, a.Event.Message)
		case a.Delete != nil:
			if yielded {
				keepActive(&st, cronJob, a.Delete.UID)
				continue
			}
			err := c.deleteRun(ctx, cronJob, a.Delete)
			if errors.Is(err, errYielded) {
				keepActive(&st, cronJob, a.Delete.UID)
				stopCreating, yielded = true, true
				out.err = cmp.Or(out.err, err)
				continue
			}
			if err != nil {
				c.recorder.Eventf(ref, corev1.EventTypeWarning, "FailedDelete", "Deleted job: %v", err)
				keepActive(&st, cronJob, a.Delete.UID)
				if a.Reason == decide.ReasonReplace {
					// As the reference: no new run while the old one
					// could not be replaced.
					stopCreating = true
					out.err = fmt.Errorf("could not replace job %s/%s", a.Delete.Namespace, a.Delete.Name)
				}
				continue
			}
			c.recorder.Eventf(ref, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted job %v", a.Delete.Name)
		case a.Create != nil:
			if stopCreating {
				continue
			}
			job, created, err := c.createRun(ctx, cronJob, a.Create)
			switch {
			case errors.Is(err, errYielded):
				stopCreating, yielded = true, true
				out.err = cmp.Or(out.err, err)
			case errors.Is(err, errForeignJob):
				out.stop, stopCreating = true, true
			case err != nil:
				if !isNamespaceTerminating(err) {
					c.recorder.Eventf(ref, corev1.EventTypeWarning, "FailedCreate", "Error creating job: %v", err)
				}
				out.err, stopCreating = err, true
			default:
				if created {
					c.recorder.Eventf(ref, corev1.EventTypeNormal, "SuccessfulCreate", "Created job %v", job.GetMetadata().GetName())
					c.metrics.runEmitted(a.Create, c.cfg.Clock.Now())
				}
				kubeJob := &batchv1.Job{ObjectMeta: kubeconv.ObjectMetaToKube(job.GetMetadata())}
				decide.ApplyCreated(&st, a.Create, kubeJob)
				out.created = append(out.created, job)
			}
		}
	}
	c.metrics.missed(c.missed.add(cronJob, p.MissedRuns))
	out.status = st
	if err := c.writeStatus(ctx, cronJob, st); err != nil && out.err == nil {
		out.err = err
	}
	return out
}

// executorCallTimeout bounds a call to the executor (retries after a shed
// included): a worker waiting on it is held from every namespace's
// CronJobs, so an executor slow for one namespace's Jobs must not keep it
// (and another namespace waiting has it given up sooner: yield.go). The
// sync fails and is retried; a Job created meanwhile is found as the run's
// (createRun), so the run is delivered once.
const executorCallTimeout = 30 * time.Second

// errForeignJob: a Job of the run's name exists and another controller owns
// it.
var errForeignJob = errors.New("a Job of that name is controlled by another owner")

// createRun hands a run to the executor. created is false when the Job
// already existed and the CronJob controls it: the run happened before
// (its status write was lost), which counts as done.
func (c *Controller) createRun(ctx context.Context, cronJob *cronapi.CronJob, create *decide.CreateJob) (*jobplanev1.Job, bool, error) {
	req, err := kubeconv.JobFromKube(create.Job)
	if err != nil {
		return nil, false, err
	}
	call, done := c.seats.callExecutor(ctx)
	resp, err := c.cfg.Executor.SubmitJob(call, &jobplanev1.SubmitJobRequest{Job: req})
	err = callError(call, err)
	done()
	if err == nil {
		return resp.GetJob(), resp.GetCreated(), nil
	}
	if status.Code(err) != codes.AlreadyExists {
		return nil, false, err
	}
	// The Job exists but differs from the run (its template changed since):
	// whose is it?
	existing, getErr := c.cfg.Kube.BatchV1().Jobs(create.Job.Namespace).Get(ctx, create.Job.Name, metav1.GetOptions{})
	if getErr != nil {
		return nil, false, getErr
	}
	if ref := metav1.GetControllerOf(existing); ref == nil || ref.UID != cronJob.UID {
		c.log.Info("a Job of the run's name is not the CronJob's; leaving it", "cronjob", cronJob.Namespace+"/"+cronJob.Name, "job", existing.Name)
		return nil, false, errForeignJob
	}
	c.log.Info("Job already exists", "cronjob", cronJob.Namespace+"/"+cronJob.Name, "job", existing.Name)
	return &jobplanev1.Job{Metadata: kubeconv.ObjectMetaFromKube(&existing.ObjectMeta)}, false, nil
}

// deleteRun deletes a Job through the executor, background propagation,
// only if it is still the Job decided on (UID). A Job already gone is
// deleted. Only a Job of the CronJob's namespace, named with its UID, is
// ever deleted: the decision names no other, and a plan must not reach
// another tenant's Jobs whatever a status says.
func (c *Controller) deleteRun(ctx context.Context, cronJob *cronapi.CronJob, ref *corev1.ObjectReference) error {
	if ref.Namespace != cronJob.Namespace || ref.UID == "" {
		return fmt.Errorf("refusing to delete Job %s/%s (uid %q): not a Job of CronJob %s/%s", ref.Namespace, ref.Name, ref.UID, cronJob.Namespace, cronJob.Name)
	}
	call, done := c.seats.callExecutor(ctx)
	defer done()
	_, err := c.cfg.Executor.DeleteJob(call, &jobplanev1.DeleteJobRequest{
		Namespace: ref.Namespace, Name: ref.Name, Uid: string(ref.UID), PropagationPolicy: string(metav1.DeletePropagationBackground),
	})
	err = callError(call, err)
	if status.Code(err) == codes.NotFound {
		return nil
	}
	return err
}

// writeStatus writes the CronJob's status when what its kind stores of it
// changed, at the resourceVersion it was read at: a conflict fails the
// sync, which plans again.
func (c *Controller) writeStatus(ctx context.Context, cronJob *cronapi.CronJob, st cronapi.CronJobStatus) error {
	kind, err := c.kindOf(cronJob.APIVersion)
	if err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(cronJob.Status, kind.stored(cronJob, st)) {
		return nil
	}
	stored, err := kind.writeStatus(ctx, cronJob, st)
	if err != nil {
		c.metrics.statusWriteFailed(apierrors.IsConflict(err))
		return fmt.Errorf("writing the status of CronJob %s/%s: %w", cronJob.Namespace, cronJob.Name, err)
	}
	c.written.record(cronJobKey(cronJob.APIVersion, cronJob.Namespace, cronJob.Name), cronJob.ResourceVersion, stored)
	return nil
}

// keepActive puts back the active reference of a Job whose deletion failed,
// as the reference leaves it in the list.
func keepActive(st *cronapi.CronJobStatus, cronJob *cronapi.CronJob, uid types.UID) {
	for _, ref := range cronJob.Status.Active {
		if ref.UID != uid {
			continue
		}
		for _, have := range st.Active {
			if have.UID == ref.UID {
				return
			}
		}
		st.Active = append(st.Active, ref)
		return
	}
}

// eventTarget is the reference events are recorded on.
func eventTarget(cronJob *cronapi.CronJob) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		APIVersion: cronJob.APIVersion, Kind: cronapi.Kind,
		Namespace: cronJob.Namespace, Name: cronJob.Name, UID: cronJob.UID, ResourceVersion: cronJob.ResourceVersion,
	}
}

// isNamespaceTerminating: creating in a namespace being deleted fails, and
// the reference records no event for it.
func isNamespaceTerminating(err error) bool {
	return strings.Contains(status.Convert(err).Message(), "because it is being terminated")
}
