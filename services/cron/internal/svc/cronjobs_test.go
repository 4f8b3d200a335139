package svc_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/grpcserver/grpctest"
	"github.com/jobplane/jobplane/lib/kubeconv"
	"github.com/jobplane/jobplane/services/cron/internal/svc"
)

// kubeCronJob is a CronJob the API server accepts, as the Go type.
func kubeCronJob(namespace, name string) *cronapi.CronJob {
	return &cronapi.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"team": namespace}},
		Spec: cronapi.CronJobSpec{CronJobSpec: batchv1.CronJobSpec{
			Schedule: "0 3 * * *",
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "main", Image: "busybox", Command: []string{"true"}}},
			}}}},
		}},
	}
}

// validCronJob is kubeCronJob as a request carries it.
func validCronJob(namespace, name string) *jobplanev1.CronJob {
	out, err := kubeconv.CronJobFromKube(kubeCronJob(namespace, name))
	if err != nil {
		panic(err)
	}
	return out
}

// store is the cron service on a fake API server holding CronJobs.
type store struct {
	fake   *dynamicfake.FakeDynamicClient
	client jobplanev1.CronServiceClient
}

func newStore(t *testing.T, existing ...*cronapi.CronJob) *store {
	t.Helper()
	var objects []runtime.Object
	for _, c := range existing {
		c = c.DeepCopy()
		if c.ResourceVersion == "" {
			c.ResourceVersion = "1" // the fake API server sets none
		}
		u, err := cronapi.ToUnstructured(c)
		if err != nil {
			t.Fatal(err)
		}
		objects = append(objects, u)
	}
	fake := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{cronapi.GroupVersionResource: "CronJobList"}, objects...)
	srv := grpctest.Start(t, func(s *grpcserver.Server) {
		s.RegisterService(&jobplanev1.CronService_ServiceDesc, svc.NewCronService(svc.Config{CronJobs: fake.Resource(cronapi.GroupVersionResource)}))
	})
	return &store{fake: fake, client: jobplanev1.NewCronServiceClient(srv.Conn)}
}

// stored reads a CronJob from the fake API server.
func (s *store) stored(t *testing.T, namespace, name string) *cronapi.CronJob {
	t.Helper()
	u, err := s.fake.Resource(cronapi.GroupVersionResource).Namespace(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cronapi.FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// verbsCalled lists the verbs of the requests made to the fake.
func (s *store) verbsCalled() []string {
	var out []string
	for _, a := range s.fake.Actions() {
		out = append(out, a.GetVerb())
	}
	return out
}

// violatedFields returns the distinct fields of err's violations, sorted.
func violatedFields(err error) []string {
	var out []string
	for _, v := range apierr.FieldViolations(err) {
		if !slices.Contains(out, v.Field) {
			out = append(out, v.Field)
		}
	}
	return out
}

func assertInvalid(t *testing.T, err error, fields ...string) {
	t.Helper()
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("got %v, want InvalidArgument", err)
	}
	if got := violatedFields(err); !slices.Equal(got, fields) {
		t.Errorf("violated fields %v, want %v (%v)", got, fields, err)
	}
}

func TestCreateCronJobStoresItWithTheAPIServersDefaults(t *testing.T) {
	s := newStore(t)
	req := validCronJob("team-a", "nightly")
	req.Status = &jobplanev1.CronJobStatus{ObservedSchedule: "forged"}
	resp, err := s.client.CreateCronJob(context.Background(), &jobplanev1.CreateCronJobRequest{CronJob: req})
	if err != nil {
		t.Fatal(err)
	}
	spec := resp.GetCronJob().GetSpec()
	if spec.GetConcurrencyPolicy() != "Allow" || spec.Suspend == nil || spec.GetSuspend() ||
		spec.GetSuccessfulJobsHistoryLimit() != 3 || spec.GetFailedJobsHistoryLimit() != 1 {
		t.Errorf("answered spec without defaults: %v", spec)
	}
	if resp.GetCronJob().GetApiVersion() != cronapi.APIVersion || resp.GetCronJob().GetKind() != cronapi.Kind {
		t.Errorf("answered %s %s", resp.GetCronJob().GetApiVersion(), resp.GetCronJob().GetKind())
	}
	stored := s.stored(t, "team-a", "nightly")
	if stored.Spec.ConcurrencyPolicy != batchv1.AllowConcurrent || !ptr.Equal(stored.Spec.SuccessfulJobsHistoryLimit, ptr.To[int32](3)) {
		t.Errorf("stored spec without defaults: %+v", stored.Spec)
	}
	if stored.Status.ObservedSchedule != "" {
		t.Errorf("the caller wrote the status: %+v", stored.Status)
	}
	if stored.Labels["team"] != "team-a" || stored.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image != "busybox" {
		t.Errorf("stored %+v", stored)
	}
}

func TestCreateCronJobRefusesWhatTheAPIServerWouldWithItsPaths(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*jobplanev1.CronJob)
		fields []string
	}{
		{"no namespace, no name", func(c *jobplanev1.CronJob) { c.Metadata.Namespace, c.Metadata.Name = "", "" },
			[]string{"metadata.name", "metadata.namespace"}},
		{"name longer than 52", func(c *jobplanev1.CronJob) { c.Metadata.Name = strings.Repeat("n", 53) }, []string{"metadata.name"}},
		{"unparseable schedule", func(c *jobplanev1.CronJob) { c.Spec.Schedule = "at noon" }, []string{"spec.schedule"}},
		{"TZ in schedule", func(c *jobplanev1.CronJob) { c.Spec.Schedule = "TZ=UTC 0 3 * * *" }, []string{"spec.schedule"}},
		{"unknown zone", func(c *jobplanev1.CronJob) { c.Spec.TimeZone = ptr.To("Mars/Olympus") }, []string{"spec.timeZone"}},
		{"negative deadline", func(c *jobplanev1.CronJob) { c.Spec.StartingDeadlineSeconds = ptr.To[int64](-1) }, []string{"spec.startingDeadlineSeconds"}},
		{"unknown concurrency policy", func(c *jobplanev1.CronJob) { c.Spec.ConcurrencyPolicy = "Never" }, []string{"spec.concurrencyPolicy"}},
		{"negative history", func(c *jobplanev1.CronJob) { c.Spec.FailedJobsHistoryLimit = ptr.To[int32](-1) }, []string{"spec.failedJobsHistoryLimit"}},
		{"template restart policy Always", func(c *jobplanev1.CronJob) {
			c.Spec.JobTemplate.Spec.Template.Spec.Fields["restartPolicy"] = structpb.NewStringValue("Always")
		}, []string{"spec.jobTemplate.spec.template.spec.restartPolicy"}},
		{"template selector", func(c *jobplanev1.CronJob) {
			c.Spec.JobTemplate.Spec.Selector = &jobplanev1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
		}, []string{"spec.jobTemplate.spec.selector"}},
		{"template pod spec not a pod spec", func(c *jobplanev1.CronJob) {
			c.Spec.JobTemplate.Spec.Template.Spec.Fields["containers"] = structpb.NewStringValue("main")
		}, []string{"spec.jobTemplate.spec.template.spec"}},
		{"bad extensions", func(c *jobplanev1.CronJob) {
			c.Spec.CatchUp = &jobplanev1.CatchUpPolicy{Policy: "Most", MaxRuns: ptr.To[int32](5000)}
			c.Spec.JitterSeconds = ptr.To[int32](-1)
			c.Spec.DaylightSaving = &jobplanev1.DaylightSavingPolicy{SkippedHour: "Later"}
		}, []string{"spec.catchUp.maxRuns", "spec.catchUp.policy", "spec.daylightSaving.skippedHour", "spec.jitterSeconds"}},
		{"resourceVersion", func(c *jobplanev1.CronJob) { c.Metadata.ResourceVersion = "12" }, []string{"metadata.resourceVersion"}},
		// Created as the cron service, which may update CronJobs'
		// finalizers: the API server would check it, not the caller.
		{"an owner whose deletion it blocks", func(c *jobplanev1.CronJob) {
			c.Metadata.OwnerReferences = []*jobplanev1.OwnerReference{{ApiVersion: "jobplane.dev/v1", Kind: "CronJob", Name: "victim", Uid: "uid-victim", BlockOwnerDeletion: ptr.To(true)}}
		}, []string{"metadata.ownerReferences[0].blockOwnerDeletion"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			c := validCronJob("team-a", "nightly")
			tc.mutate(c)
			_, err := s.client.CreateCronJob(context.Background(), &jobplanev1.CreateCronJobRequest{CronJob: c})
			assertInvalid(t, err, tc.fields...)
			if verbs := s.verbsCalled(); len(verbs) > 0 {
				t.Errorf("an invalid CronJob reached the API server: %v", verbs)
			}
		})
	}
}

func TestCreateCronJobThatExistsIsAlreadyExists(t *testing.T) {
	s := newStore(t, kubeCronJob("team-a", "nightly"))
	_, err := s.client.CreateCronJob(context.Background(), &jobplanev1.CreateCronJobRequest{CronJob: validCronJob("team-a", "nightly")})
	if status.Code(err) != codes.AlreadyExists {
		t.Fatalf("got %v, want AlreadyExists", err)
	}
}

func TestCreateCronJobAnswersTheAPIServersCausesAsViolations(t *testing.T) {
	s := newStore(t)
	s.fake.PrependReactor("create", "cronjobs", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInvalid(cronapi.GroupVersionKind.GroupKind(), "nightly", field.ErrorList{
			field.Invalid(field.NewPath("spec", "schedule"), "x", "refused by a webhook"),
			field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid"),
		})
	})
	_, err := s.client.CreateCronJob(context.Background(), &jobplanev1.CreateCronJobRequest{CronJob: validCronJob("team-a", "nightly")})
	assertInvalid(t, err, "spec.schedule")
	if v := apierr.FieldViolations(err); len(v) != 1 || !strings.Contains(v[0].Description, "refused by a webhook") {
		t.Errorf("violations %v", v)
	}
}

func TestGetCronJob(t *testing.T) {
	stored := kubeCronJob("team-a", "nightly")
	stored.Status.ObservedSchedule = " 0 3 * * *"
	s := newStore(t, stored)
	resp, err := s.client.GetCronJob(context.Background(), &jobplanev1.GetCronJobRequest{Namespace: "team-a", Name: "nightly"})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetCronJob(); got.GetMetadata().GetName() != "nightly" || got.GetSpec().GetSchedule() != "0 3 * * *" || got.GetStatus().GetObservedSchedule() != " 0 3 * * *" {
		t.Errorf("got %v", got)
	}

	_, err = s.client.GetCronJob(context.Background(), &jobplanev1.GetCronJobRequest{Namespace: "team-a", Name: "hourly"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("missing CronJob: got %v, want NotFound", err)
	}
	_, err = s.client.GetCronJob(context.Background(), &jobplanev1.GetCronJobRequest{})
	assertInvalid(t, err, "name", "namespace")
}

func TestListCronJobsByNamespaceAndLabels(t *testing.T) {
	other := kubeCronJob("team-b", "a-first")
	other.Labels["tier"] = "gold"
	s := newStore(t, kubeCronJob("team-a", "zeta"), kubeCronJob("team-a", "alpha"), other)
	names := func(req *jobplanev1.ListCronJobsRequest) []string {
		t.Helper()
		resp, err := s.client.ListCronJobs(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range resp.GetCronJobs() {
			out = append(out, c.GetMetadata().GetNamespace()+"/"+c.GetMetadata().GetName())
		}
		return out
	}
	if got, want := names(&jobplanev1.ListCronJobsRequest{}), []string{"team-a/alpha", "team-a/zeta", "team-b/a-first"}; !slices.Equal(got, want) {
		t.Errorf("every namespace: %v, want %v", got, want)
	}
	if got, want := names(&jobplanev1.ListCronJobsRequest{Namespace: "team-a"}), []string{"team-a/alpha", "team-a/zeta"}; !slices.Equal(got, want) {
		t.Errorf("team-a: %v, want %v", got, want)
	}
	if got, want := names(&jobplanev1.ListCronJobsRequest{LabelSelector: "tier=gold"}), []string{"team-b/a-first"}; !slices.Equal(got, want) {
		t.Errorf("tier=gold: %v, want %v", got, want)
	}
}

func TestListCronJobsPagesWithTheAPIServersContinueToken(t *testing.T) {
	s := newStore(t)
	var asked metav1.ListOptions
	s.fake.PrependReactor("list", "cronjobs", func(a clienttesting.Action) (bool, runtime.Object, error) {
		asked = a.(clienttesting.ListActionImpl).ListOptions
		if asked.Continue == "garbage" {
			return true, nil, apierrors.NewBadRequest("continue key is not valid")
		}
		if asked.Continue == "expired" {
			return true, nil, apierrors.NewResourceExpired("the provided continue parameter is too old")
		}
		list := &unstructured.UnstructuredList{}
		list.SetContinue("next-page")
		return true, list, nil
	})
	ctx := context.Background()
	// In a namespace: the fake drops the options of lists in every namespace.
	resp, err := s.client.ListCronJobs(ctx, &jobplanev1.ListCronJobsRequest{Namespace: "team-a", PageToken: "this-page"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetNextPageToken() != "next-page" || asked.Continue != "this-page" || asked.Limit != 100 {
		t.Errorf("next page %q after asking %+v", resp.GetNextPageToken(), asked)
	}
	if _, err := s.client.ListCronJobs(ctx, &jobplanev1.ListCronJobsRequest{Namespace: "team-a", PageSize: 1000}); err != nil || asked.Limit != 1000 {
		t.Errorf("page size 1000: %v, asked %+v", err, asked)
	}
	for _, token := range []string{"garbage", "expired"} {
		_, err := s.client.ListCronJobs(ctx, &jobplanev1.ListCronJobsRequest{Namespace: "team-a", PageToken: token})
		assertInvalid(t, err, "pageToken")
	}
	_, err = s.client.ListCronJobs(ctx, &jobplanev1.ListCronJobsRequest{LabelSelector: "a in (", PageSize: 1001})
	assertInvalid(t, err, "labelSelector", "pageSize")
	_, err = s.client.ListCronJobs(ctx, &jobplanev1.ListCronJobsRequest{PageSize: -1})
	assertInvalid(t, err, "pageSize")
}

func TestUpdateCronJobReplacesSpecAndLabelsAndKeepsStatus(t *testing.T) {
	stored := kubeCronJob("team-a", "nightly")
	stored.Annotations = map[string]string{"old": "yes"}
	stored.Finalizers = []string{"jobplane.dev/keep"}
	stored.Status.LastScheduleTime = &metav1.Time{Time: time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)}
	s := newStore(t, stored)

	c := validCronJob("team-a", "nightly")
	c.Spec.Schedule = "@hourly"
	c.Spec.ConcurrencyPolicy = "" // defaulted again
	c.Metadata.Labels = map[string]string{"tier": "gold"}
	c.Metadata.Finalizers = nil
	c.Status = &jobplanev1.CronJobStatus{}
	resp, err := s.client.UpdateCronJob(context.Background(), &jobplanev1.UpdateCronJobRequest{CronJob: c})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetCronJob().GetSpec().GetSchedule() != "@hourly" {
		t.Errorf("answered %v", resp.GetCronJob())
	}
	got := s.stored(t, "team-a", "nightly")
	if got.Spec.Schedule != "@hourly" || got.Spec.ConcurrencyPolicy != batchv1.AllowConcurrent {
		t.Errorf("stored spec %+v", got.Spec)
	}
	if got.Labels["tier"] != "gold" || got.Labels["team"] != "" || got.Annotations != nil {
		t.Errorf("labels %v, annotations %v: want the request's", got.Labels, got.Annotations)
	}
	if !slices.Equal(got.Finalizers, []string{"jobplane.dev/keep"}) || got.Status.LastScheduleTime == nil {
		t.Errorf("finalizers %v, status %+v: want the stored ones", got.Finalizers, got.Status)
	}
}

func TestUpdateCronJobValidatesAsAnUpdate(t *testing.T) {
	withTZ := kubeCronJob("team-a", "legacy")
	withTZ.Spec.Schedule = "TZ=UTC 0 3 * * *"
	s := newStore(t, withTZ)
	ctx := context.Background()

	c := validCronJob("team-a", "legacy")
	c.Spec.Schedule = "TZ=UTC 0 4 * * *"
	if _, err := s.client.UpdateCronJob(ctx, &jobplanev1.UpdateCronJobRequest{CronJob: c}); err != nil {
		t.Errorf("TZ kept from the stored schedule: %v", err)
	}
	c.Spec.TimeZone = ptr.To("UTC")
	_, err := s.client.UpdateCronJob(ctx, &jobplanev1.UpdateCronJobRequest{CronJob: c})
	assertInvalid(t, err, "spec.schedule")

	c = validCronJob("team-a", "legacy")
	c.Spec.JobTemplate.Spec.Template.Spec.Fields["restartPolicy"] = structpb.NewStringValue("Always")
	_, err = s.client.UpdateCronJob(ctx, &jobplanev1.UpdateCronJobRequest{CronJob: c})
	assertInvalid(t, err, "spec.jobTemplate.spec.template.spec.restartPolicy")

	_, err = s.client.UpdateCronJob(ctx, &jobplanev1.UpdateCronJobRequest{CronJob: &jobplanev1.CronJob{}})
	assertInvalid(t, err, "metadata.name", "metadata.namespace")

	_, err = s.client.UpdateCronJob(ctx, &jobplanev1.UpdateCronJobRequest{CronJob: validCronJob("team-a", "missing")})
	if status.Code(err) != codes.NotFound {
		t.Errorf("missing CronJob: got %v, want NotFound", err)
	}
}

func TestUpdateCronJobConflicts(t *testing.T) {
	s := newStore(t, kubeCronJob("team-a", "nightly"))
	conflicts := 0
	s.fake.PrependReactor("update", "cronjobs", func(clienttesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(cronapi.GroupVersionResource.GroupResource(), "nightly", nil)
		}
		return false, nil, nil
	})
	ctx := context.Background()

	conflicts = 1
	c := validCronJob("team-a", "nightly")
	c.Metadata.ResourceVersion = "41"
	_, err := s.client.UpdateCronJob(ctx, &jobplanev1.UpdateCronJobRequest{CronJob: c})
	if status.Code(err) != codes.Aborted {
		t.Errorf("stale resourceVersion: got %v, want Aborted", err)
	}

	conflicts = 2
	c.Metadata.ResourceVersion = ""
	if _, err := s.client.UpdateCronJob(ctx, &jobplanev1.UpdateCronJobRequest{CronJob: c}); err != nil {
		t.Errorf("without a resourceVersion a race is retried: %v", err)
	}
	if conflicts != 0 {
		t.Errorf("%d conflicts left", conflicts)
	}
}

func TestDeleteCronJobPropagation(t *testing.T) {
	s := newStore(t, kubeCronJob("team-a", "a"), kubeCronJob("team-a", "b"), kubeCronJob("team-a", "c"), kubeCronJob("team-a", "d"))
	var policies []metav1.DeletionPropagation
	s.fake.PrependReactor("delete", "cronjobs", func(a clienttesting.Action) (bool, runtime.Object, error) {
		policies = append(policies, ptr.Deref(a.(clienttesting.DeleteActionImpl).DeleteOptions.PropagationPolicy, "unset"))
		return false, nil, nil
	})
	ctx := context.Background()
	for name, policy := range map[string]string{"a": "", "b": "Background", "c": "Foreground", "d": "Orphan"} {
		if _, err := s.client.DeleteCronJob(ctx, &jobplanev1.DeleteCronJobRequest{Namespace: "team-a", Name: name, PropagationPolicy: policy}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	slices.Sort(policies)
	if want := []metav1.DeletionPropagation{"Background", "Background", "Foreground", "Orphan"}; !slices.Equal(policies, want) {
		t.Errorf("policies %v, want %v", policies, want)
	}
	list, err := s.fake.Resource(cronapi.GroupVersionResource).Namespace("team-a").List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 0 {
		t.Errorf("left %v (%v)", list, err)
	}

	_, err = s.client.DeleteCronJob(ctx, &jobplanev1.DeleteCronJobRequest{Namespace: "team-a", Name: "a"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("deleted twice: got %v, want NotFound", err)
	}
	_, err = s.client.DeleteCronJob(ctx, &jobplanev1.DeleteCronJobRequest{Namespace: "team-a", PropagationPolicy: "Eventually"})
	assertInvalid(t, err, "name", "propagationPolicy")
}
