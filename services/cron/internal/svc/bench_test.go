package svc_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/grpcserver/grpctest"
	"github.com/jobplane/jobplane/lib/kubeconv"
	"github.com/jobplane/jobplane/services/cron/internal/decide"
	"github.com/jobplane/jobplane/services/cron/internal/svc"
)

// Shape of the benchmark's CronJob: every 5 minutes, 100 Jobs of the last
// 100 runs, the newest benchActive unfinished (and in status.active), the
// others finished, one in benchFailedEvery failed; one finished Job still in
// status.active. With the history limits (3 successful, 1 failed) the sync
// deletes 86 Jobs, records their events and the completion it saw, creates
// the run due now and writes the status.
const (
	benchJobs        = 100
	benchActive      = 10
	benchFailedEvery = 5
)

// benchInput is a CronJob with benchJobs Jobs, at 200 ms past a scheduled
// time.
func benchInput() decide.Input {
	now := time.Date(2026, 11, 22, 10, 0, 0, 200e6, time.UTC)
	scheduled := now.Truncate(5 * time.Minute)
	cj := &cronapi.CronJob{
		TypeMeta: metav1.TypeMeta{APIVersion: cronapi.APIVersion, Kind: cronapi.Kind},
		ObjectMeta: metav1.ObjectMeta{
			Name: "report", Namespace: "bench", UID: "cronjob-uid", ResourceVersion: "4242",
			CreationTimestamp: metav1.NewTime(scheduled.Add(-(benchJobs + 1) * 5 * time.Minute)),
			Labels:            map[string]string{"app": "report", "team": "data"},
		},
	}
	cj.Spec.Schedule = "*/5 * * * *"
	cj.Spec.TimeZone = ptr.To("Etc/UTC")
	cj.Spec.ConcurrencyPolicy = batchv1.AllowConcurrent
	cj.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](3)
	cj.Spec.FailedJobsHistoryLimit = ptr.To[int32](1)
	cj.Spec.JobTemplate = batchv1.JobTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "report"}},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](2),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "report"}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name: "main", Image: "registry.example/report:1.4.2",
						Command: []string{"/bin/report", "--since=5m", "--out=s3://reports/"},
						Env:     []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}, {Name: "REGION", Value: "eu-west-1"}},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi"),
						}},
					}},
				},
			},
		},
	}
	cj.Status.LastScheduleTime = ptr.To(metav1.NewTime(scheduled.Add(-5 * time.Minute)))
	jobs := make([]*batchv1.Job, 0, benchJobs)
	for i := range benchJobs {
		at := scheduled.Add(-time.Duration(benchJobs-i) * 5 * time.Minute)
		name := decide.JobName(cj.Name, at)
		job := &batchv1.Job{
			TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: cj.Namespace, UID: types.UID(fmt.Sprintf("job-uid-%03d", i)),
				ResourceVersion: fmt.Sprint(1000 + i), CreationTimestamp: metav1.NewTime(at.Add(300 * time.Millisecond)),
				Labels:      map[string]string{"app": "report"},
				Annotations: map[string]string{batchv1.CronJobScheduledTimestampAnnotation: at.Format(time.RFC3339)},
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: cronapi.APIVersion, Kind: cronapi.Kind, Name: cj.Name, UID: cj.UID,
					Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
				}},
			},
			Spec:   *cj.Spec.JobTemplate.Spec.DeepCopy(),
			Status: batchv1.JobStatus{StartTime: ptr.To(metav1.NewTime(at.Add(time.Second)))},
		}
		job.Spec.ManagedBy = ptr.To("jobplane.dev/executor")
		ref := corev1.ObjectReference{APIVersion: "batch/v1", Kind: "Job", Namespace: job.Namespace, Name: name, UID: job.UID}
		switch {
		case i >= benchJobs-benchActive:
			job.Status.Active = 1
			cj.Status.Active = append(cj.Status.Active, ref)
		case i%benchFailedEvery == 0:
			finish(job, batchv1.JobFailureTarget, batchv1.JobFailed, at.Add(2*time.Minute))
			job.Status.Failed = 3
		default:
			finish(job, batchv1.JobSuccessCriteriaMet, batchv1.JobComplete, at.Add(2*time.Minute))
			job.Status.CompletionTime = ptr.To(metav1.NewTime(at.Add(2 * time.Minute)))
			job.Status.Succeeded = 1
			if i == benchJobs-benchActive-1 {
				// Finished since the last sync: still listed as active.
				cj.Status.Active = append(cj.Status.Active, ref)
			}
		}
		jobs = append(jobs, job)
	}
	return decide.Input{CronJob: cj, Jobs: jobs, Now: now, Local: time.UTC}
}

func finish(job *batchv1.Job, interim, final batchv1.JobConditionType, at time.Time) {
	t := metav1.NewTime(at)
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: interim, Status: corev1.ConditionTrue, LastProbeTime: t, LastTransitionTime: t},
		{Type: final, Status: corev1.ConditionTrue, LastProbeTime: t, LastTransitionTime: t},
	}
}

// benchRequest is benchInput as a PlanCronJob request.
func benchRequest(b *testing.B, in decide.Input) *jobplanev1.PlanCronJobRequest {
	cj, err := kubeconv.CronJobFromKube(in.CronJob)
	if err != nil {
		b.Fatal(err)
	}
	req := &jobplanev1.PlanCronJobRequest{CronJob: cj, Now: timestamppb.New(in.Now)}
	for _, job := range in.Jobs {
		j, err := kubeconv.JobFromKube(job)
		if err != nil {
			b.Fatal(err)
		}
		req.Jobs = append(req.Jobs, j)
	}
	return req
}

// checkPlan fails unless the plan is the one benchInput is built for.
func checkPlan(b *testing.B, p *jobplanev1.CronJobPlan) {
	var creates, deletes int
	for _, a := range p.GetActions() {
		switch {
		case a.GetCreateJob() != nil:
			creates++
		case a.GetDeleteJob() != nil:
			deletes++
		}
	}
	finished := benchJobs - benchActive
	failed := (finished + benchFailedEvery - 1) / benchFailedEvery
	if wantDeletes := (finished - failed - 3) + (failed - 1); creates != 1 || deletes != wantDeletes || !p.GetUpdateStatus() {
		b.Fatalf("plan: %d creations, %d deletions (want 1 and %d), updateStatus %v: %s", creates, deletes, wantDeletes, p.GetUpdateStatus(), p.GetSummary())
	}
}

// BenchmarkPlanCronJob measures one PlanCronJob for a CronJob with 100 Jobs
// (10 active, 72 succeeded, 18 failed; history limits 3 and 1, so 86
// deletions, and a run due): the pure decision alone (decide.Sync on
// Kubernetes objects), the handler (the request's conversion, the decision
// and the plan's conversion back), and the RPC over loopback TCP through the
// chassis, one call at a time and from 2×GOMAXPROCS callers, with the Jobs
// as the controller has them and with their templates cut to what the
// decision reads (with -benchmem: allocations per plan).
func BenchmarkPlanCronJob(b *testing.B) {
	in := benchInput()
	req := benchRequest(b, in)
	service := svc.NewCronService(svc.Config{Local: time.UTC})
	resp, err := service.PlanCronJob(context.Background(), req)
	if err != nil {
		b.Fatal(err)
	}
	checkPlan(b, resp.GetPlan())
	reqSize, respSize := proto.Size(req), proto.Size(resp)

	b.Run("path=decide", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p := decide.Sync(in)
			if len(p.Actions) == 0 {
				b.Fatal("no actions")
			}
		}
	})
	b.Run("path=handler", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := service.PlanCronJob(context.Background(), req); err != nil {
				b.Fatal(err)
			}
		}
		reportSizes(b, reqSize, respSize)
	})
	srv := grpctest.StartTCP(b, func(s *grpcserver.Server) {
		s.RegisterService(&jobplanev1.CronService_ServiceDesc, service)
	})
	c := jobplanev1.NewCronServiceClient(srv.Conn)
	b.Run("path=grpc", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			resp, err := c.PlanCronJob(context.Background(), req)
			if err != nil {
				b.Fatal(err)
			}
			if len(resp.GetPlan().GetActions()) == 0 {
				b.Fatal("no actions")
			}
		}
		reportSizes(b, reqSize, respSize)
	})
	// The decision reads only restartPolicy from the Jobs' templates (the
	// service decodes them with kubeconv.RestartPolicyOnly), but the whole
	// google.protobuf.Struct is decoded first: the same request with each
	// Job's template spec reduced to its restartPolicy.
	slim := proto.Clone(req).(*jobplanev1.PlanCronJobRequest)
	for _, j := range slim.GetJobs() {
		j.Spec.Template.Spec = &structpb.Struct{Fields: map[string]*structpb.Value{"restartPolicy": structpb.NewStringValue("Never")}}
	}
	b.Run("path=grpc/jobs=restartPolicy-only", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			resp, err := c.PlanCronJob(context.Background(), slim)
			if err != nil {
				b.Fatal(err)
			}
			checkPlan(b, resp.GetPlan())
		}
		reportSizes(b, proto.Size(slim), respSize)
	})
	b.Run("path=grpc/mode=parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := c.PlanCronJob(context.Background(), req); err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportSizes(b, reqSize, respSize)
	})
}

func reportSizes(b *testing.B, req, resp int) {
	b.ReportMetric(float64(req), "req-bytes")
	b.ReportMetric(float64(resp), "resp-bytes")
}
