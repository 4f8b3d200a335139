package svc_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	batchv1listers "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/fairlimit"
	"github.com/jobplane/jobplane/lib/fairlimit/fairlimittest"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/grpcserver/grpctest"
	"github.com/jobplane/jobplane/services/executor/internal/svc"
)

// The API requests callers' RPCs cause wait in their Job's or namespace's
// lane of the fair limiter, never in the lane of unkeyed requests (the
// informers'), which one caller's flood of deletions or reopened watches
// would otherwise fill.
func TestCallersRequestsWaitInTheirNamespacesLanes(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Query().Get("watch") == "true":
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/jobs"):
			fmt.Fprint(w, `{"kind":"JobList","apiVersion":"batch/v1","metadata":{"resourceVersion":"5"},"items":[]}`)
		case r.Method == http.MethodGet:
			fmt.Fprintf(w, `{"kind":"Job","apiVersion":"batch/v1","metadata":{"name":"j","namespace":"team-a","uid":"u1","resourceVersion":"3"},"spec":{"managedBy":%q}}`, managedBy)
		default:
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Success"}`)
		}
	}))
	defer api.Close()
	lanes := &fairlimittest.LaneRecorder{}
	client, err := kubernetes.NewForConfig(&rest.Config{Host: api.URL, RateLimiter: lanes})
	if err != nil {
		t.Fatal(err)
	}
	srv := grpctest.Start(t, func(s *grpcserver.Server) {
		s.RegisterService(&jobplanev1.ExecutorService_ServiceDesc, svc.NewExecutorService(svc.Config{
			Client: client, Jobs: batchv1listers.NewJobLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
			PodsOf:    func(*batchv1.Job) ([]*corev1.Pod, error) { return nil, nil },
			Runner:    &fakeRunner{leader: true},
			ManagedBy: managedBy, Log: slog.New(slog.DiscardHandler),
		}))
	})
	executor := jobplanev1.NewExecutorServiceClient(srv.Conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := executor.DeleteJob(ctx, &jobplanev1.DeleteJobRequest{Namespace: "team-a", Name: "j"}); err != nil {
		t.Fatal(err)
	}
	for _, namespace := range []string{"team-a", ""} {
		if _, err := executor.WatchJobs(ctx, &jobplanev1.WatchJobsRequest{Namespace: namespace}); err != nil {
			t.Fatal(err)
		}
	}
	for len(lanes.Seen()) < 4 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	got := lanes.Seen()
	slices.Sort(got)
	want := []string{fairlimit.NamespaceLane(""), "team-a/", "team-a/j", "team-a/j"}
	if !slices.Equal(got, want) {
		t.Errorf("lanes %q, want %q (a Get and a Delete, then each scope's list: client-go limits no watch)", got, want)
	}
}
