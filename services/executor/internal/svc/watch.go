package svc

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	typedbatchv1 "k8s.io/client-go/kubernetes/typed/batch/v1"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
	"github.com/jobplane/jobplane/lib/fairlimit"
	"github.com/jobplane/jobplane/lib/kubewatch"
)

// WatchJobs streams the changes of jobplane's Jobs: first the current state
// as ADDED events (a consistent list) unless the request resumes from a
// resourceVersion, then the API server's own watch from that version,
// re-established from the last version seen whenever the API server closes
// it. It ends with OK when the client leaves or the server shuts down
// (Config.Done).
func (s *ExecutorService) WatchJobs(req *jobplanev1.WatchJobsRequest, stream jobplanev1.ExecutorService_WatchJobsServer) error {
	errs := apierr.Namespace(field.NewPath("namespace"), req.GetNamespace(), false)
	selector, selectorErrs := apierr.LabelSelector(field.NewPath("labelSelector"), req.GetLabelSelector())
	errs = append(errs, selectorErrs...)
	errs = append(errs, apierr.ResourceVersion(field.NewPath("resourceVersion"), req.GetResourceVersion())...)
	if err := apierr.Invalid("invalid WatchJobs request", errs); err != nil {
		return err
	}
	// The namespace's lane of the fair limiter (one lane for the cluster
	// scope's), not the lane of unkeyed requests: a caller's streams, each
	// listing again as it opens, would queue there.
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
	w := &jobWatch{
		s:        s,
		stream:   stream,
		jobs:     s.cfg.Client.BatchV1().Jobs(req.GetNamespace()),
		selector: selector.String(),
	}
	err := w.run(ctx, req.GetResourceVersion())
	if ctx.Err() != nil {
		return nil // the client left or the server is shutting down
	}
	return s.fromKube(err)
}

// jobWatch is one WatchJobs stream.
type jobWatch struct {
	s        *ExecutorService
	stream   jobplanev1.ExecutorService_WatchJobsServer
	jobs     typedbatchv1.JobInterface
	selector string
}

func (w *jobWatch) run(ctx context.Context, resourceVersion string) error {
	if resourceVersion == "" {
		var err error
		if resourceVersion, err = w.sendCurrentState(ctx); err != nil {
			return err
		}
	}
	open := func(ctx context.Context, rv string) (watch.Interface, error) {
		return w.jobs.Watch(ctx, metav1.ListOptions{LabelSelector: w.selector, ResourceVersion: rv, AllowWatchBookmarks: true})
	}
	return kubewatch.Follow(ctx, resourceVersion, open, w.relay)
}

// listPageSize bounds the Jobs a stream's initial state holds at once: the
// state is listed page by page, every page at the first one's version.
const listPageSize = 500

// sendCurrentState sends each matching Job of a fresh list as ADDED, in the
// API server's order, and returns the list's resourceVersion. Only the last
// event carries it: resuming from the version of a Job sent earlier could
// miss the Jobs not sent yet, so each Job is held back until the next one
// (or the list's end) is known.
func (w *jobWatch) sendCurrentState(ctx context.Context) (string, error) {
	opts := metav1.ListOptions{LabelSelector: w.selector, Limit: listPageSize}
	var held *batchv1.Job
	for {
		page, err := w.jobs.List(ctx, opts)
		if err != nil {
			return "", err
		}
		for i := range page.Items {
			job := &page.Items[i]
			if !w.s.manages(job) {
				continue
			}
			if held != nil {
				if err := w.send(watch.Added, held, ""); err != nil {
					return "", err
				}
			}
			held = job
		}
		if page.Continue == "" {
			if held != nil {
				if err := w.send(watch.Added, held, page.ResourceVersion); err != nil {
					return "", err
				}
			}
			return page.ResourceVersion, nil
		}
		opts.Continue = page.Continue
	}
}

// relay sends a change of one of jobplane's Jobs, resumable from the Job's
// resourceVersion after it.
func (w *jobWatch) relay(ev watch.Event) error {
	job, ok := ev.Object.(*batchv1.Job)
	if !ok || !w.s.manages(job) {
		return nil
	}
	return w.send(ev.Type, job, job.ResourceVersion)
}

func (w *jobWatch) send(t watch.EventType, job *batchv1.Job, resumeFrom string) error {
	out, err := w.s.jobToProto(job)
	if err != nil {
		return err
	}
	return w.stream.Send(&jobplanev1.WatchJobsResponse{Type: string(t), Job: out, ResourceVersion: resumeFrom})
}
