// Package validation holds the planner's checks of a PlanSync snapshot: its
// shape as an executor observing a cluster would send it. Errors are
// field.ErrorList with Kubernetes JSON paths. A Job's own validation is lib/jobvalidation's.
package validation

import (
	"fmt"

	"google.golang.org/protobuf/types/known/timestamppb"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
	"github.com/jobplane/jobplane/lib/jobvalidation"
	"github.com/jobplane/jobplane/lib/plan"
)

// omit leaves the value out of an error's body ("Invalid value: detail").
var omit = field.OmitValueType{}

// Bounds of a snapshot, beyond which it is refused rather than planned.
const (
	// MaxPods is the most pods a snapshot may carry.
	MaxPods = 200_000
	// maxUncounted bounds status.uncountedTerminatedPods; the reference
	// writes at most 500 per sync.
	maxUncounted = 100_000
	// maxIndexesLength bounds completedIndexes and failedIndexes.
	maxIndexesLength = 4 << 20
)

// Snapshot checks that a PlanSync request describes a Job and its pods the
// way an executor observing a cluster would: every error is reported with
// its path. pods are the request's, converted (the planner decodes a
// stream's pods straight into Kubernetes pods): its own are not read.
func Snapshot(req *jobplanev1.PlanSyncRequest, pods []*corev1.Pod) field.ErrorList {
	var errs field.ErrorList
	checkSync(req, nil, &errs)
	jobUID := checkJob(req.GetJob(), &errs)
	checkPods(pods, jobUID, req.GetJob().GetMetadata().GetNamespace(), field.NewPath("pods"), &errs)
	return errs
}

// SyncFields are the fields of a sync beside the Job and its pods, common to
// PlanSyncRequest and PlanSyncDelta.
type SyncFields interface {
	GetNow() *timestamppb.Timestamp
	GetExpectations() *jobplanev1.Expectations
	GetFinalizerRemovalsInFlight() []string
	GetBackoffRecord() *jobplanev1.BackoffRecord
	GetTrackingFinalizer() string
}

// knownFinalizers are the tracking finalizers the executor sends, which are
// valid: checking them would run a regular expression on every call.
var knownFinalizers = map[string]bool{plan.DefaultTrackingFinalizer: true, batchv1.JobTrackingFinalizer: true}

// checkSync checks the fields of the sync; paths are under parent (nil: at
// the top).
func checkSync(req SyncFields, parent *field.Path, errs *field.ErrorList) {
	path := func(name string) *field.Path {
		if parent == nil {
			return field.NewPath(name)
		}
		return parent.Child(name)
	}
	if req.GetNow() == nil {
		*errs = append(*errs, field.Required(path("now"), ""))
	} else if err := req.GetNow().CheckValid(); err != nil {
		*errs = append(*errs, field.Invalid(path("now"), omit, err.Error()))
	}
	if f := req.GetTrackingFinalizer(); f != "" && !knownFinalizers[f] {
		for _, msg := range utilvalidation.IsQualifiedName(f) {
			*errs = append(*errs, field.Invalid(path("trackingFinalizer"), f, msg))
		}
	}
	for i, uid := range req.GetFinalizerRemovalsInFlight() {
		if uid == "" {
			*errs = append(*errs, field.Invalid(path("finalizerRemovalsInFlight").Index(i), uid, "must not be empty"))
		}
	}
	if b := req.GetBackoffRecord(); b != nil {
		if n := b.GetFailuresAfterLastSuccess(); n < 0 {
			*errs = append(*errs, field.Invalid(path("backoffRecord").Child("failuresAfterLastSuccess"), n, "must be greater than or equal to 0"))
		}
		if b.GetFailuresAfterLastSuccess() > 0 && b.GetLastFailureTime() == nil {
			*errs = append(*errs, field.Required(path("backoffRecord").Child("lastFailureTime"), "when failuresAfterLastSuccess is positive"))
		}
	}
}

// Base is what Delta needs of the snapshot a delta changes.
type Base struct {
	// Job is the base's Job.
	Job *jobplanev1.Job
	// Pods is the number of the base's pods.
	Pods int
	// Holds reports whether the base has a pod of that UID.
	Holds func(uid string) bool
}

// Delta checks a delta against its base: the snapshot it stands for is
// accepted exactly when Snapshot would accept it in full, except that the
// Job may not change namespace. Paths start with "delta.". upserted are the
// delta's upserted pods, converted.
func Delta(d *jobplanev1.PlanSyncDelta, upserted []*corev1.Pod, base Base) field.ErrorList {
	var errs field.ErrorList
	delta := field.NewPath("delta")
	checkSync(d, delta, &errs)
	if d.GetJobUid() == "" {
		errs = append(errs, field.Required(delta.Child("jobUid"), ""))
	}
	namespace := base.Job.GetMetadata().GetNamespace()
	if job := d.GetJob(); job != nil {
		var jobErrs field.ErrorList
		checkJob(job, &jobErrs)
		errs = append(errs, apierr.Prefixed(delta, jobErrs)...)
		if uid := job.GetMetadata().GetUid(); uid != "" && uid != d.GetJobUid() {
			errs = append(errs, field.Invalid(delta.Child("job", "metadata", "uid"), uid, fmt.Sprintf("must be the delta's jobUid %q", d.GetJobUid())))
		}
		if ns := job.GetMetadata().GetNamespace(); ns != namespace {
			errs = append(errs, field.Invalid(delta.Child("job", "metadata", "namespace"), ns, fmt.Sprintf("the base's Job is in namespace %q", namespace)))
		}
	}
	added := 0
	for _, p := range upserted {
		if !base.Holds(string(p.UID)) {
			added++
		}
	}
	if n := base.Pods + added - len(d.GetRemovedPodUids()); n > MaxPods {
		tooMany := field.TooMany(delta.Child("upsertedPods"), n, MaxPods)
		tooMany.Detail = fmt.Sprintf("the snapshot would have %d pods: %s", n, tooMany.Detail)
		return append(errs, tooMany)
	}
	checkPods(upserted, d.GetJobUid(), namespace, delta.Child("upsertedPods"), &errs)
	upsertedUIDs := make(map[string]bool, len(upserted))
	for _, p := range upserted {
		upsertedUIDs[string(p.UID)] = true
	}
	removed := make(map[string]bool, len(d.GetRemovedPodUids()))
	for i, uid := range d.GetRemovedPodUids() {
		path := func() *field.Path { return delta.Child("removedPodUids").Index(i) }
		switch {
		case uid == "":
			errs = append(errs, field.Invalid(path(), uid, "must not be empty"))
		case removed[uid]:
			errs = append(errs, field.Duplicate(path(), uid))
		case upsertedUIDs[uid]:
			errs = append(errs, field.Invalid(path(), uid, "the pod is also upserted"))
		case !base.Holds(uid):
			notFound := field.NotFound(path(), uid)
			notFound.Detail = "the base has no pod of that UID"
			errs = append(errs, notFound)
		}
		removed[uid] = true
	}
	return errs
}

// checkJob returns the Job's UID.
func checkJob(job *jobplanev1.Job, errs *field.ErrorList) string {
	jobPath := field.NewPath("job")
	if job == nil {
		*errs = append(*errs, field.Required(jobPath, ""))
		return ""
	}
	meta, metaPath := job.GetMetadata(), jobPath.Child("metadata")
	*errs = append(*errs, apierr.Name(metaPath.Child("name"), meta.GetName())...)
	*errs = append(*errs, apierr.Namespace(metaPath.Child("namespace"), meta.GetNamespace(), false)...)
	if meta.GetUid() == "" {
		*errs = append(*errs, field.Required(metaPath.Child("uid"), "the Job's pods are matched to it by UID"))
	}
	spec, specPath := job.GetSpec(), jobPath.Child("spec")
	if spec == nil {
		*errs = append(*errs, field.Required(specPath, ""))
		return meta.GetUid()
	}
	if spec.GetTemplate() == nil {
		*errs = append(*errs, field.Required(specPath.Child("template"), ""))
	}
	nonNegative := func(path *field.Path, value *int32) {
		if value != nil && *value < 0 {
			*errs = append(*errs, field.Invalid(path, *value, "must be greater than or equal to 0"))
		}
	}
	nonNegative(specPath.Child("parallelism"), spec.Parallelism)
	nonNegative(specPath.Child("completions"), spec.Completions)
	nonNegative(specPath.Child("backoffLimit"), spec.BackoffLimit)
	nonNegative(specPath.Child("backoffLimitPerIndex"), spec.BackoffLimitPerIndex)
	nonNegative(specPath.Child("maxFailedIndexes"), spec.MaxFailedIndexes)
	if spec.ActiveDeadlineSeconds != nil && *spec.ActiveDeadlineSeconds < 0 {
		*errs = append(*errs, field.Invalid(specPath.Child("activeDeadlineSeconds"), *spec.ActiveDeadlineSeconds, "must be greater than or equal to 0"))
	}
	if spec.GetCompletionMode() == "Indexed" {
		if spec.Completions == nil {
			*errs = append(*errs, field.Required(specPath.Child("completions"), "when completion mode is Indexed"))
		}
		if spec.Parallelism != nil && *spec.Parallelism > jobvalidation.MaxParallelismForIndexedJob {
			*errs = append(*errs, field.Invalid(specPath.Child("parallelism"), *spec.Parallelism,
				fmt.Sprintf("must be less than or equal to %d when completion mode is Indexed", jobvalidation.MaxParallelismForIndexedJob)))
		}
	} else if spec.BackoffLimitPerIndex != nil {
		*errs = append(*errs, field.Invalid(specPath.Child("backoffLimitPerIndex"), *spec.BackoffLimitPerIndex, "requires indexed completion mode"))
	}
	checkPolicySizes(spec, specPath, errs)

	status, statusPath := job.GetStatus(), jobPath.Child("status")
	if status == nil {
		return meta.GetUid() // a Job not synced yet
	}
	nonNegative(statusPath.Child("active"), &status.Active)
	nonNegative(statusPath.Child("succeeded"), &status.Succeeded)
	nonNegative(statusPath.Child("failed"), &status.Failed)
	nonNegative(statusPath.Child("ready"), status.Ready)
	nonNegative(statusPath.Child("terminating"), status.Terminating)
	if len(status.GetCompletedIndexes()) > maxIndexesLength {
		*errs = append(*errs, field.TooLong(statusPath.Child("completedIndexes"), "", maxIndexesLength))
	}
	if len(status.GetFailedIndexes()) > maxIndexesLength {
		*errs = append(*errs, field.TooLong(statusPath.Child("failedIndexes"), "", maxIndexesLength))
	}
	u, uncountedPath := status.GetUncountedTerminatedPods(), statusPath.Child("uncountedTerminatedPods")
	if n := len(u.GetSucceeded()) + len(u.GetFailed()); n > maxUncounted {
		*errs = append(*errs, field.TooMany(uncountedPath, n, maxUncounted))
	}
	seen := map[string]bool{}
	for _, list := range []struct {
		name string
		uids []string
	}{{"succeeded", u.GetSucceeded()}, {"failed", u.GetFailed()}} {
		for i, uid := range list.uids {
			path := func() *field.Path { return uncountedPath.Child(list.name).Index(i) }
			switch {
			case uid == "":
				*errs = append(*errs, field.Invalid(path(), uid, "must not be empty"))
			case seen[uid]:
				*errs = append(*errs, field.Duplicate(path(), uid))
			default:
				seen[uid] = true
			}
		}
	}
	return meta.GetUid()
}

// checkPolicySizes holds the pod failure and success policies to the API
// server's bounds: matching a pod to a policy costs its rules times their
// patterns (or exit codes) times the pod's conditions (or containers), and
// a success policy its rules times the succeeded intervals, so a request
// of a few hundred kilobytes beyond them would cost seconds.
func checkPolicySizes(spec *jobplanev1.JobSpec, specPath *field.Path, errs *field.ErrorList) {
	tooMany := func(path *field.Path, n, limit int) {
		if n > limit {
			*errs = append(*errs, field.TooMany(path, n, limit))
		}
	}
	rulesPath := specPath.Child("podFailurePolicy", "rules")
	tooMany(rulesPath, len(spec.GetPodFailurePolicy().GetRules()), jobvalidation.MaxPodFailurePolicyRules)
	for i, rule := range spec.GetPodFailurePolicy().GetRules() {
		tooMany(rulesPath.Index(i).Child("onPodConditions"), len(rule.GetOnPodConditions()), jobvalidation.MaxPodFailurePolicyOnPodConditions)
		tooMany(rulesPath.Index(i).Child("onExitCodes", "values"), len(rule.GetOnExitCodes().GetValues()), jobvalidation.MaxPodFailurePolicyOnExitCodesValues)
	}
	rulesPath = specPath.Child("successPolicy", "rules")
	tooMany(rulesPath, len(spec.GetSuccessPolicy().GetRules()), jobvalidation.MaxSuccessPolicyRules)
	for i, rule := range spec.GetSuccessPolicy().GetRules() {
		if len(rule.GetSucceededIndexes()) > jobvalidation.MaxSucceededIndexesLength {
			*errs = append(*errs, field.TooLong(rulesPath.Index(i).Child("succeededIndexes"), "", jobvalidation.MaxSucceededIndexesLength))
		}
	}
}

func checkPods(pods []*corev1.Pod, jobUID, namespace string, podsPath *field.Path, errs *field.ErrorList) {
	if len(pods) > MaxPods {
		*errs = append(*errs, field.TooMany(podsPath, len(pods), MaxPods))
		return
	}
	seen := make(map[types.UID]int, len(pods))
	for i, p := range pods {
		// Paths are built only for errors: this loop runs on every pod of
		// every snapshot.
		path := func(name string) *field.Path { return podsPath.Index(i).Child("metadata", name) }
		if p.Name == "" {
			*errs = append(*errs, field.Required(path("name"), ""))
		}
		if uid := p.UID; uid == "" {
			*errs = append(*errs, field.Required(path("uid"), ""))
		} else if first, dup := seen[uid]; dup {
			duplicate := field.Duplicate(path("uid"), string(uid))
			duplicate.Detail = "also " + podsPath.Index(first).String()
			*errs = append(*errs, duplicate)
		} else {
			seen[uid] = i
		}
		if ns := p.Namespace; ns != "" && namespace != "" && ns != namespace {
			*errs = append(*errs, field.Invalid(path("namespace"), ns, fmt.Sprintf("the Job is in namespace %q", namespace)))
		}
		if jobUID != "" && !controlledBy(p, jobUID) {
			*errs = append(*errs, field.Invalid(path("ownerReferences"), omit,
				fmt.Sprintf("the pod has no controller owner reference to the Job (uid %s)", jobUID)))
		}
	}
}

// controlledBy: the pod's first controller owner reference, as the
// reference's metav1.GetControllerOf reads it, names the Job.
func controlledBy(p *corev1.Pod, uid string) bool {
	for _, ref := range p.OwnerReferences {
		if ref.Controller != nil && *ref.Controller {
			return string(ref.UID) == uid
		}
	}
	return false
}
