package integration

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/lib/kubeconv"
)

// cronJob is a CronJob both the CRD and the RPCs accept, without defaults.
func cronJob(name string) *cronapi.CronJob {
	return &cronapi.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"app": "reports"}},
		Spec: cronapi.CronJobSpec{CronJobSpec: batchv1.CronJobSpec{
			Schedule: "0 3 * * *",
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "reports"}},
				Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyOnFailure,
					Containers:    []corev1.Container{{Name: "main", Image: "busybox", Command: []string{"date"}}},
				}}},
			},
		}},
	}
}

func TestCRDIsServedWithItsNamesAndColumns(t *testing.T) {
	e := start(t)
	if _, err := e.createByRPC(t, cronJob("nightly")); err != nil {
		t.Fatal(err)
	}
	out, err := e.kubectl(t, "", "get", "jcj", "-n", namespace)
	if err != nil {
		t.Fatalf("kubectl get jcj: %v\n%s", err, out)
	}
	header := strings.Fields(strings.SplitN(out, "\n", 2)[0])
	if want := []string{"NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST", "SCHEDULE", "NEXT", "SCHEDULE", "AGE"}; !slices.Equal(header, want) {
		t.Errorf("columns %v, want %v", header, want)
	}
	if !strings.Contains(out, "nightly") || !strings.Contains(out, "0 3 * * *") || !strings.Contains(out, "false") {
		t.Errorf("kubectl get jcj:\n%s", out)
	}
	// "cj" stays batch's.
	if out, err := e.kubectl(t, "", "api-resources", "--api-group", cronapi.Group, "-o", "wide"); err != nil || !strings.Contains(out, "jcj") || !strings.Contains(out, "CronJob") {
		t.Errorf("api-resources: %v\n%s", err, out)
	}
}

// invalidCase is a CronJob refused by a rule.
type invalidCase struct {
	name   string
	mutate func(*cronapi.CronJob)
	fields []string
}

// The API server's rules that the CRD's schema expresses: the API server
// and CreateCronJob refuse these at the same paths.
var schemaRules = []invalidCase{
	{"name longer than 52", func(c *cronapi.CronJob) { c.Name = strings.Repeat("n", 53) }, []string{"metadata.name"}},
	{"name not a DNS subdomain", func(c *cronapi.CronJob) { c.Name = "Nightly_Report" }, []string{"metadata.name"}},
	{"empty schedule", func(c *cronapi.CronJob) { c.Spec.Schedule = "" }, []string{"spec.schedule"}},
	{"TZ in schedule", func(c *cronapi.CronJob) { c.Spec.Schedule = "TZ=UTC 0 3 * * *" }, []string{"spec.schedule"}},
	{"CRON_TZ in schedule", func(c *cronapi.CronJob) { c.Spec.Schedule = "CRON_TZ=Europe/Paris 0 3 * * *" }, []string{"spec.schedule"}},
	{"empty time zone", func(c *cronapi.CronJob) { c.Spec.TimeZone = ptr.To("") }, []string{"spec.timeZone"}},
	{"time zone with ..", func(c *cronapi.CronJob) { c.Spec.TimeZone = ptr.To("../etc/passwd") }, []string{"spec.timeZone"}},
	{"time zone with a space", func(c *cronapi.CronJob) { c.Spec.TimeZone = ptr.To("Europe/Par is") }, []string{"spec.timeZone"}},
	{"time zone component too long", func(c *cronapi.CronJob) { c.Spec.TimeZone = ptr.To("America/Argentina_Buenos_Aires") }, []string{"spec.timeZone"}},
	{"time zone starting with -", func(c *cronapi.CronJob) { c.Spec.TimeZone = ptr.To("-UTC") }, []string{"spec.timeZone"}},
	{"Local time zone", func(c *cronapi.CronJob) { c.Spec.TimeZone = ptr.To("Local") }, []string{"spec.timeZone"}},
	{"negative starting deadline", func(c *cronapi.CronJob) { c.Spec.StartingDeadlineSeconds = ptr.To[int64](-10) }, []string{"spec.startingDeadlineSeconds"}},
	{"unknown concurrency policy", func(c *cronapi.CronJob) { c.Spec.ConcurrencyPolicy = "Sometimes" }, []string{"spec.concurrencyPolicy"}},
	{"negative history limits", func(c *cronapi.CronJob) {
		c.Spec.SuccessfulJobsHistoryLimit, c.Spec.FailedJobsHistoryLimit = ptr.To[int32](-1), ptr.To[int32](-1)
	}, []string{"spec.failedJobsHistoryLimit", "spec.successfulJobsHistoryLimit"}},
	{"bad catch-up", func(c *cronapi.CronJob) {
		c.Spec.CatchUp = &cronapi.CatchUpPolicy{Policy: "Most", WindowSeconds: ptr.To[int64](-1), MaxRuns: ptr.To[int32](1001)}
	}, []string{"spec.catchUp.maxRuns", "spec.catchUp.policy", "spec.catchUp.windowSeconds"}},
	{"no catch-up runs", func(c *cronapi.CronJob) { c.Spec.CatchUp = &cronapi.CatchUpPolicy{MaxRuns: ptr.To[int32](0)} }, []string{"spec.catchUp.maxRuns"}},
	{"negative jitter", func(c *cronapi.CronJob) { c.Spec.JitterSeconds = ptr.To[int32](-1) }, []string{"spec.jitterSeconds"}},
	{"bad daylight saving", func(c *cronapi.CronJob) {
		c.Spec.DaylightSaving = &cronapi.DaylightSavingPolicy{SkippedHour: "Later", RepeatedHour: "Thrice"}
	}, []string{"spec.daylightSaving.repeatedHour", "spec.daylightSaving.skippedHour"}},
	// Several CEL rules at once: the API server runs them only once the
	// schema's own checks (types, enums, bounds) pass, so they are not
	// mixed with those here.
	{"several rules at once", func(c *cronapi.CronJob) {
		c.Name, c.Spec.Schedule, c.Spec.TimeZone = strings.Repeat("s", 60), "TZ=UTC @daily", ptr.To("Local")
	}, []string{"metadata.name", "spec.schedule", "spec.timeZone"}},
	{"several schema checks at once", func(c *cronapi.CronJob) {
		c.Spec.ConcurrencyPolicy, c.Spec.StartingDeadlineSeconds, c.Spec.JitterSeconds = "Never", ptr.To[int64](-1), ptr.To[int32](-1)
	}, []string{"spec.concurrencyPolicy", "spec.jitterSeconds", "spec.startingDeadlineSeconds"}},
}

// The API server's rules that no schema can express, so the CRD accepts
// these CronJobs and only the RPCs refuse them: the schedule must parse
// (robfig/cron's grammar), the zone must exist in the tz database, and the
// Job template must be a valid Job's (the template's spec is kept as is by
// the schema, a pod template being too large to spell out).
var rpcOnlyRules = []invalidCase{
	{"unparseable schedule", func(c *cronapi.CronJob) { c.Spec.Schedule = "every day at noon" }, []string{"spec.schedule"}},
	{"schedule out of range", func(c *cronapi.CronJob) { c.Spec.Schedule = "0 25 * * *" }, []string{"spec.schedule"}},
	{"unknown time zone", func(c *cronapi.CronJob) { c.Spec.TimeZone = ptr.To("Mars/Olympus_Mons") }, []string{"spec.timeZone"}},
	{"template restart policy Always", func(c *cronapi.CronJob) {
		c.Spec.JobTemplate.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
	}, []string{"spec.jobTemplate.spec.template.spec.restartPolicy"}},
	{"template without containers", func(c *cronapi.CronJob) { c.Spec.JobTemplate.Spec.Template.Spec.Containers = nil },
		[]string{"spec.jobTemplate.spec.template.spec.containers"}},
	{"template with a selector", func(c *cronapi.CronJob) {
		c.Spec.JobTemplate.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "reports"}}
	}, []string{"spec.jobTemplate.spec.selector"}},
	{"template negative parallelism", func(c *cronapi.CronJob) { c.Spec.JobTemplate.Spec.Parallelism = ptr.To[int32](-1) },
		[]string{"spec.jobTemplate.spec.parallelism"}},
}

func TestTheAPIServerAndCreateCronJobRefuseTheSameFields(t *testing.T) {
	e := start(t)
	for i, tc := range schemaRules {
		t.Run(tc.name, func(t *testing.T) {
			c := cronJob(fmt.Sprintf("schema-%d", i))
			tc.mutate(c)
			_, err := e.createDirectly(t, c)
			if got := causeFields(t, err); !slices.Equal(got, tc.fields) {
				t.Errorf("the API server refused %v, want %v (%v)", got, tc.fields, err)
			}
			_, err = e.createByRPC(t, c)
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("CreateCronJob answered %v, want InvalidArgument", err)
			}
			if got := violatedFields(err); !slices.Equal(got, tc.fields) {
				t.Errorf("CreateCronJob refused %v, want %v (%v)", got, tc.fields, err)
			}
		})
	}
}

func TestOnlyCreateCronJobRefusesWhatNoSchemaCanExpress(t *testing.T) {
	e := start(t)
	for i, tc := range rpcOnlyRules {
		t.Run(tc.name, func(t *testing.T) {
			c := cronJob(fmt.Sprintf("rpc-only-%d", i))
			tc.mutate(c)
			_, err := e.createByRPC(t, c)
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("CreateCronJob answered %v, want InvalidArgument", err)
			}
			if got := violatedFields(err); !slices.Equal(got, tc.fields) {
				t.Errorf("CreateCronJob refused %v, want %v (%v)", got, tc.fields, err)
			}
			// Documents the limit of the CRD: created directly, it is stored.
			if _, err := e.createDirectly(t, c); err != nil {
				t.Errorf("the CRD now refuses it (move the case to schemaRules): %v", err)
			}
		})
	}
}

func TestUpdatesFollowTheReferencesTransitionRules(t *testing.T) {
	e := start(t)
	c, err := e.createDirectly(t, cronJob("nightly"))
	if err != nil {
		t.Fatal(err)
	}
	// The root rule on the name (creates only) lets updates through.
	c.Spec.Schedule = "@hourly"
	u, err := cronapi.ToUnstructured(c)
	if err != nil {
		t.Fatal(err)
	}
	if u, err = e.cronJobs.Namespace(namespace).Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("updating the schedule directly: %v", err)
	}
	// TZ is refused on update too when the stored schedule has none.
	if c, err = cronapi.FromUnstructured(u); err != nil {
		t.Fatal(err)
	}
	c.Spec.Schedule = "TZ=UTC @hourly"
	if u, err = cronapi.ToUnstructured(c); err != nil {
		t.Fatal(err)
	}
	_, err = e.cronJobs.Namespace(namespace).Update(context.Background(), u, metav1.UpdateOptions{})
	if got := causeFields(t, err); !slices.Equal(got, []string{"spec.schedule"}) {
		t.Errorf("direct update with TZ refused at %v", got)
	}
	req, err := kubeconv.CronJobFromKube(c)
	if err != nil {
		t.Fatal(err)
	}
	req.Metadata.ResourceVersion = ""
	_, err = e.rpc.UpdateCronJob(context.Background(), &jobplanev1.UpdateCronJobRequest{CronJob: req})
	if got := violatedFields(err); !slices.Equal(got, []string{"spec.schedule"}) {
		t.Errorf("UpdateCronJob with TZ refused at %v (%v)", got, err)
	}
}

func TestCronJobRoundTrip(t *testing.T) {
	e := start(t)
	ctx := context.Background()

	created, err := e.createByRPC(t, cronJob("nightly"))
	if err != nil {
		t.Fatal(err)
	}
	createdVersion := created.GetMetadata().GetResourceVersion()
	if created.GetMetadata().GetUid() == "" || created.GetMetadata().GetResourceVersion() == "" || created.GetSpec().GetConcurrencyPolicy() != "Allow" {
		t.Errorf("created %v", created)
	}
	if _, err := e.createByRPC(t, cronJob("nightly")); status.Code(err) != codes.AlreadyExists {
		t.Errorf("created twice: %v, want AlreadyExists", err)
	}

	got, err := e.rpc.GetCronJob(ctx, &jobplanev1.GetCronJobRequest{Namespace: namespace, Name: "nightly"})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetCronJob().GetMetadata().GetUid() != created.GetMetadata().GetUid() ||
		got.GetCronJob().GetSpec().GetJobTemplate().GetSpec().GetTemplate().GetSpec().GetFields()["restartPolicy"].GetStringValue() != "OnFailure" {
		t.Errorf("got %v", got.GetCronJob())
	}
	if _, err := e.rpc.GetCronJob(ctx, &jobplanev1.GetCronJobRequest{Namespace: namespace, Name: "hourly"}); status.Code(err) != codes.NotFound {
		t.Errorf("missing CronJob: %v, want NotFound", err)
	}

	// The cron service writes the status; an update of the spec keeps it.
	stored := e.stored(t, namespace, "nightly")
	stored.Status.LastScheduleTime = &metav1.Time{Time: time.Date(2026, 5, 1, 3, 0, 0, 0, time.UTC)}
	stored.Status.ObservedSchedule = " 0 3 * * *"
	u, err := cronapi.ToUnstructured(stored)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cronJobs.Namespace(namespace).UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	update := proto.Clone(created).(*jobplanev1.CronJob)
	update.Spec.Schedule = "30 4 * * *"
	update.Spec.TimeZone = ptr.To("Europe/Paris")
	update.Metadata.Labels = map[string]string{"app": "reports", "tier": "gold"}
	update.Metadata.ResourceVersion = "" // the latest, whatever it is
	updated, err := e.rpc.UpdateCronJob(ctx, &jobplanev1.UpdateCronJobRequest{CronJob: update})
	if err != nil {
		t.Fatal(err)
	}
	if s := updated.GetCronJob().GetSpec(); s.GetSchedule() != "30 4 * * *" || s.GetTimeZone() != "Europe/Paris" {
		t.Errorf("updated spec %v", s)
	}
	if st := updated.GetCronJob().GetStatus(); st.GetObservedSchedule() != " 0 3 * * *" || st.GetLastScheduleTime() == nil {
		t.Errorf("status lost by the update: %v", st)
	}

	// An update at an old resourceVersion is aborted.
	currentVersion := updated.GetCronJob().GetMetadata().GetResourceVersion()
	stale := proto.Clone(updated.GetCronJob()).(*jobplanev1.CronJob)
	stale.Metadata.ResourceVersion = createdVersion
	stale.Spec.Suspend = ptr.To(true)
	if _, err := e.rpc.UpdateCronJob(ctx, &jobplanev1.UpdateCronJobRequest{CronJob: stale}); status.Code(err) != codes.Aborted {
		t.Errorf("stale update: %v, want Aborted", err)
	}
	stale.Metadata.ResourceVersion = currentVersion
	if _, err := e.rpc.UpdateCronJob(ctx, &jobplanev1.UpdateCronJobRequest{CronJob: stale}); err != nil {
		t.Errorf("update at the current resourceVersion: %v", err)
	}

	// Pages of one, in name order, across namespaces.
	for _, c := range []*cronapi.CronJob{cronJob("alpha"), cronJob("zeta")} {
		if _, err := e.createByRPC(t, c); err != nil {
			t.Fatal(err)
		}
	}
	other := cronJob("middle")
	other.Namespace = "team-b"
	other.Labels = map[string]string{"app": "billing"}
	if _, err := e.createByRPC(t, other); err != nil {
		t.Fatal(err)
	}
	if got, want := listAll(t, e, &jobplanev1.ListCronJobsRequest{PageSize: 1}), []string{"team-a/alpha", "team-a/nightly", "team-a/zeta", "team-b/middle"}; !slices.Equal(got, want) {
		t.Errorf("listed %v, want %v", got, want)
	}
	if got, want := listAll(t, e, &jobplanev1.ListCronJobsRequest{Namespace: namespace, PageSize: 2}), []string{"team-a/alpha", "team-a/nightly", "team-a/zeta"}; !slices.Equal(got, want) {
		t.Errorf("listed %v, want %v", got, want)
	}
	if got, want := listAll(t, e, &jobplanev1.ListCronJobsRequest{LabelSelector: "app=billing"}), []string{"team-b/middle"}; !slices.Equal(got, want) {
		t.Errorf("listed %v, want %v", got, want)
	}
	for _, req := range []*jobplanev1.ListCronJobsRequest{{PageToken: "not-a-token"}, {LabelSelector: "app in ("}, {PageSize: 1001}} {
		if _, err := e.rpc.ListCronJobs(ctx, req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("list %v: %v, want InvalidArgument", req, err)
		}
	}

	if _, err := e.rpc.DeleteCronJob(ctx, &jobplanev1.DeleteCronJobRequest{Namespace: namespace, Name: "nightly", PropagationPolicy: "Foreground"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rpc.DeleteCronJob(ctx, &jobplanev1.DeleteCronJobRequest{Namespace: namespace, Name: "alpha"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rpc.DeleteCronJob(ctx, &jobplanev1.DeleteCronJobRequest{Namespace: namespace, Name: "zeta", PropagationPolicy: "Sideways"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("unknown propagation: %v, want InvalidArgument", err)
	}
	if _, err := e.rpc.GetCronJob(ctx, &jobplanev1.GetCronJobRequest{Namespace: namespace, Name: "alpha"}); status.Code(err) != codes.NotFound {
		t.Errorf("deleted CronJob: %v, want NotFound", err)
	}
	if _, err := e.rpc.DeleteCronJob(ctx, &jobplanev1.DeleteCronJobRequest{Namespace: namespace, Name: "alpha"}); status.Code(err) != codes.NotFound {
		t.Errorf("deleted twice: %v, want NotFound", err)
	}
}

// listAll follows the page tokens and returns namespace/name of every
// CronJob listed.
func listAll(t *testing.T, e *env, req *jobplanev1.ListCronJobsRequest) []string {
	t.Helper()
	var out []string
	for pages := 0; ; pages++ {
		resp, err := e.rpc.ListCronJobs(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if req.GetPageSize() > 0 && len(resp.GetCronJobs()) > int(req.GetPageSize()) {
			t.Errorf("page of %d, asked %d", len(resp.GetCronJobs()), req.GetPageSize())
		}
		for _, c := range resp.GetCronJobs() {
			out = append(out, c.GetMetadata().GetNamespace()+"/"+c.GetMetadata().GetName())
		}
		if resp.GetNextPageToken() == "" || pages > 10 {
			return out
		}
		req.PageToken = resp.GetNextPageToken()
	}
}

func TestKubectlJSONOfABatchCronJobIsAJobplaneCronJob(t *testing.T) {
	e := start(t)
	batchJSON, err := e.kubectl(t, "", "create", "cronjob", "report", "-n", namespace, "--image=busybox", "--schedule=*/5 * * * *",
		"--restart=OnFailure", "--dry-run=client", "-o", "json", "--", "date")
	if err != nil {
		t.Fatalf("kubectl create cronjob: %v\n%s", err, batchJSON)
	}
	if !strings.Contains(batchJSON, `"apiVersion": "batch/v1"`) {
		t.Fatalf("not a batch/v1 CronJob:\n%s", batchJSON)
	}
	ours := strings.Replace(batchJSON, `"apiVersion": "batch/v1"`, `"apiVersion": "jobplane.dev/v1"`, 1)

	// Created with kubectl, through the CRD.
	if out, err := e.kubectl(t, ours, "create", "-f", "-"); err != nil {
		t.Fatalf("kubectl create -f: %v\n%s", err, out)
	}
	direct := e.stored(t, namespace, "report")
	if direct.Spec.Schedule != "*/5 * * * *" || direct.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image != "busybox" {
		t.Errorf("stored %+v", direct.Spec)
	}

	// The same JSON, renamed, through CreateCronJob (as grpcurl sends it).
	req := &jobplanev1.CronJob{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal([]byte(ours), req); err != nil {
		t.Fatalf("the contract refuses kubectl's JSON: %v", err)
	}
	req.Metadata.Name = "report-rpc"
	if _, err := e.rpc.CreateCronJob(context.Background(), &jobplanev1.CreateCronJobRequest{CronJob: req}); err != nil {
		t.Fatalf("CreateCronJob: %v", err)
	}
	viaRPC := e.stored(t, namespace, "report-rpc")
	if !reflect.DeepEqual(viaRPC.Spec, direct.Spec) {
		t.Errorf("stored specs differ:\nkubectl: %+v\nRPC:     %+v", direct.Spec, viaRPC.Spec)
	}
}

func TestTheSchemaAndTheRPCApplyTheSameDefaults(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	if _, err := e.createDirectly(t, cronJob("direct")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.createByRPC(t, cronJob("rpc")); err != nil {
		t.Fatal(err)
	}
	specOf := func(name string) map[string]any {
		t.Helper()
		u, err := e.cronJobs.Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		spec, _, err := unstructured.NestedMap(u.Object, "spec")
		if err != nil {
			t.Fatal(err)
		}
		return spec
	}
	direct, rpc := specOf("direct"), specOf("rpc")
	if !reflect.DeepEqual(direct, rpc) {
		t.Errorf("stored specs differ:\ndirect: %v\nRPC:    %v", direct, rpc)
	}
	want := map[string]any{"concurrencyPolicy": "Allow", "suspend": false, "successfulJobsHistoryLimit": int64(3), "failedJobsHistoryLimit": int64(1)}
	for field, value := range want {
		if direct[field] != value {
			t.Errorf("spec.%s defaulted to %v (%T), want %v", field, direct[field], direct[field], value)
		}
	}
}

// crdResource is where the CRD itself is served.
var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func TestOlderCronJobsWithTZOrALongNameCanStillBeUpdated(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	// Older CronJobs: created while the CRD had no rules (as batch/v1 ones
	// were before the reference added its checks).
	restore := withoutCRDRules(t, e)
	legacy := cronJob(strings.Repeat("l", 60))
	legacy.Spec.Schedule = "TZ=UTC 0 3 * * *"
	eventually(t, "the CRD without rules", func() error { _, err := e.createDirectly(t, legacy); return err })
	restore()
	probe := cronJob("probe")
	probe.Spec.Schedule = "TZ=UTC 0 3 * * *"
	eventually(t, "the CRD with its rules", func() error {
		if _, err := e.createDirectly(t, probe); err == nil {
			return fmt.Errorf("TZ accepted")
		}
		return nil
	})

	update := func(mutate func(*cronapi.CronJob)) (directErr, rpcErr error) {
		c := e.stored(t, namespace, legacy.Name)
		mutate(c)
		u, err := cronapi.ToUnstructured(c)
		if err != nil {
			t.Fatal(err)
		}
		_, directErr = e.cronJobs.Namespace(namespace).Update(ctx, u, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		req, err := kubeconv.CronJobFromKube(c)
		if err != nil {
			t.Fatal(err)
		}
		_, rpcErr = e.rpc.UpdateCronJob(ctx, &jobplanev1.UpdateCronJobRequest{CronJob: req})
		return directErr, rpcErr
	}
	if directErr, rpcErr := update(func(c *cronapi.CronJob) { c.Spec.Schedule = "TZ=UTC 0 4 * * *" }); directErr != nil || rpcErr != nil {
		t.Errorf("keeping TZ and the long name: API server %v, UpdateCronJob %v", directErr, rpcErr)
	}
	directErr, rpcErr := update(func(c *cronapi.CronJob) { c.Spec.TimeZone = ptr.To("UTC") })
	if got := causeFields(t, directErr); !slices.Equal(got, []string{"spec.schedule"}) {
		t.Errorf("TZ with timeZone: the API server refused %v", got)
	}
	if got := violatedFields(rpcErr); !slices.Equal(got, []string{"spec.schedule"}) {
		t.Errorf("TZ with timeZone: UpdateCronJob refused %v (%v)", got, rpcErr)
	}
}

// withoutCRDRules removes the CRD's CEL rules until the returned function
// puts them back.
func withoutCRDRules(t *testing.T, e *env) (restore func()) {
	t.Helper()
	client, err := dynamic.NewForConfig(e.api.Config)
	if err != nil {
		t.Fatal(err)
	}
	crds := client.Resource(crdResource)
	ctx := context.Background()
	setSchema := func(edit func(openAPI map[string]any)) {
		t.Helper()
		crd, err := crds.Get(ctx, "cronjobs.jobplane.dev", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		openAPI, _, _ := unstructured.NestedMap(versions[0].(map[string]any), "schema", "openAPIV3Schema")
		edit(openAPI)
		if err := unstructured.SetNestedMap(versions[0].(map[string]any), openAPI, "schema", "openAPIV3Schema"); err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"); err != nil {
			t.Fatal(err)
		}
		if _, err := crds.Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var rootRules, specRules any
	setSchema(func(openAPI map[string]any) {
		spec := openAPI["properties"].(map[string]any)["spec"].(map[string]any)
		rootRules, specRules = openAPI["x-kubernetes-validations"], spec["x-kubernetes-validations"]
		delete(openAPI, "x-kubernetes-validations")
		delete(spec, "x-kubernetes-validations")
	})
	return func() {
		setSchema(func(openAPI map[string]any) {
			openAPI["x-kubernetes-validations"] = rootRules
			openAPI["properties"].(map[string]any)["spec"].(map[string]any)["x-kubernetes-validations"] = specRules
		})
	}
}

// eventually retries f until it succeeds, for what the API server takes a
// moment to apply (a CRD's new schema).
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
