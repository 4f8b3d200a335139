package auth

import (
	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/admission"
)

// Rule is what an RPC does, as the Kubernetes permission a caller needs for
// it: the verb on a resource of an API group in the namespace (and, for
// verbs on one object, the name) the request names. A rule without a verb
// needs authentication only: the RPC is a pure function of its request
// and touches nothing.
type Rule struct {
	Verb        string
	Group       string
	Resource    string
	Subresource string
	// Object returns the namespace ("" is every namespace) and the name
	// ("" for create and collections) the request acts on; ok is false
	// when req is not the RPC's request type.
	Object func(req any) (namespace, name string, ok bool)
	// GroupOf, when set, is the API group of the request's object in place
	// of Group (a CronJob RPC naming a batch/v1 CronJob).
	GroupOf func(req any) string
	// More returns the further permissions a request needs beyond the
	// rule's own (GetJob's pods, the pod writes of a plan given to Execute);
	// nil when there are none.
	More func(req any) []Attributes
}

// AuthenticationOnly says whether the RPC needs no permission.
func (r Rule) AuthenticationOnly() bool { return r.Verb == "" }

// Attributes returns every permission req needs, or ok false when req is
// not the RPC's request type.
func (r Rule) Attributes(req any) (attrs []Attributes, ok bool) {
	ns, name, ok := r.Object(req)
	if !ok {
		return nil, false
	}
	group := r.Group
	if r.GroupOf != nil {
		group = r.GroupOf(req)
	}
	attrs = []Attributes{{Verb: r.Verb, Group: group, Resource: r.Resource, Subresource: r.Subresource, Namespace: ns, Name: name}}
	if r.More != nil {
		attrs = append(attrs, r.More(req)...)
	}
	return attrs, true
}

// The API groups and resources of the table.
const (
	batchGroup    = "batch"
	jobs          = "jobs"
	jobplaneGroup = "jobplane.dev"
	cronJobs      = "cronjobs"
)

// Rules is the one table of who may call what: every RPC of every jobplane
// service, by full method name. The chassis refuses to register a service
// with an RPC missing from it, and answers PERMISSION_DENIED for a method
// it does not know. The contracts' comments (proto/jobplane/v1) say the same
// per RPC; keep them in step.
var Rules = map[string]Rule{
	// ExecutorService: Jobs of batch/v1, as kubectl would need them.
	jobplanev1.ExecutorService_SubmitJob_FullMethodName: {Verb: "create", Group: batchGroup, Resource: jobs,
		Object: on(func(r *jobplanev1.SubmitJobRequest) (string, string) {
			return r.GetJob().GetMetadata().GetNamespace(), ""
		})},
	jobplanev1.ExecutorService_GetJob_FullMethodName: {Verb: "get", Group: batchGroup, Resource: jobs,
		Object: on(func(r *jobplanev1.GetJobRequest) (string, string) { return r.GetNamespace(), r.GetName() }),
		More: more(func(r *jobplanev1.GetJobRequest) []Attributes {
			if !r.GetIncludePods() {
				return nil
			}
			return []Attributes{{Verb: "list", Resource: "pods", Namespace: r.GetNamespace()}}
		})},
	jobplanev1.ExecutorService_ListJobs_FullMethodName: {Verb: "list", Group: batchGroup, Resource: jobs,
		Object: on(func(r *jobplanev1.ListJobsRequest) (string, string) { return r.GetNamespace(), "" })},
	jobplanev1.ExecutorService_WatchJobs_FullMethodName: {Verb: "watch", Group: batchGroup, Resource: jobs,
		Object: on(func(r *jobplanev1.WatchJobsRequest) (string, string) { return r.GetNamespace(), "" })},
	jobplanev1.ExecutorService_DeleteJob_FullMethodName: {Verb: "delete", Group: batchGroup, Resource: jobs,
		Object: on(func(r *jobplanev1.DeleteJobRequest) (string, string) { return r.GetNamespace(), r.GetName() })},
	jobplanev1.ExecutorService_SyncJob_FullMethodName: {Verb: "update", Group: batchGroup, Resource: jobs, Subresource: "status",
		Object: on(func(r *jobplanev1.SyncJobRequest) (string, string) { return r.GetNamespace(), r.GetName() })},
	// A plan given from outside writes pods as well as the status: the
	// caller needs the pod permissions of its actions too.
	jobplanev1.ExecutorService_Execute_FullMethodName: {Verb: "update", Group: batchGroup, Resource: jobs, Subresource: "status",
		Object: on(func(r *jobplanev1.ExecuteRequest) (string, string) { return r.GetNamespace(), r.GetName() }),
		More:   more(planPermissions)},

	// CronService: jobplane's CronJobs (cronjobs.jobplane.dev). Trigger and
	// Backfill create runs now: the subresources "trigger" and "backfill"
	// of a CronJob, granted on their own.
	jobplanev1.CronService_CreateCronJob_FullMethodName: {Verb: "create", Group: jobplaneGroup, Resource: cronJobs,
		Object: on(func(r *jobplanev1.CreateCronJobRequest) (string, string) {
			return r.GetCronJob().GetMetadata().GetNamespace(), ""
		})},
	jobplanev1.CronService_GetCronJob_FullMethodName: {Verb: "get", Group: jobplaneGroup, Resource: cronJobs,
		Object: on(func(r *jobplanev1.GetCronJobRequest) (string, string) { return r.GetNamespace(), r.GetName() })},
	jobplanev1.CronService_ListCronJobs_FullMethodName: {Verb: "list", Group: jobplaneGroup, Resource: cronJobs,
		Object: on(func(r *jobplanev1.ListCronJobsRequest) (string, string) { return r.GetNamespace(), "" })},
	jobplanev1.CronService_UpdateCronJob_FullMethodName: {Verb: "update", Group: jobplaneGroup, Resource: cronJobs,
		Object: on(func(r *jobplanev1.UpdateCronJobRequest) (string, string) {
			return r.GetCronJob().GetMetadata().GetNamespace(), r.GetCronJob().GetMetadata().GetName()
		})},
	jobplanev1.CronService_DeleteCronJob_FullMethodName: {Verb: "delete", Group: jobplaneGroup, Resource: cronJobs,
		Object: on(func(r *jobplanev1.DeleteCronJobRequest) (string, string) { return r.GetNamespace(), r.GetName() })},
	jobplanev1.CronService_TriggerCronJob_FullMethodName: {Verb: "create", Group: jobplaneGroup, GroupOf: cronJobGroup, Resource: cronJobs, Subresource: "trigger",
		Object: on(func(r *jobplanev1.TriggerCronJobRequest) (string, string) { return r.GetNamespace(), r.GetName() })},
	jobplanev1.CronService_BackfillCronJob_FullMethodName: {Verb: "create", Group: jobplaneGroup, GroupOf: cronJobGroup, Resource: cronJobs, Subresource: "backfill",
		Object: on(func(r *jobplanev1.BackfillCronJobRequest) (string, string) { return r.GetNamespace(), r.GetName() })},
	jobplanev1.CronService_WatchJobInstances_FullMethodName: {Verb: "watch", Group: jobplaneGroup, GroupOf: cronJobGroup, Resource: cronJobs,
		Object: on(func(r *jobplanev1.WatchJobInstancesRequest) (string, string) {
			return r.GetNamespace(), r.GetCronJobName()
		})},
	jobplanev1.CronService_PreviewSchedule_FullMethodName: {},
	jobplanev1.CronService_PlanCronJob_FullMethodName:     {},

	// PlannerService: pure functions of their requests.
	jobplanev1.PlannerService_PlanSync_FullMethodName:       {},
	jobplanev1.PlannerService_StreamPlanSync_FullMethodName: {},
	jobplanev1.PlannerService_ValidateJob_FullMethodName:    {},
}

// on adapts a typed request accessor to Rule.Object.
func on[R any](f func(R) (namespace, name string)) func(any) (string, string, bool) {
	return func(req any) (string, string, bool) {
		r, ok := req.(R)
		if !ok {
			return "", "", false
		}
		ns, name := f(r)
		return ns, name, true
	}
}

// more adapts a typed request accessor to Rule.More.
func more[R any](f func(R) []Attributes) func(any) []Attributes {
	return func(req any) []Attributes {
		if r, ok := req.(R); ok {
			return f(r)
		}
		return nil
	}
}

// planPermissions are the pod and event writes of a plan's actions, in the
// Job's namespace.
func planPermissions(r *jobplanev1.ExecuteRequest) []Attributes {
	verbs := map[string]bool{}
	events := false
	for _, a := range r.GetPlan().GetActions() {
		switch {
		case a.GetCreatePods() != nil:
			verbs["create"] = true
		case a.GetDeletePods() != nil:
			verbs["delete"] = true
			if a.GetDeletePods().GetRemoveTrackingFinalizer() {
				verbs["patch"] = true
			}
		case a.GetRemoveFinalizers() != nil:
			verbs["patch"] = true
		case a.GetRecordEvent() != nil:
			events = true
		}
	}
	var out []Attributes
	for _, verb := range []string{"create", "delete", "patch"} {
		if verbs[verb] {
			out = append(out, Attributes{Verb: verb, Resource: "pods", Namespace: r.GetNamespace()})
		}
	}
	if events {
		out = append(out, Attributes{Verb: "create", Resource: "events", Namespace: r.GetNamespace()})
	}
	return out
}

// ClassOf is the admission class of the RPC method (admission.ClassRead,
// ClassWrite, ClassCompute), by the verb of its rule; "" for a
// method without one.
func ClassOf(method string) string {
	r, ok := Rules[method]
	switch {
	case !ok:
		return ""
	case r.AuthenticationOnly():
		return admission.ClassCompute
	case r.Verb == "get" || r.Verb == "list" || r.Verb == "watch":
		return admission.ClassRead
	default:
		return admission.ClassWrite
	}
}

// cronJobGroup is the API group of the CronJob a request names: batch's for
// api_version batch/v1, jobplane's otherwise (the RPC then refuses any
// other apiVersion).
func cronJobGroup(req any) string {
	if r, ok := req.(interface{ GetApiVersion() string }); ok && r.GetApiVersion() == "batch/v1" {
		return batchGroup
	}
	return jobplaneGroup
}
