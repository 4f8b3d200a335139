package svc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
)

// apiWatch is one watch the service opened on the fake API server.
type apiWatch struct {
	*watch.FakeWatcher
	resourceVersion string
	selector        string
}

// serveWatches answers the service's Job watches with fake watchers the test
// drives, and its Job lists with the fixture's Jobs at resourceVersion
// listVersion, as the API server pages them: in the order of their keys,
// Limit at a time.
func serveWatches(f *fixture, listVersion string) <-chan apiWatch {
	watches := make(chan apiWatch, 8)
	f.client.PrependWatchReactor("jobs", func(action k8stesting.Action) (bool, watch.Interface, error) {
		r := action.(k8stesting.WatchActionImpl).WatchRestrictions
		w := watch.NewFakeWithChanSize(16, false)
		watches <- apiWatch{FakeWatcher: w, resourceVersion: r.ResourceVersion, selector: r.Labels.String()}
		return true, w, nil
	})
	f.client.PrependReactor("list", "jobs", func(action k8stesting.Action) (bool, runtime.Object, error) {
		opts := action.(k8stesting.ListActionImpl).ListOptions
		keys := f.cache.ListKeys()
		slices.Sort(keys)
		start := 0
		if opts.Continue != "" {
			start = slices.Index(keys, opts.Continue) + 1
		}
		list := &batchv1.JobList{ListMeta: metav1.ListMeta{ResourceVersion: listVersion}}
		for _, key := range keys[start:] {
			if opts.Limit > 0 && int64(len(list.Items)) == opts.Limit {
				list.Continue = key
				break
			}
			o, _, _ := f.cache.GetByKey(key)
			list.Items = append(list.Items, *o.(*batchv1.Job))
		}
		if list.Continue != "" {
			list.Continue = keys[start+len(list.Items)-1] // the last key sent
		}
		return true, list, nil
	})
	return watches
}

func nextWatch(t *testing.T, watches <-chan apiWatch) apiWatch {
	t.Helper()
	select {
	case w := <-watches:
		return w
	case <-time.After(10 * time.Second):
		t.Fatal("the service opened no watch")
		return apiWatch{}
	}
}

type event struct{ typ, job, resourceVersion string }

func recv(t *testing.T, stream jobplanev1.ExecutorService_WatchJobsClient) event {
	t.Helper()
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("Recv: %v", err)
	}
	meta := resp.GetJob().GetMetadata()
	return event{resp.GetType(), meta.GetNamespace() + "/" + meta.GetName(), resp.GetResourceVersion()}
}

func at(j *batchv1.Job, resourceVersion string) *batchv1.Job {
	j.ResourceVersion = resourceVersion
	return j
}

func TestWatchJobsStartsWithTheCurrentStateThenFollowsAcrossReconnects(t *testing.T) {
	f := newFixture(t, job("b", "two"), job("a", "theirs", managedByOther), job("a", "one"))
	watches := serveWatches(f, "100")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := f.api.WatchJobs(ctx, &jobplanev1.WatchJobsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// Only the last event of the initial state is a point to resume from.
	for _, want := range []event{{"ADDED", "a/one", ""}, {"ADDED", "b/two", "100"}} {
		if got := recv(t, stream); got != want {
			t.Errorf("got %v, want %v", got, want)
		}
	}
	w := nextWatch(t, watches)
	if w.resourceVersion != "100" {
		t.Errorf("watch from %q, want the list's 100", w.resourceVersion)
	}
	w.Add(at(job("a", "three"), "101"))
	w.Modify(at(job("a", "theirs", managedByOther), "102"))
	w.Action(watch.Bookmark, at(&batchv1.Job{}, "103"))
	w.Stop() // the API server closes the watch

	w2 := nextWatch(t, watches)
	if w2.resourceVersion != "103" {
		t.Errorf("watch re-established from %q, want the bookmark's 103", w2.resourceVersion)
	}
	w2.Delete(at(job("a", "one"), "104"))
	for _, want := range []event{{"ADDED", "a/three", "101"}, {"DELETED", "a/one", "104"}} {
		if got := recv(t, stream); got != want {
			t.Errorf("got %v, want %v", got, want)
		}
	}

	w2.Error(&apierrors.NewResourceExpired("too old resource version: 104 (200)").ErrStatus)
	_, err = stream.Recv()
	wantStatus(t, err, codes.OutOfRange, "too old resource version")
	equal(t, "API actions", f.actions(), []string{"list jobs", "watch jobs", "watch jobs"})
}

// watchingAll is a WatchJobs stream of every namespace over jobs, listed
// at resourceVersion 100 as the API server pages them.
func watchingAll(t *testing.T, jobs ...runtime.Object) (*fixture, jobplanev1.ExecutorService_WatchJobsClient) {
	t.Helper()
	f := newFixture(t, jobs...)
	serveWatches(f, "100")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	stream, err := f.api.WatchJobs(ctx, &jobplanev1.WatchJobsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return f, stream
}

func TestWatchJobsSendsTheCurrentStateAPageAtATime(t *testing.T) {
	var jobs []runtime.Object
	for i := range 1203 {
		j := job(fmt.Sprintf("ns-%d", i%3), fmt.Sprintf("job-%04d", i))
		if i%100 == 7 {
			j = job(j.Namespace, j.Name, managedByOther)
		}
		jobs = append(jobs, j)
	}
	f, stream := watchingAll(t, jobs...)
	var sent []string
	for range 1203 - 12 {
		e := recv(t, stream)
		if e.typ != "ADDED" || (e.resourceVersion != "") != (len(sent) == 1203-13) {
			t.Fatalf("event %d: %v", len(sent), e)
		}
		sent = append(sent, e.job)
	}
	if !slices.IsSorted(sent) {
		t.Error("the initial state is not in the API server's order")
	}
	var limits, continues []string
	for _, a := range f.client.Actions() {
		if l, ok := a.(k8stesting.ListActionImpl); ok {
			limits = append(limits, fmt.Sprint(l.ListOptions.Limit))
			continues = append(continues, l.ListOptions.Continue)
		}
	}
	equal(t, "list limits", limits, []string{"500", "500", "500"})
	equal(t, "list continues", continues, []string{"", "ns-1/job-0295", "ns-2/job-0593"})
}

// A last page holding only another controller's Job: the held-back Job of
// the page before carries the list's version.
func TestWatchJobsEndsTheCurrentStateOnAPageOfNoneOfItsJobs(t *testing.T) {
	var jobs []runtime.Object
	for i := range 500 {
		jobs = append(jobs, job("a", fmt.Sprintf("job-%03d", i)))
	}
	jobs = append(jobs, job("z", "theirs", managedByOther))
	_, stream := watchingAll(t, jobs...)
	for i := range 500 {
		e := recv(t, stream)
		if want := map[bool]string{true: "100"}[i == 499]; e.resourceVersion != want {
			t.Fatalf("event %d %v: resource version %q, want %q", i, e, e.resourceVersion, want)
		}
	}
}

func TestWatchJobsResumesFromAResourceVersion(t *testing.T) {
	f := newFixture(t, job("a", "one"))
	watches := serveWatches(f, "100")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := f.api.WatchJobs(ctx, &jobplanev1.WatchJobsRequest{Namespace: "a", LabelSelector: "team=batch", ResourceVersion: "55"})
	if err != nil {
		t.Fatal(err)
	}
	w := nextWatch(t, watches)
	if w.resourceVersion != "55" || w.selector != "team=batch" {
		t.Errorf("watch from %q selecting %q", w.resourceVersion, w.selector)
	}
	w.Modify(at(job("a", "one"), "56"))
	if got, want := recv(t, stream), (event{"MODIFIED", "a/one", "56"}); got != want {
		t.Errorf("got %v, want %v", got, want)
	}
	equal(t, "API actions", f.actions(), []string{"watch jobs"}) // no list: the client has the state
}

func TestWatchJobsEndsWithOKWhenTheServerShutsDown(t *testing.T) {
	f := newFixture(t)
	watches := serveWatches(f, "1")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := f.api.WatchJobs(ctx, &jobplanev1.WatchJobsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	w := nextWatch(t, watches)
	close(f.done)
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("Recv after shutdown: %v, want io.EOF (status OK)", err)
	}
	waitStopped(t, w)
}

func TestWatchJobsStopsTheAPIWatchWhenTheClientLeaves(t *testing.T) {
	f := newFixture(t)
	watches := serveWatches(f, "1")
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := f.api.WatchJobs(ctx, &jobplanev1.WatchJobsRequest{}); err != nil {
		t.Fatal(err)
	}
	w := nextWatch(t, watches)
	cancel()
	waitStopped(t, w)
}

func waitStopped(t *testing.T, w apiWatch) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !w.IsStopped() {
		if time.Now().After(deadline) {
			t.Fatal("the API watch was not stopped")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestWatchJobsErrors(t *testing.T) {
	cases := []struct {
		name    string
		req     *jobplanev1.WatchJobsRequest
		setup   func(*fixture)
		code    codes.Code
		fields  []string
		actions []string
	}{
		{name: "bad label selector", req: &jobplanev1.WatchJobsRequest{LabelSelector: "team in batch"},
			code: codes.InvalidArgument, fields: []string{"labelSelector"}},
		{name: "API server unreachable for the list", req: &jobplanev1.WatchJobsRequest{},
			setup: failing("list", apierrors.NewServiceUnavailable("starting")), code: codes.Unavailable, actions: []string{"list jobs"}},
		{name: "resource version too old for the watch", req: &jobplanev1.WatchJobsRequest{ResourceVersion: "3"},
			setup: func(f *fixture) {
				f.client.PrependWatchReactor("jobs", func(k8stesting.Action) (bool, watch.Interface, error) {
					return true, nil, apierrors.NewResourceExpired("too old resource version: 3 (90)")
				})
			},
			code: codes.OutOfRange, actions: []string{"watch jobs"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			if tc.setup != nil {
				tc.setup(f)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			stream, err := f.api.WatchJobs(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			_, err = stream.Recv()
			wantStatus(t, err, tc.code)
			equal(t, "field violations", fields(err), tc.fields)
			equal(t, "API actions", f.actions(), tc.actions)
		})
	}
}
