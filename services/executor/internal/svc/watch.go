package svc

import (
	"context"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	typedbatchv1 "k8s.io/client-go/kubernetes/typed/batch/v1"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
)

// minWatchLife: a watch the API server closes sooner than this is
// re-established only after this long, so that a server closing every watch
// at once is not asked again in a loop.
const minWatchLife = time.Second

// WatchJobs streams the changes of jobplane's Jobs: first the current state
// as ADDED events (a consistent list) unless the request resumes from a
// resourceVersion, then the API server's own watch from that version,
// re-established from the last version seen whenever the API server closes
// it. It ends with OK when the client leaves or the server shuts down
// (Config.Done).
func (s *ExecutorService) WatchJobs(req *jobplanev1.WatchJobsRequest, stream jobplanev1.ExecutorService_WatchJobsServer) error {
	selector, err := labels.Parse(req.GetLabelSelector())
	if err != nil {
		return apierr.InvalidArgument("invalid WatchJobs request", apierr.Violation{
			Field: "labelSelector", Description: "Invalid value: " + req.GetLabelSelector() + ": " + err.Error(),
		})
	}
	ctx, cancel := context.WithCancel(stream.Context())
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
	err = w.run(ctx, req.GetResourceVersion())
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
	for {
		started := time.Now()
		var err error
		if resourceVersion, err = w.follow(ctx, resourceVersion); err != nil || ctx.Err() != nil {
			return err
		}
		if time.Since(started) < minWatchLife {
			select {
			case <-time.After(minWatchLife):
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// sendCurrentState sends each matching Job of a fresh list as ADDED, by
// namespace and name, and returns the list's resourceVersion. Only the last
// event carries it: resuming from the version of a Job sent earlier could
// miss the Jobs not sent yet.
func (w *jobWatch) sendCurrentState(ctx context.Context) (string, error) {
	list, err := w.jobs.List(ctx, metav1.ListOptions{LabelSelector: w.selector})
	if err != nil {
		return "", err
	}
	jobs := make([]*batchv1.Job, 0, len(list.Items))
	for i := range list.Items {
		if w.s.manages(&list.Items[i]) {
			jobs = append(jobs, &list.Items[i])
		}
	}
	slices.SortFunc(jobs, func(a, b *batchv1.Job) int { return compareKeys(keyOf(a), keyOf(b)) })
	for i, job := range jobs {
		resumeFrom := ""
		if i == len(jobs)-1 {
			resumeFrom = list.ResourceVersion
		}
		if err := w.send(watch.Added, job, resumeFrom); err != nil {
			return "", err
		}
	}
	return list.ResourceVersion, nil
}

// follow relays one watch of the API server from resourceVersion until the
// server closes it (nil error) or it fails; it returns the last
// resourceVersion seen, bookmarks and other controllers' Jobs included.
func (w *jobWatch) follow(ctx context.Context, resourceVersion string) (string, error) {
	watcher, err := w.jobs.Watch(ctx, metav1.ListOptions{
		LabelSelector:       w.selector,
		ResourceVersion:     resourceVersion,
		AllowWatchBookmarks: true,
	})
	if err != nil {
		return resourceVersion, err
	}
	defer watcher.Stop()
	for {
		var ev watch.Event
		var open bool
		select {
		case <-ctx.Done():
			return resourceVersion, nil
		case ev, open = <-watcher.ResultChan():
		}
		if !open {
			return resourceVersion, nil
		}
		switch ev.Type {
		case watch.Error:
			return resourceVersion, apierrors.FromObject(ev.Object)
		case watch.Bookmark:
			if m, err := meta.Accessor(ev.Object); err == nil {
				resourceVersion = m.GetResourceVersion()
			}
		case watch.Added, watch.Modified, watch.Deleted:
			job, ok := ev.Object.(*batchv1.Job)
			if !ok {
				continue
			}
			resourceVersion = job.ResourceVersion
			if !w.s.manages(job) {
				continue
			}
			if err := w.send(ev.Type, job, job.ResourceVersion); err != nil {
				return resourceVersion, err
			}
		}
	}
}

func (w *jobWatch) send(t watch.EventType, job *batchv1.Job, resumeFrom string) error {
	out, err := w.s.jobToProto(job)
	if err != nil {
		return err
	}
	return w.stream.Send(&jobplanev1.WatchJobsResponse{Type: string(t), Job: out, ResourceVersion: resumeFrom})
}
