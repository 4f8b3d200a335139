// Package validation holds the planner's checks of a PlanSync snapshot: its
// shape as an executor observing a cluster would send it. Violations carry
// Kubernetes JSON paths. A Job's own validation is lib/jobvalidation's.
package validation

import (
	"fmt"

	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
	"github.com/jobplane/jobplane/lib/jobvalidation"
)

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
// way an executor observing a cluster would: every violation is reported
// with its path. pods are the request's, converted (the planner decodes a
// stream's pods straight into Kubernetes pods): its own are not read.
func Snapshot(req *jobplanev1.PlanSyncRequest, pods []*corev1.Pod) apierr.Violations {
	var v apierr.Violations
	checkSync(req, "", &v)
	jobUID := checkJob(req.GetJob(), &v)
	checkPods(pods, jobUID, req.GetJob().GetMetadata().GetNamespace(), "pods", &v)
	return v
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

// checkSync checks the fields of the sync; prefix is prepended to paths.
func checkSync(req SyncFields, prefix string, v *apierr.Violations) {
	if req.GetNow() == nil {
		v.Add(prefix+"now", "Required value")
	} else if err := req.GetNow().CheckValid(); err != nil {
		v.Add(prefix+"now", "Invalid value: %v", err)
	}
	if f := req.GetTrackingFinalizer(); f != "" {
		for _, msg := range utilvalidation.IsQualifiedName(f) {
			v.Add(prefix+"trackingFinalizer", "Invalid value: %q: %s", f, msg)
		}
	}
	for i, uid := range req.GetFinalizerRemovalsInFlight() {
		if uid == "" {
			v.Add(fmt.Sprintf("%sfinalizerRemovalsInFlight[%d]", prefix, i), "Invalid value: \"\": must not be empty")
		}
	}
	if b := req.GetBackoffRecord(); b != nil {
		if b.GetFailuresAfterLastSuccess() < 0 {
			v.Add(prefix+"backoffRecord.failuresAfterLastSuccess", "Invalid value: %d: must be greater than or equal to 0", b.GetFailuresAfterLastSuccess())
		}
		if b.GetFailuresAfterLastSuccess() > 0 && b.GetLastFailureTime() == nil {
			v.Add(prefix+"backoffRecord.lastFailureTime", "Required value: when failuresAfterLastSuccess is positive")
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
func Delta(d *jobplanev1.PlanSyncDelta, upserted []*corev1.Pod, base Base) apierr.Violations {
	var v apierr.Violations
	checkSync(d, "delta.", &v)
	if d.GetJobUid() == "" {
		v.Add("delta.jobUid", "Required value")
	}
	namespace := base.Job.GetMetadata().GetNamespace()
	if job := d.GetJob(); job != nil {
		var jv apierr.Violations
		checkJob(job, &jv)
		for _, x := range jv {
			v = append(v, apierr.Violation{Field: "delta." + x.Field, Description: x.Description})
		}
		if uid := job.GetMetadata().GetUid(); uid != "" && uid != d.GetJobUid() {
			v.Add("delta.job.metadata.uid", "Invalid value: %q: must be the delta's jobUid %q", uid, d.GetJobUid())
		}
		if ns := job.GetMetadata().GetNamespace(); ns != namespace {
			v.Add("delta.job.metadata.namespace", "Invalid value: %q: the base's Job is in namespace %q", ns, namespace)
		}
	}
	added := 0
	for _, p := range upserted {
		if !base.Holds(string(p.UID)) {
			added++
		}
	}
	if n := base.Pods + added - len(d.GetRemovedPodUids()); n > MaxPods {
		v.Add("delta.upsertedPods", "Too many: the snapshot would have %d pods: must have at most %d items", n, MaxPods)
		return v
	}
	checkPods(upserted, d.GetJobUid(), namespace, "delta.upsertedPods", &v)
	upsertedUIDs := make(map[string]bool, len(upserted))
	for _, p := range upserted {
		upsertedUIDs[string(p.UID)] = true
	}
	removed := make(map[string]bool, len(d.GetRemovedPodUids()))
	for i, uid := range d.GetRemovedPodUids() {
		path := func() string { return fmt.Sprintf("delta.removedPodUids[%d]", i) }
		switch {
		case uid == "":
			v.Add(path(), "Invalid value: \"\": must not be empty")
		case removed[uid]:
			v.Add(path(), "Duplicate value: %q", uid)
		case upsertedUIDs[uid]:
			v.Add(path(), "Invalid value: %q: the pod is also upserted", uid)
		case !base.Holds(uid):
			v.Add(path(), "Not found: %q: the base has no pod of that UID", uid)
		}
		removed[uid] = true
	}
	return v
}

// checkJob returns the Job's UID.
func checkJob(job *jobplanev1.Job, v *apierr.Violations) string {
	if job == nil {
		v.Add("job", "Required value")
		return ""
	}
	meta := job.GetMetadata()
	if meta.GetName() == "" {
		v.Add("job.metadata.name", "Required value")
	}
	if meta.GetUid() == "" {
		v.Add("job.metadata.uid", "Required value: the Job's pods are matched to it by UID")
	}
	spec := job.GetSpec()
	if spec == nil {
		v.Add("job.spec", "Required value")
		return meta.GetUid()
	}
	if spec.GetTemplate() == nil {
		v.Add("job.spec.template", "Required value")
	}
	nonNegative := func(path string, value *int32) {
		if value != nil && *value < 0 {
			v.Add(path, "Invalid value: %d: must be greater than or equal to 0", *value)
		}
	}
	nonNegative("job.spec.parallelism", spec.Parallelism)
	nonNegative("job.spec.completions", spec.Completions)
	nonNegative("job.spec.backoffLimit", spec.BackoffLimit)
	nonNegative("job.spec.backoffLimitPerIndex", spec.BackoffLimitPerIndex)
	nonNegative("job.spec.maxFailedIndexes", spec.MaxFailedIndexes)
	if spec.ActiveDeadlineSeconds != nil && *spec.ActiveDeadlineSeconds < 0 {
		v.Add("job.spec.activeDeadlineSeconds", "Invalid value: %d: must be greater than or equal to 0", *spec.ActiveDeadlineSeconds)
	}
	if spec.GetCompletionMode() == "Indexed" {
		if spec.Completions == nil {
			v.Add("job.spec.completions", "Required value: when completion mode is Indexed")
		}
		if spec.Parallelism != nil && *spec.Parallelism > jobvalidation.MaxParallelismForIndexedJob {
			v.Add("job.spec.parallelism", "Invalid value: %d: must be less than or equal to %d when completion mode is Indexed", *spec.Parallelism, jobvalidation.MaxParallelismForIndexedJob)
		}
	} else if spec.BackoffLimitPerIndex != nil {
		v.Add("job.spec.backoffLimitPerIndex", "Invalid value: %d: requires indexed completion mode", *spec.BackoffLimitPerIndex)
	}

	status := job.GetStatus()
	if status == nil {
		return meta.GetUid() // a Job not synced yet
	}
	nonNegative("job.status.active", &status.Active)
	nonNegative("job.status.succeeded", &status.Succeeded)
	nonNegative("job.status.failed", &status.Failed)
	nonNegative("job.status.ready", status.Ready)
	nonNegative("job.status.terminating", status.Terminating)
	if len(status.GetCompletedIndexes()) > maxIndexesLength {
		v.Add("job.status.completedIndexes", "Too long: may not be more than %d bytes", maxIndexesLength)
	}
	if len(status.GetFailedIndexes()) > maxIndexesLength {
		v.Add("job.status.failedIndexes", "Too long: may not be more than %d bytes", maxIndexesLength)
	}
	u := status.GetUncountedTerminatedPods()
	if n := len(u.GetSucceeded()) + len(u.GetFailed()); n > maxUncounted {
		v.Add("job.status.uncountedTerminatedPods", "Too many: %d: must have at most %d items", n, maxUncounted)
	}
	seen := map[string]bool{}
	for _, list := range []struct {
		name string
		uids []string
	}{{"succeeded", u.GetSucceeded()}, {"failed", u.GetFailed()}} {
		for i, uid := range list.uids {
			path := func() string { return fmt.Sprintf("job.status.uncountedTerminatedPods.%s[%d]", list.name, i) }
			switch {
			case uid == "":
				v.Add(path(), "Invalid value: \"\": must not be empty")
			case seen[uid]:
				v.Add(path(), "Duplicate value: %q", uid)
			default:
				seen[uid] = true
			}
		}
	}
	return meta.GetUid()
}

func checkPods(pods []*corev1.Pod, jobUID, namespace, field string, v *apierr.Violations) {
	if len(pods) > MaxPods {
		v.Add(field, "Too many: %d: must have at most %d items", len(pods), MaxPods)
		return
	}
	seen := make(map[types.UID]int, len(pods))
	for i, p := range pods {
		// Paths are built only for violations: this loop runs on every pod
		// of every snapshot.
		path := func(name string) string { return fmt.Sprintf("%s[%d].metadata.%s", field, i, name) }
		if p.Name == "" {
			v.Add(path("name"), "Required value")
		}
		if uid := p.UID; uid == "" {
			v.Add(path("uid"), "Required value")
		} else if first, dup := seen[uid]; dup {
			v.Add(path("uid"), "Duplicate value: %q (also %s[%d])", uid, field, first)
		} else {
			seen[uid] = i
		}
		if ns := p.Namespace; ns != "" && namespace != "" && ns != namespace {
			v.Add(path("namespace"), "Invalid value: %q: the Job is in namespace %q", ns, namespace)
		}
		if jobUID != "" && !controlledBy(p, jobUID) {
			v.Add(path("ownerReferences"), "Invalid value: the pod has no controller owner reference to the Job (uid %s)", jobUID)
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
