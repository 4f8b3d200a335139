package jobvalidation

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// validJob is a Job the API server accepts, before defaulting.
func validJob() *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "work", Namespace: "default"},
		Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{
					RestartPolicy:  corev1.RestartPolicyNever,
					InitContainers: []corev1.Container{{Name: "setup", Image: "busybox"}},
					Containers:     []corev1.Container{{Name: "main", Image: "busybox"}},
				},
			},
		},
	}
}

func indexedJob(completions int32) func(*batchv1.Job) {
	return func(j *batchv1.Job) {
		j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
		j.Spec.Completions = ptr.To(completions)
	}
}

func exitCodes(op batchv1.PodFailurePolicyOnExitCodesOperator, values ...int32) *batchv1.PodFailurePolicyOnExitCodesRequirement {
	return &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: op, Values: values}
}

func TestValidJobsPass(t *testing.T) {
	cases := map[string]func(*batchv1.Job){
		"plain job":   func(*batchv1.Job) {},
		"indexed job": indexedJob(5),
		"indexed job with per-index limits": func(j *batchv1.Job) {
			indexedJob(10)(j)
			j.Spec.BackoffLimitPerIndex = ptr.To[int32](2)
			j.Spec.MaxFailedIndexes = ptr.To[int32](3)
		},
		"pod failure policy with every action": func(j *batchv1.Job) {
			indexedJob(3)(j)
			j.Spec.BackoffLimitPerIndex = ptr.To[int32](1)
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
				{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{ContainerName: ptr.To("setup"), Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{1, 2, 3}}},
				{Action: batchv1.PodFailurePolicyActionIgnore, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget}}},
				{Action: batchv1.PodFailurePolicyActionFailIndex, OnExitCodes: exitCodes(batchv1.PodFailurePolicyOnExitCodesOpNotIn, 0)},
				{Action: batchv1.PodFailurePolicyActionCount, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: "example.com/Custom", Status: corev1.ConditionFalse}}},
			}}
		},
		"success policy": func(j *batchv1.Job) {
			indexedJob(10)(j)
			j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{
				{SucceededIndexes: ptr.To("0-2,5,7-9"), SucceededCount: ptr.To[int32](4)},
				{SucceededCount: ptr.To[int32](8)},
			}}
		},
		"managed by jobplane":         func(j *batchv1.Job) { j.Spec.ManagedBy = ptr.To("jobplane.dev/executor") },
		"restart policy OnFailure":    func(j *batchv1.Job) { j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure },
		"podReplacementPolicy Failed": func(j *batchv1.Job) { j.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed) },
		"manual selector matching labels": func(j *batchv1.Job) {
			j.Spec.ManualSelector = ptr.To(true)
			j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}
			j.Spec.Template.Labels = map[string]string{"app": "x"}
		},
		"zero parallelism":                  func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](0) },
		"standard and qualified finalizers": func(j *batchv1.Job) { j.Finalizers = []string{"orphan", "example.com/keep"} },
		"indexed job named by generateName": func(j *batchv1.Job) {
			j.Name = ""
			j.GenerateName = "myjob-"
			indexedJob(3)(j)
		},
	}
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			job := validJob()
			edit(job)
			DefaultJob(job)
			if errs := ValidateJob(job); len(errs) > 0 {
				t.Fatalf("rejected: %v", errs.ToAggregate())
			}
		})
	}
}

func TestInvalidJobsAreRejectedWithTheAPIServersFieldPaths(t *testing.T) {
	cases := []struct {
		name    string
		edit    func(*batchv1.Job)
		field   string
		message string
	}{
		{"negative parallelism", func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](-1) }, "spec.parallelism", "must be greater than or equal to 0"},
		{"negative completions", func(j *batchv1.Job) { j.Spec.Completions = ptr.To[int32](-1) }, "spec.completions", "must be greater than or equal to 0"},
		{"negative backoffLimit", func(j *batchv1.Job) { j.Spec.BackoffLimit = ptr.To[int32](-1) }, "spec.backoffLimit", "must be greater than or equal to 0"},
		{"negative activeDeadlineSeconds", func(j *batchv1.Job) { j.Spec.ActiveDeadlineSeconds = ptr.To[int64](-5) }, "spec.activeDeadlineSeconds", "must be greater than or equal to 0"},
		{"negative ttlSecondsAfterFinished", func(j *batchv1.Job) { j.Spec.TTLSecondsAfterFinished = ptr.To[int32](-1) }, "spec.ttlSecondsAfterFinished", "must be greater than or equal to 0"},
		{"invalid name", func(j *batchv1.Job) { j.Name = "Not_A_Name" }, "metadata.name", "RFC 1123"},
		{"missing namespace", func(j *batchv1.Job) { j.Namespace = "" }, "metadata.namespace", "Required value"},
		{"indexed without completions", func(j *batchv1.Job) {
			j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
			j.Spec.Parallelism = ptr.To[int32](2) // else completions defaults to 1
		}, "spec.completions", "when completion mode is Indexed"},
		{"unknown completion mode", func(j *batchv1.Job) { j.Spec.CompletionMode = ptr.To(batchv1.CompletionMode("Sometimes")) }, "spec.completionMode", "Unsupported value"},
		{"indexed parallelism above 100000", func(j *batchv1.Job) {
			indexedJob(200000)(j)
			j.Spec.Parallelism = ptr.To[int32](100001)
		}, "spec.parallelism", "must be less than or equal to 100000 when completion mode is Indexed"},
		{"maxFailedIndexes above completions", func(j *batchv1.Job) {
			indexedJob(3)(j)
			j.Spec.BackoffLimitPerIndex = ptr.To[int32](1)
			j.Spec.MaxFailedIndexes = ptr.To[int32](4)
		}, "spec.maxFailedIndexes", "must be less than or equal to completions"},
		{"maxFailedIndexes without backoffLimitPerIndex", func(j *batchv1.Job) {
			indexedJob(3)(j)
			j.Spec.MaxFailedIndexes = ptr.To[int32](1)
		}, "spec.backoffLimitPerIndex", "when maxFailedIndexes is specified"},
		{"many completions with per-index limits need maxFailedIndexes", func(j *batchv1.Job) {
			indexedJob(100001)(j)
			j.Spec.BackoffLimitPerIndex = ptr.To[int32](1)
		}, "spec.maxFailedIndexes", "must be specified when completions is above 100000"},
		{"many completions with per-index limits cap parallelism", func(j *batchv1.Job) {
			indexedJob(100001)(j)
			j.Spec.BackoffLimitPerIndex = ptr.To[int32](1)
			j.Spec.MaxFailedIndexes = ptr.To[int32](10)
			j.Spec.Parallelism = ptr.To[int32](10001)
		}, "spec.parallelism", "must be less than or equal to 10000 when completions are above 100000"},
		{"backoffLimitPerIndex requires Indexed", func(j *batchv1.Job) { j.Spec.BackoffLimitPerIndex = ptr.To[int32](1) }, "spec.backoffLimitPerIndex", "requires indexed completion mode"},
		{"managedBy without domain", func(j *batchv1.Job) { j.Spec.ManagedBy = ptr.To("executor") }, "spec.managedBy", "must be a domain-prefixed path"},
		{"managedBy longer than 63", func(j *batchv1.Job) { j.Spec.ManagedBy = ptr.To("jobplane.dev/" + strings.Repeat("x", 60)) }, "spec.managedBy", "Too long"},
		{"more than 20 failure policy rules", func(j *batchv1.Job) {
			var rules []batchv1.PodFailurePolicyRule
			for range 21 {
				rules = append(rules, batchv1.PodFailurePolicyRule{Action: batchv1.PodFailurePolicyActionIgnore, OnExitCodes: exitCodes(batchv1.PodFailurePolicyOnExitCodesOpIn, 1)})
			}
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: rules}
		}, "spec.podFailurePolicy.rules", "Too many: 21: must have at most 20 items"},
		{"more than 255 exit codes", func(j *batchv1.Job) {
			var values []int32
			for i := range int32(256) {
				values = append(values, i+1)
			}
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: exitCodes(batchv1.PodFailurePolicyOnExitCodesOpIn, values...)}}}
		}, "spec.podFailurePolicy.rules[0].onExitCodes.values", "Too many: 256: must have at most 255 items"},
		{"exit code 0 with In", func(j *batchv1.Job) {
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: exitCodes(batchv1.PodFailurePolicyOnExitCodesOpIn, 0, 1)}}}
		}, "spec.podFailurePolicy.rules[0].onExitCodes.values[0]", "must not be 0 for the In operator"},
		{"unordered exit codes", func(j *batchv1.Job) {
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: exitCodes(batchv1.PodFailurePolicyOnExitCodesOpIn, 3, 2)}}}
		}, "spec.podFailurePolicy.rules[0].onExitCodes.values", "must be ordered"},
		{"duplicate exit codes", func(j *batchv1.Job) {
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: exitCodes(batchv1.PodFailurePolicyOnExitCodesOpIn, 2, 2)}}}
		}, "spec.podFailurePolicy.rules[0].onExitCodes.values[1]", "Duplicate value"},
		{"no exit codes", func(j *batchv1.Job) {
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: exitCodes(batchv1.PodFailurePolicyOnExitCodesOpIn)}}}
		}, "spec.podFailurePolicy.rules[0].onExitCodes.values", "at least one value is required"},
		{"unknown operator", func(j *batchv1.Job) {
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: exitCodes("Between", 1)}}}
		}, "spec.podFailurePolicy.rules[0].onExitCodes.operator", "Unsupported value"},
		{"unknown container name", func(j *batchv1.Job) {
			req := exitCodes(batchv1.PodFailurePolicyOnExitCodesOpIn, 1)
			req.ContainerName = ptr.To("sidecar")
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: req}}}
		}, "spec.podFailurePolicy.rules[0].onExitCodes.containerName", "must be one of the container or initContainer names"},
		{"rule with both requirements", func(j *batchv1.Job) {
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionFailJob,
				OnExitCodes: exitCodes(batchv1.PodFailurePolicyOnExitCodesOpIn, 1), OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget}}}}}
		}, "spec.podFailurePolicy.rules[0]", "specifying both OnExitCodes and OnPodConditions is not supported"},
		{"rule with no requirement", func(j *batchv1.Job) {
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionFailJob}}}
		}, "spec.podFailurePolicy.rules[0]", "specifying one of OnExitCodes and OnPodConditions is required"},
		{"missing action", func(j *batchv1.Job) {
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{OnExitCodes: exitCodes(batchv1.PodFailurePolicyOnExitCodesOpIn, 1)}}}
		}, "spec.podFailurePolicy.rules[0].action", "Required value"},
		{"unknown action", func(j *batchv1.Job) {
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: "Retry", OnExitCodes: exitCodes(batchv1.PodFailurePolicyOnExitCodesOpIn, 1)}}}
		}, "spec.podFailurePolicy.rules[0].action", "Unsupported value"},
		{"FailIndex without backoffLimitPerIndex", func(j *batchv1.Job) {
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionFailIndex, OnExitCodes: exitCodes(batchv1.PodFailurePolicyOnExitCodesOpIn, 1)}}}
		}, "spec.podFailurePolicy.rules[0].action", "requires the backoffLimitPerIndex to be set"},
		{"bad pod condition status", func(j *batchv1.Job) {
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionIgnore,
				OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: "Maybe"}}}}}
		}, "spec.podFailurePolicy.rules[0].onPodConditions[0].status", "Unsupported value"},
		{"bad pod condition type", func(j *batchv1.Job) {
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionIgnore,
				OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: "not a type!"}}}}}
		}, "spec.podFailurePolicy.rules[0].onPodConditions[0].type", "Invalid value"},
		{"failure policy with OnFailure", func(j *batchv1.Job) {
			j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: exitCodes(batchv1.PodFailurePolicyOnExitCodesOpIn, 1)}}}
		}, "spec.template.spec.restartPolicy", `only "Never" is supported when podFailurePolicy is specified`},
		{"failure policy with TerminatingOrFailed", func(j *batchv1.Job) {
			j.Spec.PodReplacementPolicy = ptr.To(batchv1.TerminatingOrFailed)
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: exitCodes(batchv1.PodFailurePolicyOnExitCodesOpIn, 1)}}}
		}, "spec.podReplacementPolicy", "Unsupported value"},
		{"unknown podReplacementPolicy", func(j *batchv1.Job) { j.Spec.PodReplacementPolicy = ptr.To(batchv1.PodReplacementPolicy("Always")) }, "spec.podReplacementPolicy", "Unsupported value"},
		{"successPolicy requires Indexed", func(j *batchv1.Job) {
			j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededCount: ptr.To[int32](1)}}}
		}, "spec.successPolicy", "requires indexed completion mode"},
		{"successPolicy without rules", func(j *batchv1.Job) {
			indexedJob(3)(j)
			j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{}
		}, "spec.successPolicy.rules", "at least one rules must be specified"},
		{"successPolicy rule without criteria", func(j *batchv1.Job) {
			indexedJob(3)(j)
			j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{}}}
		}, "spec.successPolicy.rules[0]", "at least one of succeededCount or succeededIndexes must be specified"},
		{"successPolicy index out of range", func(j *batchv1.Job) {
			indexedJob(3)(j)
			j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("0-5")}}}
		}, "spec.successPolicy.rules[0].succeededIndexes", `error parsing succeededIndexes: too large index: "5"`},
		{"successPolicy count above completions", func(j *batchv1.Job) {
			indexedJob(3)(j)
			j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededCount: ptr.To[int32](4)}}}
		}, "spec.successPolicy.rules[0].succeededCount", "must be less than or equal to 3 (the number of specified completions)"},
		{"successPolicy count above its indexes", func(j *batchv1.Job) {
			indexedJob(10)(j)
			j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("1,3"), SucceededCount: ptr.To[int32](3)}}}
		}, "spec.successPolicy.rules[0].succeededCount", "must be less than or equal to 2 (the number of indexes in the specified succeededIndexes field)"},
		{"restartPolicy Always", func(j *batchv1.Job) { j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways }, "spec.template.spec.restartPolicy", `Required value: valid values: "OnFailure", "Never"`},
		{"no containers", func(j *batchv1.Job) { j.Spec.Template.Spec.Containers = nil }, "spec.template.spec.containers", "Required value"},
		{"duplicate container names", func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].Name = "setup" }, "spec.template.spec.containers[0].name", "Duplicate value"},
		{"manual selector not matching labels", func(j *batchv1.Job) {
			j.Spec.ManualSelector = ptr.To(true)
			j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}
		}, "spec.template.metadata.labels", "`selector` does not match template `labels`"},
		{"manual selector missing", func(j *batchv1.Job) { j.Spec.ManualSelector = ptr.To(true) }, "spec.selector", "Required value"},
		{"generated selector with conflicting label", func(j *batchv1.Job) {
			j.Spec.Template.Labels = map[string]string{"batch.kubernetes.io/job-name": "other"}
		}, "spec.template.metadata.labels[batch.kubernetes.io/job-name]", "must be 'work'"},
		{"indexed hostname not a DNS label", func(j *batchv1.Job) {
			j.Name = strings.Repeat("a", 60)
			indexedJob(1000)(j)
		}, "metadata.name", "will not able to create pod with invalid DNS label"},
		{"invalid template label", func(j *batchv1.Job) { j.Spec.Template.Labels = map[string]string{"bad key!": "v"} }, "spec.template.labels", "Invalid value"},
		{"finalizer neither standard nor qualified", func(j *batchv1.Job) { j.Finalizers = []string{"foo"} }, "metadata.finalizers[0]", "name is neither a standard finalizer name nor is it fully qualified"},
		{"unknown restart policy fails the pod spec check too", func(j *batchv1.Job) { j.Spec.Template.Spec.RestartPolicy = "Bogus" }, "spec.template.spec.restartPolicy", `supported values: "Always", "OnFailure", "Never"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := validJob()
			tc.edit(job)
			DefaultJob(job)
			errs := ValidateJob(job)
			for _, e := range errs {
				if strings.HasPrefix(e.Field, tc.field) && strings.Contains(e.Error(), tc.message) {
					return
				}
			}
			t.Errorf("no %s error containing %q in %v", tc.field, tc.message, errs.ToAggregate())
		})
	}
}

// An unknown completion mode is reported alone, not with the per-index
// fields that need the Indexed mode.
func TestUnknownCompletionModeIsTheOnlyError(t *testing.T) {
	job := validJob()
	job.Spec.CompletionMode = ptr.To(batchv1.CompletionMode("Foo"))
	job.Spec.Completions = ptr.To[int32](3)
	job.Spec.BackoffLimitPerIndex = ptr.To[int32](1)
	job.Spec.MaxFailedIndexes = ptr.To[int32](1)
	DefaultJob(job)
	errs := ValidateJob(job)
	if len(errs) != 1 || errs[0].Field != "spec.completionMode" {
		t.Errorf("errors %v", errs.ToAggregate())
	}
}

func TestDefaultsAreTheAPIServers(t *testing.T) {
	job := validJob()
	DefaultJob(job)
	s := job.Spec
	if *s.Parallelism != 1 || *s.Completions != 1 || *s.BackoffLimit != 6 || *s.CompletionMode != batchv1.NonIndexedCompletion ||
		*s.Suspend || *s.PodReplacementPolicy != batchv1.TerminatingOrFailed || *s.ManualSelector {
		t.Errorf("defaults %+v", s)
	}

	job = validJob()
	job.Spec.Parallelism = ptr.To[int32](3)
	indexedJob(5)(job)
	job.Spec.BackoffLimitPerIndex = ptr.To[int32](1)
	job.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionIgnore,
		OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget}}}}}
	DefaultJob(job)
	s = job.Spec
	if *s.BackoffLimit != 2147483647 || *s.PodReplacementPolicy != batchv1.Failed || *s.Completions != 5 ||
		s.PodFailurePolicy.Rules[0].OnPodConditions[0].Status != corev1.ConditionTrue {
		t.Errorf("defaults %+v", s)
	}
}

func TestValidateIndexesFormat(t *testing.T) {
	cases := []struct {
		in    string
		total int32
		err   string
	}{
		{"", 0, ""},
		{"0", 1, ""},
		{"0,2-4,6", 5, ""},
		{"3-1", 0, "non-increasing order"},
		{"1,1", 0, "non-increasing order"},
		{"a", 0, "cannot convert string to integer"},
		{"1-2-3", 0, "at most two parts"},
		{"10", 0, "too large index"},
	}
	for _, tc := range cases {
		total, err := ValidateIndexesFormat(tc.in, 10)
		if tc.err == "" && (err != nil || total != tc.total) {
			t.Errorf("%q: %d, %v", tc.in, total, err)
		}
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%q: %v, want %s", tc.in, err, tc.err)
		}
	}
}
