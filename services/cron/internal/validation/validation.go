// Package validation is the API server's CronJob validation and defaulting
// (batch/v1 SetDefaults_CronJob, ValidateCronJobCreate and
// ValidateCronJobUpdate of v1.36, every feature enabled) applied to jobplane
// CronJobs, with the rules of jobplane's extensions. The CRD's schema holds
// what a schema can of it; CreateCronJob and UpdateCronJob check all of it,
// with the reference's messages and field paths.
package validation

import (
	"fmt"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/lib/jobvalidation"
	"github.com/jobplane/jobplane/services/cron/internal/schedule"
)

const (
	// maxNameLength leaves room for the 11 characters ("-" and the minutes
	// since the epoch) the controller appends to name a Job, whose name is
	// at most 63.
	maxNameLength = 52
	// maxGeneratedNameLength is the longest generateName prefix the API
	// server keeps before adding its five random characters.
	maxGeneratedNameLength = 58
	// generatedSuffix stands for the random characters of a generated name.
	generatedSuffix = "xxxxx"
)

// Defaults of SetDefaults_CronJob.
const (
	DefaultSuccessfulJobsHistoryLimit = 3
	DefaultFailedJobsHistoryLimit     = 1
)

// tzWithTimeZoneDetail is the API server's reason to refuse TZ in a
// schedule beside the timeZone field.
const tzWithTimeZoneDetail = "cannot use both timeZone field and TZ or CRON_TZ in schedule"

var (
	concurrencyPolicies = []batchv1.ConcurrencyPolicy{
		batchv1.AllowConcurrent, batchv1.ForbidConcurrent, batchv1.ReplaceConcurrent, cronapi.BufferOne, cronapi.BufferAll,
	}
	catchUpPolicies = []string{cronapi.CatchUpLatest, cronapi.CatchUpSkip, cronapi.CatchUpAll}
	skippedHours    = []string{cronapi.SkippedHourSkip, cronapi.SkippedHourRunAtNextValidTime}
	repeatedHours   = []string{cronapi.RepeatedHourTwice, cronapi.RepeatedHourOnce}
)

// Default applies the API server's CronJob defaults in place, those the
// CRD's schema gives too, and the defaults of the Job template's nested
// types, which the schema cannot see.
func Default(c *cronapi.CronJob) {
	spec := &c.Spec
	if spec.ConcurrencyPolicy == "" {
		spec.ConcurrencyPolicy = batchv1.AllowConcurrent
	}
	if spec.Suspend == nil {
		spec.Suspend = ptr.To(false)
	}
	if spec.SuccessfulJobsHistoryLimit == nil {
		spec.SuccessfulJobsHistoryLimit = ptr.To[int32](DefaultSuccessfulJobsHistoryLimit)
	}
	if spec.FailedJobsHistoryLimit == nil {
		spec.FailedJobsHistoryLimit = ptr.To[int32](DefaultFailedJobsHistoryLimit)
	}
	jobvalidation.DefaultJobTemplate(&spec.JobTemplate)
}

// ValidateCronJobCreate checks a defaulted CronJob to be created.
func ValidateCronJobCreate(c *cronapi.CronJob) field.ErrorList {
	meta := c.ObjectMeta.DeepCopy()
	if meta.Name == "" && meta.GenerateName != "" {
		// The API server names the object before validating it.
		meta.Name = meta.GenerateName[:min(len(meta.GenerateName), maxGeneratedNameLength)] + generatedSuffix
	}
	namePath := field.NewPath("metadata", "name")
	allErrs := apimachineryvalidation.ValidateObjectMeta(meta, true, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	allErrs = append(allErrs, validateSpec(&c.Spec, nil, field.NewPath("spec"))...)
	if len(meta.Name) > maxNameLength {
		allErrs = append(allErrs, field.Invalid(namePath, meta.Name, fmt.Sprintf("must be no more than %d characters", maxNameLength)))
	}
	return allErrs
}

// ValidateCronJobUpdate checks a defaulted CronJob replacing old. As in the
// reference, the name length is not checked (older CronJobs may be longer),
// the time zone only when it changes, and TZ in the schedule is allowed when
// old had it.
func ValidateCronJobUpdate(c, old *cronapi.CronJob) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&c.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	return append(allErrs, validateSpec(&c.Spec, &old.Spec, field.NewPath("spec"))...)
}

// validateSpec is the reference's validateCronJobSpec plus the extensions;
// oldSpec is nil on create.
func validateSpec(spec, oldSpec *cronapi.CronJobSpec, fldPath *field.Path) field.ErrorList {
	allErrs := validateScheduleAndTimeZone(spec, oldSpec, fldPath)
	if spec.ConcurrencyPolicy == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("concurrencyPolicy"), ""))
	}
	allErrs = append(allErrs, jobvalidation.ValidateJobTemplateSpec(&spec.JobTemplate, fldPath.Child("jobTemplate"))...)
	allErrs = append(allErrs, ValidateSyncedFields(spec, fldPath)...)
	return append(allErrs, ValidateExtensions(spec, fldPath)...)
}

// ValidateSyncedFields checks the batch/v1 fields a sync reads as numbers
// or choices, which the API server never stores out of range: the deadline
// and history limits not negative, a known concurrency policy (empty is
// Allow, the default). PlanCronJob's CronJobs come from callers, not from
// the API server; the schedule and time zone are left to the sync, which
// reports them with the reference's events.
func ValidateSyncedFields(spec *cronapi.CronJobSpec, fldPath *field.Path) field.ErrorList {
	allErrs := validateNonnegative(spec.StartingDeadlineSeconds, fldPath.Child("startingDeadlineSeconds"))
	if spec.ConcurrencyPolicy != "" {
		allErrs = append(allErrs, validateConcurrencyPolicy(spec.ConcurrencyPolicy, fldPath.Child("concurrencyPolicy"))...)
	}
	allErrs = append(allErrs, validateNonnegative(spec.SuccessfulJobsHistoryLimit, fldPath.Child("successfulJobsHistoryLimit"))...)
	return append(allErrs, validateNonnegative(spec.FailedJobsHistoryLimit, fldPath.Child("failedJobsHistoryLimit"))...)
}

// ValidateExtensions checks the fields of spec beyond batch/v1's: the
// catch-up, jitter and daylight-saving policies (a batch/v1 CronJob's come
// from its annotations).
func ValidateExtensions(spec *cronapi.CronJobSpec, fldPath *field.Path) field.ErrorList {
	allErrs := validateCatchUp(spec.CatchUp, fldPath.Child("catchUp"))
	allErrs = append(allErrs, validateNonnegative(spec.JitterSeconds, fldPath.Child("jitterSeconds"))...)
	return append(allErrs, ValidateDaylightSaving(spec.DaylightSaving, fldPath.Child("daylightSaving"))...)
}

// ValidateConcurrencyPolicy checks a concurrency policy: batch/v1's three
// or jobplane's buffers.
func ValidateConcurrencyPolicy(policy batchv1.ConcurrencyPolicy, fldPath *field.Path) field.ErrorList {
	return validateConcurrencyPolicy(policy, fldPath)
}

// validateScheduleAndTimeZone parses the schedule in its zone as the cron
// service will, and keeps of the problems those the reference reports: on
// update, TZ in the schedule is allowed when the old schedule had it (but
// not with timeZone), and the zone is checked only when it changed.
func validateScheduleAndTimeZone(spec, oldSpec *cronapi.CronJobSpec, fldPath *field.Path) field.ErrorList {
	schedulePath, zonePath := fldPath.Child("schedule"), fldPath.Child("timeZone")
	allowTZInSchedule := oldSpec != nil && strings.Contains(oldSpec.Schedule, "TZ")
	zoneUnchanged := oldSpec != nil && ptr.Equal(oldSpec.TimeZone, spec.TimeZone)
	_, parseErrs := schedule.Parse(spec.Schedule, spec.TimeZone, schedule.Fields{Schedule: schedulePath, TimeZone: zonePath})
	var allErrs field.ErrorList
	for _, err := range parseErrs {
		switch {
		case err.Field == schedulePath.String() && allowTZInSchedule && err.Detail == schedule.TZInScheduleDetail:
		case err.Field == zonePath.String() && zoneUnchanged:
		default:
			allErrs = append(allErrs, err)
		}
	}
	if allowTZInSchedule && strings.Contains(spec.Schedule, "TZ") && spec.TimeZone != nil {
		allErrs = append(allErrs, field.Invalid(schedulePath, spec.Schedule, tzWithTimeZoneDetail))
	}
	return allErrs
}

func validateConcurrencyPolicy(policy batchv1.ConcurrencyPolicy, fldPath *field.Path) field.ErrorList {
	switch {
	case policy == "":
		return field.ErrorList{field.Required(fldPath, "")}
	case !slices.Contains(concurrencyPolicies, policy):
		return field.ErrorList{field.NotSupported(fldPath, policy, concurrencyPolicies)}
	}
	return nil
}

// validateCatchUp: the policy is one of the known ones (empty means
// Latest), the window is not negative, max runs within 1 and MaxMaxRuns.
func validateCatchUp(catchUp *cronapi.CatchUpPolicy, fldPath *field.Path) field.ErrorList {
	if catchUp == nil {
		return nil
	}
	allErrs := validateOptionalEnum(catchUp.Policy, catchUpPolicies, fldPath.Child("policy"))
	allErrs = append(allErrs, validateNonnegative(catchUp.WindowSeconds, fldPath.Child("windowSeconds"))...)
	if m := catchUp.MaxRuns; m != nil && (*m < 1 || *m > cronapi.MaxMaxRuns) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("maxRuns"), *m, fmt.Sprintf("must be between 1 and %d", cronapi.MaxMaxRuns)))
	}
	return allErrs
}

// ValidateDaylightSaving checks a daylight-saving policy (a CronJob's, or
// PreviewSchedule's).
func ValidateDaylightSaving(ds *cronapi.DaylightSavingPolicy, fldPath *field.Path) field.ErrorList {
	if ds == nil {
		return nil
	}
	allErrs := validateOptionalEnum(ds.SkippedHour, skippedHours, fldPath.Child("skippedHour"))
	return append(allErrs, validateOptionalEnum(ds.RepeatedHour, repeatedHours, fldPath.Child("repeatedHour"))...)
}

// validateOptionalEnum: empty means the default; anything else is one of
// supported.
func validateOptionalEnum(value string, supported []string, fldPath *field.Path) field.ErrorList {
	if value != "" && !slices.Contains(supported, value) {
		return field.ErrorList{field.NotSupported(fldPath, value, supported)}
	}
	return nil
}

func validateNonnegative[T int32 | int64](value *T, fldPath *field.Path) field.ErrorList {
	if value == nil {
		return nil
	}
	return apimachineryvalidation.ValidateNonnegativeField(int64(*value), fldPath)
}
