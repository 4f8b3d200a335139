package svc

import (
	"cmp"
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	typedbatchv1 "k8s.io/client-go/kubernetes/typed/batch/v1"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/lib/fairlimit"
	"github.com/jobplane/jobplane/lib/kubeconv"
	"github.com/jobplane/jobplane/lib/kubewatch"
)

// WatchJobInstances streams the Jobs the CronJobs emit, as they appear in
// the cluster: the API server's watch of Jobs, re-established from the last
// version seen whenever it closes, keeping the Jobs whose controller is a
// jobplane CronJob. Reading the Jobs themselves makes the stream resumable
// across restarts and failovers, on any replica.
func (s *CronService) WatchJobInstances(req *jobplanev1.WatchJobInstancesRequest, stream jobplanev1.CronService_WatchJobInstancesServer) error {
	errs := apierr.Namespace(field.NewPath("namespace"), req.GetNamespace(), false)
	if name := req.GetCronJobName(); name != "" {
		errs = apierr.ObjectKey(field.NewPath("namespace"), field.NewPath("cronJobName"), req.GetNamespace(), name)
	}
	errs = append(errs, s.checkAPIVersion(req.GetApiVersion())...)
	errs = append(errs, apierr.ResourceVersion(field.NewPath("resourceVersion"), req.GetResourceVersion())...)
	if err := apierr.Invalid("invalid WatchJobInstances request", errs); err != nil {
		return err
	}
	if s.cfg.Kube == nil {
		return withoutCluster("WatchJobInstances")
	}
	ctx, cancel := context.WithCancel(fairlimit.WithLane(stream.Context(), fairlimit.NamespaceLane(req.GetNamespace())))
	defer cancel()
	if done := s.cfg.Done; done != nil {
		go func() {
			select {
			case <-done:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	w := &instanceWatch{stream: stream, jobs: s.cfg.Kube.BatchV1().Jobs(req.GetNamespace()), cronJob: req.GetCronJobName(),
		apiVersion: cmp.Or(req.GetApiVersion(), cronapi.APIVersion)}
	err := w.run(ctx, req.GetResourceVersion())
	if ctx.Err() != nil {
		return nil // the client left or the server is shutting down
	}
	return watchError(err)
}

// instanceWatch is one WatchJobInstances stream.
type instanceWatch struct {
	stream  jobplanev1.CronService_WatchJobInstancesServer
	jobs    typedbatchv1.JobInterface
	cronJob string
	// apiVersion is the kind of CronJob whose Jobs are followed.
	apiVersion string
}

func (w *instanceWatch) run(ctx context.Context, resourceVersion string) error {
	if resourceVersion == "" {
		// From now on: the version of an empty page of the current state.
		list, err := w.jobs.List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return err
		}
		resourceVersion = list.ResourceVersion
	}
	open := func(ctx context.Context, rv string) (watch.Interface, error) {
		return w.jobs.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
	}
	return kubewatch.Follow(ctx, resourceVersion, open, w.relay)
}

// relay sends the Jobs a CronJob emitted as they appear.
func (w *instanceWatch) relay(ev watch.Event) error {
	job, ok := ev.Object.(*batchv1.Job)
	if !ok || ev.Type != watch.Added {
		return nil
	}
	if instance := w.instance(job); instance != nil {
		return w.stream.Send(instance)
	}
	return nil
}

// instance is the message for a Job a CronJob emitted, or nil for any other
// Job.
func (w *instanceWatch) instance(job *batchv1.Job) *jobplanev1.WatchJobInstancesResponse {
	ref := metav1.GetControllerOf(job)
	if ref == nil || ref.APIVersion != w.apiVersion || ref.Kind != cronapi.Kind {
		return nil
	}
	if w.cronJob != "" && ref.Name != w.cronJob {
		return nil
	}
	out, err := kubeconv.JobFromKube(job)
	if err != nil {
		return nil
	}
	trigger := job.Annotations[cronapi.TriggerAnnotation]
	if trigger == "" {
		trigger = cronapi.TriggerSchedule
	}
	resp := &jobplanev1.WatchJobInstancesResponse{
		CronJob:         &jobplanev1.ObjectReference{ApiVersion: ref.APIVersion, Kind: ref.Kind, Namespace: job.Namespace, Name: ref.Name, Uid: string(ref.UID)},
		Trigger:         trigger,
		Job:             out,
		ResourceVersion: job.ResourceVersion,
	}
	if t, err := time.Parse(time.RFC3339, job.Annotations[batchv1.CronJobScheduledTimestampAnnotation]); err == nil {
		resp.ScheduledTime = kubeconv.Timestamp(t) // an annotation anyone creating Jobs writes: year 0 parses
	}
	return resp
}

// watchError maps a watch's end to the contract's codes.
func watchError(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		return apierr.New(codes.OutOfRange, "RESOURCE_VERSION_TOO_OLD", nil,
			"%v; watch again from now (empty resource_version)", err)
	}
	return apierr.FromKube(err)
}
