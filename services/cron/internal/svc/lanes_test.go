package svc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/lib/fairlimit"
	"github.com/jobplane/jobplane/lib/fairlimit/fairlimittest"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/grpcserver/grpctest"
	"github.com/jobplane/jobplane/services/cron/internal/svc"
)

// The API requests callers' RPCs cause wait in their CronJob's lane of the
// fair API budget (the lane its syncs use) or their namespace's, never in the
// lane of unkeyed requests (the informers'), which one caller's flood would
// otherwise fill ahead of every other tenant's syncs.
func TestCallersRequestsWaitInTheirCronJobsLanes(t *testing.T) {
	stored := kubeCronJob("team-a", "c1")
	stored.ResourceVersion, stored.UID = "3", "u1"
	u, err := cronapi.ToUnstructured(stored)
	if err != nil {
		t.Fatal(err)
	}
	cronJob, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Query().Get("watch") == "true":
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/jobs"):
			fmt.Fprint(w, `{"kind":"JobList","apiVersion":"batch/v1","metadata":{"resourceVersion":"5"},"items":[]}`)
		case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/cronjobs"):
			fmt.Fprintf(w, `{"kind":"CronJobList","apiVersion":%q,"metadata":{"resourceVersion":"5"},"items":[]}`, cronapi.APIVersion)
		case r.Method == http.MethodDelete:
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Success"}`)
		default:
			w.Write(cronJob)
		}
	}))
	defer api.Close()
	lanes := &fairlimittest.LaneRecorder{}
	cfg := &rest.Config{Host: api.URL, RateLimiter: lanes}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpctest.Start(t, func(s *grpcserver.Server) {
		s.RegisterService(&jobplanev1.CronService_ServiceDesc, svc.NewCronService(svc.Config{
			CronJobs: dyn.Resource(cronapi.GroupVersionResource), Kube: kube,
		}))
	})
	c := jobplanev1.NewCronServiceClient(srv.Conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	calls := []func() error{
		func() error {
			_, err := c.CreateCronJob(ctx, &jobplanev1.CreateCronJobRequest{CronJob: validCronJob("team-a", "c1")})
			return err
		},
		func() error {
			_, err := c.GetCronJob(ctx, &jobplanev1.GetCronJobRequest{Namespace: "team-a", Name: "c1"})
			return err
		},
		func() error {
			_, err := c.UpdateCronJob(ctx, &jobplanev1.UpdateCronJobRequest{CronJob: validCronJob("team-a", "c1")})
			return err
		},
		func() error {
			_, err := c.DeleteCronJob(ctx, &jobplanev1.DeleteCronJobRequest{Namespace: "team-a", Name: "c1"})
			return err
		},
		func() error {
			_, err := c.ListCronJobs(ctx, &jobplanev1.ListCronJobsRequest{Namespace: "team-a"})
			return err
		},
		func() error {
			_, err := c.ListCronJobs(ctx, &jobplanev1.ListCronJobsRequest{})
			return err
		},
	}
	for i, call := range calls {
		if err := call(); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if _, err := c.WatchJobInstances(ctx, &jobplanev1.WatchJobInstancesRequest{Namespace: "team-b"}); err != nil {
		t.Fatal(err)
	}
	for len(lanes.Seen()) < 8 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	got := lanes.Seen()
	slices.Sort(got)
	want := []string{fairlimit.NamespaceLane(""), "team-a/", "team-a/c1", "team-a/c1", "team-a/c1", "team-a/c1", "team-a/c1", "team-b/"}
	if !slices.Equal(got, want) {
		t.Errorf("lanes %q, want %q (create, get, update's get and put, delete; each scope's list; the watch's first page: client-go limits no watch)", got, want)
	}
}
