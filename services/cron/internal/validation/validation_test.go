package validation_test

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/services/cron/internal/validation"
)

// valid is a defaulted CronJob the API server would accept.
func valid() *cronapi.CronJob {
	c := &cronapi.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "team-a"},
		Spec: cronapi.CronJobSpec{CronJobSpec: batchv1.CronJobSpec{
			Schedule: "0 3 * * *",
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyOnFailure,
				Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
			}}}},
		}},
	}
	validation.Default(c)
	return c
}

// errorStrings renders errors as "path: body", the way the API server's
// causes read.
func errorStrings(errs field.ErrorList) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Field + ": " + e.ErrorBody()
	}
	return out
}

func assertErrors(t *testing.T, errs field.ErrorList, want []string) {
	t.Helper()
	got := errorStrings(errs)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestDefaultIsTheReferences(t *testing.T) {
	c := &cronapi.CronJob{}
	c.Spec.JobTemplate.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
		Action: batchv1.PodFailurePolicyActionIgnore, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget}},
	}}}
	validation.Default(c)
	spec := c.Spec
	if spec.ConcurrencyPolicy != batchv1.AllowConcurrent || !ptr.Equal(spec.Suspend, ptr.To(false)) ||
		!ptr.Equal(spec.SuccessfulJobsHistoryLimit, ptr.To[int32](3)) || !ptr.Equal(spec.FailedJobsHistoryLimit, ptr.To[int32](1)) {
		t.Errorf("defaults: %+v", spec.CronJobSpec)
	}
	if got := spec.JobTemplate.Spec.PodFailurePolicy.Rules[0].OnPodConditions[0].Status; got != corev1.ConditionTrue {
		t.Errorf("onPodConditions status %q, want True", got)
	}
	if spec.JobTemplate.Spec.Completions != nil || spec.JobTemplate.Spec.BackoffLimit != nil {
		t.Errorf("a template is not a Job: Job defaults applied: %+v", spec.JobTemplate.Spec)
	}
	if spec.CatchUp != nil || spec.JitterSeconds != nil || spec.DaylightSaving != nil {
		t.Errorf("extensions defaulted: %+v", spec)
	}
}

func TestDefaultKeepsWhatIsSet(t *testing.T) {
	c := &cronapi.CronJob{}
	c.Spec.ConcurrencyPolicy = batchv1.ForbidConcurrent
	c.Spec.Suspend = ptr.To(true)
	c.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](0)
	c.Spec.FailedJobsHistoryLimit = ptr.To[int32](7)
	validation.Default(c)
	if c.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent || !*c.Spec.Suspend || *c.Spec.SuccessfulJobsHistoryLimit != 0 || *c.Spec.FailedJobsHistoryLimit != 7 {
		t.Errorf("defaults replaced values: %+v", c.Spec.CronJobSpec)
	}
}

func TestValidateCronJobCreate(t *testing.T) {
	const (
		templateSpec = "spec.jobTemplate.spec"
		podSpec      = templateSpec + ".template.spec"
	)
	cases := []struct {
		name   string
		mutate func(*cronapi.CronJob)
		want   []string
	}{
		{"valid", func(*cronapi.CronJob) {}, nil},
		{"52-character name", func(c *cronapi.CronJob) { c.Name = strings.Repeat("a", 52) }, nil},
		{"53-character name", func(c *cronapi.CronJob) { c.Name = strings.Repeat("a", 53) },
			[]string{`metadata.name: Invalid value: "` + strings.Repeat("a", 53) + `": must be no more than 52 characters`}},
		{"generated name too long", func(c *cronapi.CronJob) { c.Name, c.GenerateName = "", strings.Repeat("b", 48) },
			[]string{`metadata.name: Invalid value: "` + strings.Repeat("b", 48) + `xxxxx": must be no more than 52 characters`}},
		{"short generated name", func(c *cronapi.CronJob) { c.Name, c.GenerateName = "", "nightly-" }, nil},
		{"no name, no namespace", func(c *cronapi.CronJob) { c.Name, c.Namespace = "", "" },
			[]string{"metadata.name: Required value: name or generateName is required", "metadata.namespace: Required value"}},
		{"name not a DNS subdomain", func(c *cronapi.CronJob) { c.Name = "Nightly" },
			[]string{`metadata.name: Invalid value: "Nightly": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`}},
		{"bad label", func(c *cronapi.CronJob) { c.Labels = map[string]string{"a b": "c"} },
			[]string{`metadata.labels: Invalid value: "a b": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`}},
		{"empty schedule", func(c *cronapi.CronJob) { c.Spec.Schedule = "" }, []string{"spec.schedule: Required value"}},
		{"unparseable schedule", func(c *cronapi.CronJob) { c.Spec.Schedule = "every day" },
			[]string{`spec.schedule: Invalid value: "every day": expected exactly 5 fields, found 2: [every day]`}},
		{"out-of-range schedule", func(c *cronapi.CronJob) { c.Spec.Schedule = "61 * * * *" },
			[]string{`spec.schedule: Invalid value: "61 * * * *": end of range (61) above maximum (59): 61`}},
		{"descriptor", func(c *cronapi.CronJob) { c.Spec.Schedule = "@every 90m" }, nil},
		{"TZ in schedule", func(c *cronapi.CronJob) { c.Spec.Schedule = "TZ=UTC 0 3 * * *" },
			[]string{`spec.schedule: Invalid value: "TZ=UTC 0 3 * * *": cannot use TZ or CRON_TZ in schedule, use timeZone field instead`}},
		{"CRON_TZ in schedule", func(c *cronapi.CronJob) { c.Spec.Schedule = "CRON_TZ=UTC 0 3 * * *" },
			[]string{`spec.schedule: Invalid value: "CRON_TZ=UTC 0 3 * * *": cannot use TZ or CRON_TZ in schedule, use timeZone field instead`}},
		{"time zone", func(c *cronapi.CronJob) { c.Spec.TimeZone = ptr.To("Europe/Paris") }, nil},
		{"empty time zone", func(c *cronapi.CronJob) { c.Spec.TimeZone = ptr.To("") },
			[]string{`spec.timeZone: Invalid value: "": timeZone must be nil or non-empty string`}},
		{"time zone with bad characters", func(c *cronapi.CronJob) { c.Spec.TimeZone = ptr.To("Europe/Par is") },
			[]string{`spec.timeZone: Invalid value: "Europe/Par is": unknown time zone Europe/Par is`}},
		{"time zone with ..", func(c *cronapi.CronJob) { c.Spec.TimeZone = ptr.To("../etc/passwd") },
			[]string{`spec.timeZone: Invalid value: "../etc/passwd": unknown time zone ../etc/passwd`}},
		{"time zone starting with -", func(c *cronapi.CronJob) { c.Spec.TimeZone = ptr.To("-Europe") },
			[]string{`spec.timeZone: Invalid value: "-Europe": unknown time zone -Europe`}},
		{"Local time zone", func(c *cronapi.CronJob) { c.Spec.TimeZone = ptr.To("local") },
			[]string{`spec.timeZone: Invalid value: "local": timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones`}},
		{"unknown time zone", func(c *cronapi.CronJob) { c.Spec.TimeZone = ptr.To("Moon/Base") },
			[]string{`spec.timeZone: Invalid value: "Moon/Base": unknown time zone Moon/Base`}},
		{"bad schedule and bad zone", func(c *cronapi.CronJob) { c.Spec.Schedule, c.Spec.TimeZone = "nope", ptr.To("Local") },
			[]string{
				`spec.schedule: Invalid value: "nope": expected exactly 5 fields, found 1: [nope]`,
				`spec.timeZone: Invalid value: "Local": timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones`,
			}},
		{"negative starting deadline", func(c *cronapi.CronJob) { c.Spec.StartingDeadlineSeconds = ptr.To[int64](-1) },
			[]string{"spec.startingDeadlineSeconds: Invalid value: -1: must be greater than or equal to 0"}},
		{"zero starting deadline", func(c *cronapi.CronJob) { c.Spec.StartingDeadlineSeconds = ptr.To[int64](0) }, nil},
		{"no concurrency policy", func(c *cronapi.CronJob) { c.Spec.ConcurrencyPolicy = "" }, []string{"spec.concurrencyPolicy: Required value"}},
		{"unknown concurrency policy", func(c *cronapi.CronJob) { c.Spec.ConcurrencyPolicy = "Sometimes" },
			[]string{`spec.concurrencyPolicy: Unsupported value: "Sometimes": supported values: "Allow", "Forbid", "Replace", "BufferOne", "BufferAll"`}},
		{"BufferOne", func(c *cronapi.CronJob) { c.Spec.ConcurrencyPolicy = cronapi.BufferOne }, nil},
		{"BufferAll", func(c *cronapi.CronJob) { c.Spec.ConcurrencyPolicy = cronapi.BufferAll }, nil},
		{"negative history limits", func(c *cronapi.CronJob) {
			c.Spec.SuccessfulJobsHistoryLimit, c.Spec.FailedJobsHistoryLimit = ptr.To[int32](-1), ptr.To[int32](-2)
		}, []string{
			"spec.successfulJobsHistoryLimit: Invalid value: -1: must be greater than or equal to 0",
			"spec.failedJobsHistoryLimit: Invalid value: -2: must be greater than or equal to 0",
		}},
		{"zero history limits", func(c *cronapi.CronJob) {
			c.Spec.SuccessfulJobsHistoryLimit, c.Spec.FailedJobsHistoryLimit = ptr.To[int32](0), ptr.To[int32](0)
		}, nil},
		{"template restart policy Always", func(c *cronapi.CronJob) {
			c.Spec.JobTemplate.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
		},
			[]string{podSpec + `.restartPolicy: Required value: valid values: "OnFailure", "Never"`}},
		{"template without containers", func(c *cronapi.CronJob) { c.Spec.JobTemplate.Spec.Template.Spec.Containers = nil },
			[]string{podSpec + ".containers: Required value"}},
		{"template container without name", func(c *cronapi.CronJob) { c.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Name = "" },
			[]string{podSpec + ".containers[0].name: Required value"}},
		{"template negative parallelism", func(c *cronapi.CronJob) { c.Spec.JobTemplate.Spec.Parallelism = ptr.To[int32](-1) },
			[]string{templateSpec + ".parallelism: Invalid value: -1: must be greater than or equal to 0"}},
		{"template indexed without completions", func(c *cronapi.CronJob) {
			c.Spec.JobTemplate.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
		}, []string{templateSpec + ".completions: Required value: when completion mode is Indexed"}},
		{"template selector", func(c *cronapi.CronJob) {
			c.Spec.JobTemplate.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
		}, []string{templateSpec + ".selector: Invalid value: {\"matchLabels\":{\"a\":\"b\"}}: `selector` will be auto-generated"}},
		{"template manual selector", func(c *cronapi.CronJob) { c.Spec.JobTemplate.Spec.ManualSelector = ptr.To(true) },
			[]string{templateSpec + `.manualSelector: Unsupported value: true: supported values: "nil", "false"`}},
		{"template manualSelector false", func(c *cronapi.CronJob) { c.Spec.JobTemplate.Spec.ManualSelector = ptr.To(false) }, nil},
		{"template pod failure policy with restart policy OnFailure", func(c *cronapi.CronJob) {
			c.Spec.JobTemplate.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{1}},
			}}}
		}, []string{podSpec + `.restartPolicy: Invalid value: "OnFailure": only "Never" is supported when podFailurePolicy is specified`}},
		{"catch-up policy", func(c *cronapi.CronJob) {
			c.Spec.CatchUp = &cronapi.CatchUpPolicy{Policy: cronapi.CatchUpAll, WindowSeconds: ptr.To[int64](0), MaxRuns: ptr.To[int32](1000)}
		}, nil},
		{"bad catch-up policy", func(c *cronapi.CronJob) {
			c.Spec.CatchUp = &cronapi.CatchUpPolicy{Policy: "Some", WindowSeconds: ptr.To[int64](-5), MaxRuns: ptr.To[int32](0)}
		}, []string{
			`spec.catchUp.policy: Unsupported value: "Some": supported values: "Latest", "Skip", "All"`,
			"spec.catchUp.windowSeconds: Invalid value: -5: must be greater than or equal to 0",
			"spec.catchUp.maxRuns: Invalid value: 0: must be between 1 and 1000",
		}},
		{"too many catch-up runs", func(c *cronapi.CronJob) { c.Spec.CatchUp = &cronapi.CatchUpPolicy{MaxRuns: ptr.To[int32](1001)} },
			[]string{"spec.catchUp.maxRuns: Invalid value: 1001: must be between 1 and 1000"}},
		{"negative jitter", func(c *cronapi.CronJob) { c.Spec.JitterSeconds = ptr.To[int32](-1) },
			[]string{"spec.jitterSeconds: Invalid value: -1: must be greater than or equal to 0"}},
		{"daylight saving", func(c *cronapi.CronJob) {
			c.Spec.DaylightSaving = &cronapi.DaylightSavingPolicy{SkippedHour: cronapi.SkippedHourRunAtNextValidTime, RepeatedHour: cronapi.RepeatedHourOnce}
		}, nil},
		{"bad daylight saving", func(c *cronapi.CronJob) {
			c.Spec.DaylightSaving = &cronapi.DaylightSavingPolicy{SkippedHour: "Never", RepeatedHour: "Thrice"}
		}, []string{
			`spec.daylightSaving.skippedHour: Unsupported value: "Never": supported values: "Skip", "RunAtNextValidTime"`,
			`spec.daylightSaving.repeatedHour: Unsupported value: "Thrice": supported values: "Twice", "Once"`,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.mutate(c)
			assertErrors(t, validation.ValidateCronJobCreate(c), tc.want)
		})
	}
}

func TestTemplatePodFailurePolicyIsValidOnceDefaulted(t *testing.T) {
	c := valid()
	c.Spec.JobTemplate.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	c.Spec.JobTemplate.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
		Action: batchv1.PodFailurePolicyActionIgnore, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget}},
	}}}
	c.Spec.JobTemplate.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
	assertErrors(t, validation.ValidateCronJobCreate(c), []string{
		"spec.jobTemplate.spec.podFailurePolicy.rules[0].onPodConditions[0].status: Required value: valid values: [\"False\" \"True\" \"Unknown\"]",
	})
	validation.Default(c)
	assertErrors(t, validation.ValidateCronJobCreate(c), nil)
}

func TestValidateCronJobUpdate(t *testing.T) {
	cases := []struct {
		name           string
		old, new       func(*cronapi.CronJob)
		want           []string
		wantWhenCreate bool // the same object is refused on create
	}{
		{"spec change", func(*cronapi.CronJob) {}, func(c *cronapi.CronJob) { c.Spec.Schedule = "@hourly" }, nil, false},
		{"long name kept", func(c *cronapi.CronJob) { c.Name = strings.Repeat("a", 60) }, func(c *cronapi.CronJob) { c.Name = strings.Repeat("a", 60) }, nil, true},
		{"name changed", func(*cronapi.CronJob) {}, func(c *cronapi.CronJob) { c.Name = "other" },
			[]string{`metadata.name: Invalid value: "other": field is immutable`}, false},
		{"TZ kept", func(c *cronapi.CronJob) { c.Spec.Schedule = "TZ=UTC 0 3 * * *" }, func(c *cronapi.CronJob) { c.Spec.Schedule = "TZ=UTC 0 4 * * *" }, nil, true},
		{"TZ kept with a time zone", func(c *cronapi.CronJob) { c.Spec.Schedule = "TZ=UTC 0 3 * * *" }, func(c *cronapi.CronJob) {
			c.Spec.Schedule, c.Spec.TimeZone = "TZ=UTC 0 4 * * *", ptr.To("UTC")
		}, []string{`spec.schedule: Invalid value: "TZ=UTC 0 4 * * *": cannot use both timeZone field and TZ or CRON_TZ in schedule`}, true},
		{"TZ added", func(*cronapi.CronJob) {}, func(c *cronapi.CronJob) { c.Spec.Schedule = "TZ=UTC 0 4 * * *" },
			[]string{`spec.schedule: Invalid value: "TZ=UTC 0 4 * * *": cannot use TZ or CRON_TZ in schedule, use timeZone field instead`}, true},
		{"TZ kept, schedule broken", func(c *cronapi.CronJob) { c.Spec.Schedule = "TZ=UTC 0 3 * * *" }, func(c *cronapi.CronJob) { c.Spec.Schedule = "TZ=UTC 0 3 * *" },
			[]string{`spec.schedule: Invalid value: "TZ=UTC 0 3 * *": expected exactly 5 fields, found 4: [0 3 * *]`}, true},
		{"unknown zone kept", func(c *cronapi.CronJob) { c.Spec.TimeZone = ptr.To("Moon/Base") }, func(c *cronapi.CronJob) { c.Spec.TimeZone = ptr.To("Moon/Base") }, nil, true},
		{"zone changed to an unknown one", func(c *cronapi.CronJob) { c.Spec.TimeZone = ptr.To("UTC") }, func(c *cronapi.CronJob) { c.Spec.TimeZone = ptr.To("Moon/Base") },
			[]string{`spec.timeZone: Invalid value: "Moon/Base": unknown time zone Moon/Base`}, true},
		{"template broken", func(*cronapi.CronJob) {}, func(c *cronapi.CronJob) { c.Spec.JobTemplate.Spec.Template.Spec.Containers = nil },
			[]string{"spec.jobTemplate.spec.template.spec.containers: Required value"}, true},
		{"extension broken", func(*cronapi.CronJob) {}, func(c *cronapi.CronJob) { c.Spec.JitterSeconds = ptr.To[int32](-3) },
			[]string{"spec.jitterSeconds: Invalid value: -3: must be greater than or equal to 0"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := valid()
			old.ResourceVersion = "7"
			tc.old(old)
			c := old.DeepCopy()
			tc.new(c)
			assertErrors(t, validation.ValidateCronJobUpdate(c, old), tc.want)
			if refused := len(validation.ValidateCronJobCreate(c)) > 0; refused != tc.wantWhenCreate {
				t.Errorf("refused on create: %v, want %v (%v)", refused, tc.wantWhenCreate, validation.ValidateCronJobCreate(c))
			}
		})
	}
}
