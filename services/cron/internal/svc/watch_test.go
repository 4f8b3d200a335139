package svc_test

import (
	"context"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/grpcserver/grpctest"
	"github.com/jobplane/jobplane/services/cron/internal/svc"
)

func emitted(name, cronJob, trigger string, scheduled time.Time) *batchv1.Job {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: "ns", ResourceVersion: "7",
		Annotations: map[string]string{batchv1.CronJobScheduledTimestampAnnotation: scheduled.Format(time.RFC3339)},
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: cronapi.APIVersion, Kind: cronapi.Kind, Name: cronJob, UID: "uid-" + metav1.NamespaceDefault, Controller: ptr.To(true),
		}},
	}}
	if trigger != "" {
		job.Annotations[cronapi.TriggerAnnotation] = trigger
	}
	return job
}

// WatchJobInstances relays the Jobs CronJobs emit, with their trigger and
// scheduled time, and nothing else.
func TestWatchJobInstancesRelaysEmittedJobs(t *testing.T) {
	kube := fake.NewClientset()
	watching := make(chan struct{})
	var once sync.Once
	kube.PrependWatchReactor("jobs", func(k8stesting.Action) (bool, watch.Interface, error) {
		once.Do(func() { close(watching) })
		return false, nil, nil // the tracker's own watch follows
	})
	srv := grpctest.Start(t, func(s *grpcserver.Server) {
		s.RegisterService(&jobplanev1.CronService_ServiceDesc, svc.NewCronService(svc.Config{Kube: kube}))
	})
	c := jobplanev1.NewCronServiceClient(srv.Conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := c.WatchJobInstances(ctx, &jobplanev1.WatchJobInstancesRequest{Namespace: "ns", CronJobName: "nightly"})
	if err != nil {
		t.Fatal(err)
	}
	scheduled := time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC)
	plain := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "ns"}}
	yearZero := emitted("nightly-0", "nightly", "", scheduled)
	yearZero.Annotations[batchv1.CronJobScheduledTimestampAnnotation] = "0000-06-01T00:00:00Z" // anyone creating Jobs writes it
	jobs := []*batchv1.Job{
		plain,
		emitted("other-1", "other", "", scheduled),
		emitted("nightly-1", "nightly", "", scheduled),
		emitted("nightly-m1", "nightly", cronapi.TriggerManual, scheduled.Add(time.Hour)),
		yearZero,
	}
	go func() {
		<-watching
		time.Sleep(100 * time.Millisecond) // the reactor runs just before the tracker's watch is registered
		for _, j := range jobs {
			if _, err := kube.BatchV1().Jobs("ns").Create(ctx, j, metav1.CreateOptions{}); err != nil {
				t.Error(err)
			}
		}
	}()
	want := []struct{ name, trigger string }{{"nightly-1", cronapi.TriggerSchedule}, {"nightly-m1", cronapi.TriggerManual}, {"nightly-0", cronapi.TriggerSchedule}}
	for _, w := range want {
		got, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if got.GetJob().GetMetadata().GetName() != w.name || got.GetTrigger() != w.trigger || got.GetCronJob().GetName() != "nightly" {
			t.Errorf("got %s (%s, %s), want %s (%s)", got.GetJob().GetMetadata().GetName(), got.GetTrigger(), got.GetCronJob().GetName(), w.name, w.trigger)
		}
		if uid := got.GetCronJob().GetUid(); uid != "uid-"+metav1.NamespaceDefault {
			t.Errorf("cron_job.uid %q, want the controller reference's", uid) // what a client compares with the CronJob's
		}
		if got.GetScheduledTime().CheckValid() != nil || got.GetResourceVersion() == "" {
			t.Errorf("instance without a valid scheduled time or a resource version: %v", got)
		}
	}
}

func TestWatchJobInstancesNeedsTheNamespaceOfANamedCronJob(t *testing.T) {
	stream, err := client(t).WatchJobInstances(context.Background(), &jobplanev1.WatchJobInstancesRequest{CronJobName: "nightly"})
	if err == nil {
		_, err = stream.Recv()
	}
	if v := apierrFields(err); len(v) != 1 || v[0] != "namespace" {
		t.Errorf("error %v, want a violation of namespace", err)
	}
}
