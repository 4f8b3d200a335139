package jobvalidation

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Limits of the API server's Job validation.
const (
	// maxGeneratedNameLength is the longest generateName prefix the API
	// server keeps before adding its random suffix.
	maxGeneratedNameLength = 58

	// MaxParallelismForIndexedJob is the highest parallelism of an Indexed
	// Job.
	MaxParallelismForIndexedJob = 100_000

	maxFailedIndexesForIndexedJob           = 100_000
	completionsSoftLimit                    = 100_000
	parallelismLimitForHighCompletions      = 10_000
	maxFailedIndexesLimitForHighCompletions = 10_000
	maxManagedByLength                      = 63

	// The API server's bounds of pod failure and success policies, which
	// also bound the work of matching pods to them.
	MaxPodFailurePolicyRules             = 20
	MaxPodFailurePolicyOnExitCodesValues = 255
	MaxPodFailurePolicyOnPodConditions   = 20
	MaxSucceededIndexesLength            = 64 * 1024
	MaxSuccessPolicyRules                = 20
)

// The labels the API server added to Jobs' pods before the
// batch.kubernetes.io/ prefixed ones; it still adds both.
const (
	legacyJobNameLabel       = "job-name"
	legacyControllerUIDLabel = "controller-uid"
)

var (
	podFailurePolicyActions = []string{
		string(batchv1.PodFailurePolicyActionCount), string(batchv1.PodFailurePolicyActionFailIndex),
		string(batchv1.PodFailurePolicyActionFailJob), string(batchv1.PodFailurePolicyActionIgnore),
	}
	onExitCodesOperators = []string{string(batchv1.PodFailurePolicyOnExitCodesOpIn), string(batchv1.PodFailurePolicyOnExitCodesOpNotIn)}
	conditionStatuses    = []string{string(corev1.ConditionFalse), string(corev1.ConditionTrue), string(corev1.ConditionUnknown)}
)

// ValidateJob checks a defaulted Job as the API server does when it is
// created (batch ValidateJob, with the selector generated as PrepareForCreate
// does when manualSelector is false). Pod spec checks cover what the Job
// controller relies on: containers, their names, the restart policy; the
// rest of a PodSpec is the API server's to check.
func ValidateJob(job *batchv1.Job) field.ErrorList {
	job = job.DeepCopy()
	if job.UID == "" {
		// The API server assigns the UID before validating; any will do.
		job.UID = "00000000-0000-0000-0000-000000000000"
	}
	if job.Name == "" && job.GenerateName != "" {
		// So does it the name, from generateName and five random characters.
		job.Name = job.GenerateName[:min(len(job.GenerateName), maxGeneratedNameLength)] + "xxxxx"
	}
	if job.Spec.ManualSelector == nil || !*job.Spec.ManualSelector {
		generateSelector(job)
	}
	allErrs := apimachineryvalidation.ValidateObjectMeta(&job.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	allErrs = append(allErrs, validateKubeFinalizerNames(job.Finalizers, field.NewPath("metadata", "finalizers"))...)
	allErrs = append(allErrs, validateGeneratedSelector(job)...)
	allErrs = append(allErrs, validateJobSpecWithSelector(&job.Spec, field.NewPath("spec"))...)
	if isIndexed(&job.Spec) && job.Spec.Completions != nil && *job.Spec.Completions > 0 {
		// Pods of index completions-1 get the hostname "<name>-<index>".
		maxHostname := fmt.Sprintf("%s-%d", job.Name, *job.Spec.Completions-1)
		if errs := utilvalidation.IsDNS1123Label(maxHostname); len(errs) > 0 {
			allErrs = append(allErrs, field.Invalid(field.NewPath("metadata", "name"), job.Name,
				fmt.Sprintf("will not able to create pod with invalid DNS label: %s", maxHostname)))
		}
	}
	return allErrs
}

// standardFinalizers are the finalizer names core/v1 allows without a
// domain.
var standardFinalizers = []string{"kubernetes", metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents}

// validateKubeFinalizerNames: a finalizer name without a '/' must be a
// standard one, as core's object metadata validation requires.
func validateKubeFinalizerNames(finalizers []string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, f := range finalizers {
		if !strings.Contains(f, "/") && !slices.Contains(standardFinalizers, f) {
			allErrs = append(allErrs, field.Invalid(fldPath.Index(i), f, "name is neither a standard finalizer name nor is it fully qualified"))
		}
	}
	return allErrs
}

// generateSelector adds the controller-uid and job-name labels to the
// template and selects on the controller uid, as the API server does.
func generateSelector(job *batchv1.Job) {
	if job.Spec.Template.Labels == nil {
		job.Spec.Template.Labels = map[string]string{}
	}
	for _, l := range []string{legacyJobNameLabel, batchv1.JobNameLabel} {
		if _, ok := job.Spec.Template.Labels[l]; !ok {
			job.Spec.Template.Labels[l] = job.Name
		}
	}
	for _, l := range []string{legacyControllerUIDLabel, batchv1.ControllerUidLabel} {
		if _, ok := job.Spec.Template.Labels[l]; !ok {
			job.Spec.Template.Labels[l] = string(job.UID)
		}
	}
	if job.Spec.Selector == nil {
		job.Spec.Selector = &metav1.LabelSelector{}
	}
	if job.Spec.Selector.MatchLabels == nil {
		job.Spec.Selector.MatchLabels = map[string]string{}
	}
	if _, ok := job.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel]; !ok {
		job.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel] = string(job.UID)
	}
}

// validateGeneratedSelector: with a generated selector the template carries
// the generated labels and the selector matches them.
func validateGeneratedSelector(job *batchv1.Job) field.ErrorList {
	var allErrs field.ErrorList
	if job.Spec.ManualSelector != nil && *job.Spec.ManualSelector || job.Spec.Selector == nil {
		return allErrs
	}
	templatePath := field.NewPath("spec", "template", "metadata")
	expected := map[string]string{
		legacyControllerUIDLabel:   string(job.UID),
		legacyJobNameLabel:         job.Name,
		batchv1.ControllerUidLabel: string(job.UID),
		batchv1.JobNameLabel:       job.Name,
	}
	for _, l := range []string{legacyControllerUIDLabel, legacyJobNameLabel, batchv1.ControllerUidLabel, batchv1.JobNameLabel} {
		allErrs = append(allErrs, validateHasLabel(job.Spec.Template.ObjectMeta, templatePath, l, expected[l])...)
	}
	if selector, err := metav1.LabelSelectorAsSelector(job.Spec.Selector); err == nil && !selector.Matches(labels.Set(expected)) {
		allErrs = append(allErrs, field.Invalid(field.NewPath("spec", "selector"), job.Spec.Selector, "`selector` not auto-generated"))
	}
	return allErrs
}

func validateHasLabel(meta metav1.ObjectMeta, fldPath *field.Path, key, expected string) field.ErrorList {
	actual, found := meta.Labels[key]
	if !found {
		return field.ErrorList{field.Required(fldPath.Child("labels").Key(key), fmt.Sprintf("must be '%s'", expected))}
	}
	if actual != expected {
		return field.ErrorList{field.Invalid(fldPath.Child("labels").Key(key), meta.Labels, fmt.Sprintf("must be '%s'", expected))}
	}
	return nil
}

// ValidateJobTemplateSpec checks the Job template of a CronJob as the API
// server does (batch ValidateJobTemplateSpec): the Job spec under fldPath's
// spec, by the checks a Job's spec gets, with a selector left to generate.
// The template's metadata is not checked, as in the reference.
func ValidateJobTemplateSpec(template *batchv1.JobTemplateSpec, fldPath *field.Path) field.ErrorList {
	specPath := fldPath.Child("spec")
	allErrs := validateJobSpec(&template.Spec, specPath)
	if template.Spec.Selector != nil {
		allErrs = append(allErrs, field.Invalid(specPath.Child("selector"), template.Spec.Selector, "`selector` will be auto-generated"))
	}
	if template.Spec.ManualSelector != nil && *template.Spec.ManualSelector {
		allErrs = append(allErrs, field.NotSupported(specPath.Child("manualSelector"), template.Spec.ManualSelector, []string{"nil", "false"}))
	}
	return allErrs
}

func validateJobSpecWithSelector(spec *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	allErrs := validateJobSpec(spec, fldPath)
	if spec.Selector == nil {
		allErrs = append(allErrs, field.Required(fldPath.Child("selector"), ""))
	} else {
		allErrs = append(allErrs, metavalidation.ValidateLabelSelector(spec.Selector, metavalidation.LabelSelectorValidationOptions{}, fldPath.Child("selector"))...)
	}
	if selector, err := metav1.LabelSelectorAsSelector(spec.Selector); err == nil && !selector.Matches(labels.Set(spec.Template.Labels)) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("template", "metadata", "labels"), spec.Template.Labels, "`selector` does not match template `labels`"))
	}
	return allErrs
}

func validateJobSpec(spec *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	nonNegative := func(v *int32, name string) {
		if v != nil {
			allErrs = append(allErrs, apimachineryvalidation.ValidateNonnegativeField(int64(*v), fldPath.Child(name))...)
		}
	}
	nonNegative(spec.Parallelism, "parallelism")
	nonNegative(spec.Completions, "completions")
	if spec.ActiveDeadlineSeconds != nil {
		allErrs = append(allErrs, apimachineryvalidation.ValidateNonnegativeField(*spec.ActiveDeadlineSeconds, fldPath.Child("activeDeadlineSeconds"))...)
	}
	nonNegative(spec.BackoffLimit, "backoffLimit")
	nonNegative(spec.TTLSecondsAfterFinished, "ttlSecondsAfterFinished")
	nonNegative(spec.BackoffLimitPerIndex, "backoffLimitPerIndex")
	if spec.MaxFailedIndexes != nil {
		nonNegative(spec.MaxFailedIndexes, "maxFailedIndexes")
		if spec.BackoffLimitPerIndex == nil {
			allErrs = append(allErrs, field.Required(fldPath.Child("backoffLimitPerIndex"), "when maxFailedIndexes is specified"))
		}
	}
	if spec.ManagedBy != nil {
		allErrs = append(allErrs, utilvalidation.IsDomainPrefixedPath(fldPath.Child("managedBy"), *spec.ManagedBy)...)
		if len(*spec.ManagedBy) > maxManagedByLength {
			allErrs = append(allErrs, field.TooLong(fldPath.Child("managedBy"), "", maxManagedByLength))
		}
	}
	allErrs = append(allErrs, validateCompletionMode(spec, fldPath)...)
	if spec.PodFailurePolicy != nil {
		allErrs = append(allErrs, validatePodFailurePolicy(spec, fldPath.Child("podFailurePolicy"))...)
	}
	if spec.SuccessPolicy != nil {
		if !isIndexed(spec) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("successPolicy"), *spec.SuccessPolicy, "requires indexed completion mode"))
		} else {
			allErrs = append(allErrs, validateSuccessPolicy(spec, fldPath.Child("successPolicy"))...)
		}
	}
	allErrs = append(allErrs, validatePodReplacementPolicy(spec, fldPath.Child("podReplacementPolicy"))...)
	allErrs = append(allErrs, validatePodTemplate(&spec.Template, fldPath.Child("template"))...)

	restartPolicy := spec.Template.Spec.RestartPolicy
	restartPath := fldPath.Child("template", "spec", "restartPolicy")
	if restartPolicy != "" && !slices.Contains([]corev1.RestartPolicy{corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}, restartPolicy) {
		// The pod spec's own check, before the Job's.
		allErrs = append(allErrs, field.NotSupported(restartPath, restartPolicy, []corev1.RestartPolicy{corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}))
	}
	switch {
	case restartPolicy == corev1.RestartPolicyAlways || restartPolicy == "":
		allErrs = append(allErrs, field.Required(restartPath, fmt.Sprintf("valid values: %q, %q", corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever)))
	case restartPolicy != corev1.RestartPolicyOnFailure && restartPolicy != corev1.RestartPolicyNever:
		allErrs = append(allErrs, field.NotSupported(restartPath, restartPolicy, []corev1.RestartPolicy{corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}))
	case spec.PodFailurePolicy != nil && restartPolicy != corev1.RestartPolicyNever:
		allErrs = append(allErrs, field.Invalid(restartPath, restartPolicy, fmt.Sprintf("only %q is supported when podFailurePolicy is specified", corev1.RestartPolicyNever)))
	}
	return allErrs
}

func validateCompletionMode(spec *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if spec.CompletionMode != nil {
		mode := *spec.CompletionMode
		if mode != batchv1.NonIndexedCompletion && mode != batchv1.IndexedCompletion {
			allErrs = append(allErrs, field.NotSupported(fldPath.Child("completionMode"), mode, []batchv1.CompletionMode{batchv1.NonIndexedCompletion, batchv1.IndexedCompletion}))
		}
		if mode == batchv1.IndexedCompletion {
			if spec.Completions == nil {
				allErrs = append(allErrs, field.Required(fldPath.Child("completions"), fmt.Sprintf("when completion mode is %s", batchv1.IndexedCompletion)))
			}
			if spec.Parallelism != nil && *spec.Parallelism > MaxParallelismForIndexedJob {
				allErrs = append(allErrs, field.Invalid(fldPath.Child("parallelism"), *spec.Parallelism,
					fmt.Sprintf("must be less than or equal to %d when completion mode is %s", MaxParallelismForIndexedJob, batchv1.IndexedCompletion)))
			}
			if spec.Completions != nil && spec.MaxFailedIndexes != nil && *spec.MaxFailedIndexes > *spec.Completions {
				allErrs = append(allErrs, field.Invalid(fldPath.Child("maxFailedIndexes"), *spec.MaxFailedIndexes, "must be less than or equal to completions"))
			}
			if spec.MaxFailedIndexes != nil && *spec.MaxFailedIndexes > maxFailedIndexesForIndexedJob {
				allErrs = append(allErrs, field.Invalid(fldPath.Child("maxFailedIndexes"), *spec.MaxFailedIndexes,
					fmt.Sprintf("must be less than or equal to %d", maxFailedIndexesForIndexedJob)))
			}
			if spec.Completions != nil && *spec.Completions > completionsSoftLimit && spec.BackoffLimitPerIndex != nil {
				if spec.MaxFailedIndexes == nil {
					allErrs = append(allErrs, field.Required(fldPath.Child("maxFailedIndexes"), fmt.Sprintf("must be specified when completions is above %d", completionsSoftLimit)))
				}
				if spec.Parallelism != nil && *spec.Parallelism > parallelismLimitForHighCompletions {
					allErrs = append(allErrs, field.Invalid(fldPath.Child("parallelism"), *spec.Parallelism,
						fmt.Sprintf("must be less than or equal to %d when completions are above %d and used with backoff limit per index", parallelismLimitForHighCompletions, completionsSoftLimit)))
				}
				if spec.MaxFailedIndexes != nil && *spec.MaxFailedIndexes > maxFailedIndexesLimitForHighCompletions {
					allErrs = append(allErrs, field.Invalid(fldPath.Child("maxFailedIndexes"), *spec.MaxFailedIndexes,
						fmt.Sprintf("must be less than or equal to %d when completions are above %d and used with backoff limit per index", maxFailedIndexesLimitForHighCompletions, completionsSoftLimit)))
				}
			}
		}
	}
	if spec.CompletionMode == nil || *spec.CompletionMode == batchv1.NonIndexedCompletion {
		if spec.BackoffLimitPerIndex != nil {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("backoffLimitPerIndex"), *spec.BackoffLimitPerIndex, "requires indexed completion mode"))
		}
		if spec.MaxFailedIndexes != nil {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("maxFailedIndexes"), *spec.MaxFailedIndexes, "requires indexed completion mode"))
		}
	}
	return allErrs
}

func validatePodFailurePolicy(spec *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	rulesPath := fldPath.Child("rules")
	if n := len(spec.PodFailurePolicy.Rules); n > MaxPodFailurePolicyRules {
		allErrs = append(allErrs, field.TooMany(rulesPath, n, MaxPodFailurePolicyRules))
	}
	containerNames := map[string]bool{}
	for _, c := range spec.Template.Spec.Containers {
		containerNames[c.Name] = true
	}
	for _, c := range spec.Template.Spec.InitContainers {
		containerNames[c.Name] = true
	}
	for i := range spec.PodFailurePolicy.Rules {
		allErrs = append(allErrs, validatePodFailurePolicyRule(spec, &spec.PodFailurePolicy.Rules[i], rulesPath.Index(i), containerNames)...)
	}
	return allErrs
}

func validatePodFailurePolicyRule(spec *batchv1.JobSpec, rule *batchv1.PodFailurePolicyRule, rulePath *field.Path, containerNames map[string]bool) field.ErrorList {
	var allErrs field.ErrorList
	actionPath := rulePath.Child("action")
	switch {
	case rule.Action == "":
		allErrs = append(allErrs, field.Required(actionPath, fmt.Sprintf("valid values: %q", podFailurePolicyActions)))
	case rule.Action == batchv1.PodFailurePolicyActionFailIndex:
		if spec.BackoffLimitPerIndex == nil {
			allErrs = append(allErrs, field.Invalid(actionPath, rule.Action, "requires the backoffLimitPerIndex to be set"))
		}
	case !slices.Contains(podFailurePolicyActions, string(rule.Action)):
		allErrs = append(allErrs, field.NotSupported(actionPath, rule.Action, podFailurePolicyActions))
	}
	if rule.OnExitCodes != nil {
		allErrs = append(allErrs, validateOnExitCodes(rule.OnExitCodes, rulePath.Child("onExitCodes"), containerNames)...)
	}
	if len(rule.OnPodConditions) > 0 {
		allErrs = append(allErrs, validateOnPodConditions(rule.OnPodConditions, rulePath.Child("onPodConditions"))...)
	}
	if rule.OnExitCodes != nil && len(rule.OnPodConditions) > 0 {
		allErrs = append(allErrs, field.Invalid(rulePath, field.OmitValueType{}, "specifying both OnExitCodes and OnPodConditions is not supported"))
	}
	if rule.OnExitCodes == nil && len(rule.OnPodConditions) == 0 {
		allErrs = append(allErrs, field.Invalid(rulePath, field.OmitValueType{}, "specifying one of OnExitCodes and OnPodConditions is required"))
	}
	return allErrs
}

func validateOnPodConditions(patterns []batchv1.PodFailurePolicyOnPodConditionsPattern, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if len(patterns) > MaxPodFailurePolicyOnPodConditions {
		allErrs = append(allErrs, field.TooMany(fldPath, len(patterns), MaxPodFailurePolicyOnPodConditions))
	}
	for j, p := range patterns {
		patternPath := fldPath.Index(j)
		for _, msg := range utilvalidation.IsQualifiedName(string(p.Type)) {
			allErrs = append(allErrs, field.Invalid(patternPath.Child("type"), p.Type, msg))
		}
		statusPath := patternPath.Child("status")
		if p.Status == "" {
			allErrs = append(allErrs, field.Required(statusPath, fmt.Sprintf("valid values: %q", conditionStatuses)))
		} else if !slices.Contains(conditionStatuses, string(p.Status)) {
			allErrs = append(allErrs, field.NotSupported(statusPath, p.Status, conditionStatuses))
		}
	}
	return allErrs
}

func validateOnExitCodes(req *batchv1.PodFailurePolicyOnExitCodesRequirement, fldPath *field.Path, containerNames map[string]bool) field.ErrorList {
	var allErrs field.ErrorList
	operatorPath := fldPath.Child("operator")
	if req.Operator == "" {
		allErrs = append(allErrs, field.Required(operatorPath, fmt.Sprintf("valid values: %q", onExitCodesOperators)))
	} else if !slices.Contains(onExitCodesOperators, string(req.Operator)) {
		allErrs = append(allErrs, field.NotSupported(operatorPath, req.Operator, onExitCodesOperators))
	}
	if req.ContainerName != nil && !containerNames[*req.ContainerName] {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("containerName"), *req.ContainerName, "must be one of the container or initContainer names in the pod template"))
	}
	valuesPath := fldPath.Child("values")
	if len(req.Values) == 0 {
		allErrs = append(allErrs, field.Invalid(valuesPath, req.Values, "at least one value is required"))
	} else if len(req.Values) > MaxPodFailurePolicyOnExitCodesValues {
		allErrs = append(allErrs, field.TooMany(valuesPath, len(req.Values), MaxPodFailurePolicyOnExitCodesValues))
	}
	ordered := true
	seen := map[int32]bool{}
	for j, v := range req.Values {
		valuePath := valuesPath.Index(j)
		if req.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn && v == 0 {
			allErrs = append(allErrs, field.Invalid(valuePath, v, "must not be 0 for the In operator"))
		}
		if seen[v] {
			allErrs = append(allErrs, field.Duplicate(valuePath, v))
		} else {
			seen[v] = true
		}
		if j > 0 && req.Values[j-1] > v {
			ordered = false
		}
	}
	if !ordered {
		allErrs = append(allErrs, field.Invalid(valuesPath, req.Values, "must be ordered"))
	}
	return allErrs
}

func validateSuccessPolicy(spec *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	rulesPath := fldPath.Child("rules")
	if len(spec.SuccessPolicy.Rules) == 0 {
		allErrs = append(allErrs, field.Required(rulesPath, "at least one rules must be specified when the successPolicy is specified"))
	}
	if n := len(spec.SuccessPolicy.Rules); n > MaxSuccessPolicyRules {
		allErrs = append(allErrs, field.TooMany(rulesPath, n, MaxSuccessPolicyRules))
	}
	completions := int32(0)
	if spec.Completions != nil {
		completions = *spec.Completions
	}
	for i, rule := range spec.SuccessPolicy.Rules {
		rulePath := rulesPath.Index(i)
		if rule.SucceededCount == nil && rule.SucceededIndexes == nil {
			allErrs = append(allErrs, field.Required(rulePath, "at least one of succeededCount or succeededIndexes must be specified"))
		}
		var totalIndexes int32
		if rule.SucceededIndexes != nil {
			indexesPath := rulePath.Child("succeededIndexes")
			if len(*rule.SucceededIndexes) > MaxSucceededIndexesLength {
				allErrs = append(allErrs, field.TooLong(indexesPath, "", MaxSucceededIndexesLength))
			}
			var err error
			if totalIndexes, err = ValidateIndexesFormat(*rule.SucceededIndexes, completions); err != nil {
				allErrs = append(allErrs, field.Invalid(indexesPath, *rule.SucceededIndexes, fmt.Sprintf("error parsing succeededIndexes: %s", err.Error())))
			}
		}
		if rule.SucceededCount != nil {
			countPath := rulePath.Child("succeededCount")
			allErrs = append(allErrs, apimachineryvalidation.ValidateNonnegativeField(int64(*rule.SucceededCount), countPath)...)
			if *rule.SucceededCount > completions {
				allErrs = append(allErrs, field.Invalid(countPath, *rule.SucceededCount, fmt.Sprintf("must be less than or equal to %d (the number of specified completions)", completions)))
			}
			if rule.SucceededIndexes != nil && *rule.SucceededCount > totalIndexes {
				allErrs = append(allErrs, field.Invalid(countPath, *rule.SucceededCount, fmt.Sprintf("must be less than or equal to %d (the number of indexes in the specified succeededIndexes field)", totalIndexes)))
			}
		}
	}
	return allErrs
}

func validatePodReplacementPolicy(spec *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	if spec.PodReplacementPolicy == nil {
		return nil
	}
	prp := *spec.PodReplacementPolicy
	if spec.PodFailurePolicy != nil {
		if prp != batchv1.Failed {
			return field.ErrorList{field.NotSupported(fldPath, prp, []batchv1.PodReplacementPolicy{batchv1.Failed})}
		}
		return nil
	}
	if prp != batchv1.Failed && prp != batchv1.TerminatingOrFailed {
		return field.ErrorList{field.NotSupported(fldPath, prp, []batchv1.PodReplacementPolicy{batchv1.Failed, batchv1.TerminatingOrFailed})}
	}
	return nil
}

// validatePodTemplate covers the template's metadata and the parts of its
// spec the Job controller depends on.
func validatePodTemplate(t *corev1.PodTemplateSpec, fldPath *field.Path) field.ErrorList {
	allErrs := metavalidation.ValidateLabels(t.Labels, fldPath.Child("labels"))
	allErrs = append(allErrs, apimachineryvalidation.ValidateAnnotations(t.Annotations, fldPath.Child("annotations"))...)
	specPath := fldPath.Child("spec")
	if len(t.Spec.Containers) == 0 {
		allErrs = append(allErrs, field.Required(specPath.Child("containers"), ""))
	}
	names := map[string]bool{}
	checkNames := func(containers []corev1.Container, path *field.Path) {
		for i, c := range containers {
			namePath := path.Index(i).Child("name")
			switch {
			case c.Name == "":
				allErrs = append(allErrs, field.Required(namePath, ""))
			case len(utilvalidation.IsDNS1123Label(c.Name)) > 0:
				for _, msg := range utilvalidation.IsDNS1123Label(c.Name) {
					allErrs = append(allErrs, field.Invalid(namePath, c.Name, msg))
				}
			case names[c.Name]:
				allErrs = append(allErrs, field.Duplicate(namePath, c.Name))
			default:
				names[c.Name] = true
			}
		}
	}
	checkNames(t.Spec.InitContainers, specPath.Child("initContainers"))
	checkNames(t.Spec.Containers, specPath.Child("containers"))
	if len(t.Spec.EphemeralContainers) > 0 {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("ephemeralContainers"), "ephemeral containers not allowed in pod template"))
	}
	return allErrs
}

// ValidateIndexesFormat checks an interval string ("1,3-5") against
// completions and returns the number of indexes in it.
func ValidateIndexesFormat(indexes string, completions int32) (int32, error) {
	if indexes == "" {
		return 0, nil
	}
	var last *int32
	var total int32
	for part := range strings.SplitSeq(indexes, ",") {
		x, y, err := parseIndexInterval(part, completions)
		if err != nil {
			return 0, err
		}
		if last != nil && *last >= x {
			return 0, fmt.Errorf("non-increasing order, previous: %d, current: %d", *last, x)
		}
		total += y - x + 1
		last = &y
	}
	return total, nil
}

func parseIndexInterval(s string, completions int32) (int32, int32, error) {
	limits := strings.Split(s, "-")
	if len(limits) > 2 {
		return 0, 0, fmt.Errorf("the fragment %q violates the requirement that an index interval can have at most two parts separated by '-'", s)
	}
	x, err := strconv.Atoi(limits[0])
	if err != nil {
		return 0, 0, fmt.Errorf("cannot convert string to integer for index: %q", limits[0])
	}
	if x >= int(completions) {
		return 0, 0, fmt.Errorf("too large index: %q", limits[0])
	}
	if len(limits) == 1 {
		return int32(x), int32(x), nil
	}
	y, err := strconv.Atoi(limits[1])
	if err != nil {
		return 0, 0, fmt.Errorf("cannot convert string to integer for index: %q", limits[1])
	}
	if y >= int(completions) {
		return 0, 0, fmt.Errorf("too large index: %q", limits[1])
	}
	if x >= y {
		return 0, 0, fmt.Errorf("non-increasing order, previous: %d, current: %d", x, y)
	}
	return int32(x), int32(y), nil
}

func isIndexed(spec *batchv1.JobSpec) bool {
	return spec.CompletionMode != nil && *spec.CompletionMode == batchv1.IndexedCompletion
}
