package refbench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	k8sversion "k8s.io/apimachinery/pkg/util/version"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/utils/ptr"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/kubetest"
	"github.com/jobplane/jobplane/lib/plan"
)

// TestThePlannerAgreesWithTheReference plans random Jobs and pods, each
// once with the reference's syncJob (a fresh controller: no expectations,
// no backoff record) and once with the planner binary, and compares what
// each decided: the pods created (what each has beside the template),
// deleted and whose tracking finalizer is removed, the Job's status at the
// end of the sync, the events on the Job and the delays after which it is
// synced again. AGREE_CASES sets the number of cases (3,000 by
// default), AGREE_SEED the first seed. Run with:
//
//	cd hack/refbench && GOWORK=off go test -run Agrees -v .
func TestThePlannerAgreesWithTheReference(t *testing.T) {
	cases, first := casesFromEnv("AGREE_CASES", "AGREE_SEED")
	t.Setenv("GOWORK", "") // the planner is built in the repository's workspace
	bin := kubetest.BuildBinary(t, "./services/planner/cmd/planner")
	t.Run("v1.36", func(t *testing.T) { agree(t, bin, "", nil, first, cases) })
	t.Run("v1.36, MutableSchedulingDirectivesForSuspendedJobs off", func(t *testing.T) {
		agree(t, bin, "", []featuregate.Feature{features.MutableSchedulingDirectivesForSuspendedJobs}, first, max(cases/5, 1))
	})
	// The GA gates a cluster emulating an older version may turn off, one
	// at a time and all together, on a fifth of the cases each.
	gates := []featuregate.Feature{features.JobBackoffLimitPerIndex, features.JobManagedBy,
		features.JobPodReplacementPolicy, features.JobSuccessPolicy}
	for _, off := range append([][]featuregate.Feature{nil, gates}, splitEach(gates)...) {
		t.Run(fmt.Sprintf("v1.32, %v off", off), func(t *testing.T) { agree(t, bin, "1.32", off, first, max(cases/5, 1)) })
	}
}

func splitEach(gates []featuregate.Feature) (each [][]featuregate.Feature) {
	for _, g := range gates {
		each = append(each, []featuregate.Feature{g})
	}
	return each
}

// jobGates are the reference's gates the planner follows (-feature-gates).
var jobGates = []featuregate.Feature{features.JobBackoffLimitPerIndex, features.JobManagedBy, features.JobPodReplacementPolicy,
	features.JobSuccessPolicy, features.MutableSchedulingDirectivesForSuspendedJobs}

// agree compares the reference and a planner on cases from seed first:
// the reference emulating version (none: v1.36) with the gates off turned
// off, the planner given the reference's gates, as the conformance shim
// gives them.
func agree(t *testing.T, bin, version string, off []featuregate.Feature, first uint64, cases int) {
	if version != "" {
		featuregatetesting.SetFeatureGateEmulationVersionDuringTest(t, utilfeature.DefaultFeatureGate, k8sversion.MustParse(version))
	}
	for _, g := range off {
		featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, g, false)
	}
	var gates []string
	for _, g := range jobGates {
		gates = append(gates, fmt.Sprintf("%s=%t", g, utilfeature.DefaultFeatureGate.Enabled(g)))
	}
	planner := kubetest.StartProcess(t, "planner", bin, "-shutdown-drain", "0s", "-authn-anonymous",
		"-feature-gates", strings.Join(gates, ","))
	conn, err := grpc.NewClient(planner.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpcserver.CallCodec()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := jobplanev1.NewPlannerServiceClient(conn)
	stream, err := client.StreamPlanSync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer stream.CloseSend()
	learnBackoffRecordType(t)
	disagreed := 0
	var seen coverage
	for seed := first; seed < first+uint64(cases); seed++ {
		j, pods := randomJob(seed)
		pods = widenJob(seed, j, pods)
		withoutFieldsOf(j, off)
		state := randomState(seed)
		widenState(seed, &state, pods)
		want := referenceSync(t, j, pods, state).finishedForgets(j.Status).bigPodsAlike()
		got := plannerSync(t, client, stream, j, pods, state).finishedForgets(j.Status).bigPodsAlike()
		seen.add(j, want)
		diff := cmp.Diff(want, got, cmpopts.EquateEmpty())
		if diff != "" && referenceMayDecide(t, j, pods, state, got) {
			seen.Ties++
			continue
		}
		if diff != "" {
			disagreed++
			if disagreed <= 5 {
				t.Errorf("seed %d: %s\nreference (-) / planner (+):\n%s", seed, describe(j, pods), diff)
			}
		}
	}
	if disagreed > 0 {
		t.Errorf("%d of %d cases disagree", disagreed, cases)
	}
	if cases >= 500 && (seen.Created == 0 || seen.Deleted == 0 || seen.Released == 0 || seen.Requeued == 0 || seen.TwoStatusWrites == 0 ||
		len(seen.conditions) < 10 || len(seen.events) < 6) {
		t.Errorf("the cases no longer cover what they should: %+v", seen)
	}
	t.Logf("%d cases: %+v", cases, seen)
	for name, n := range seen.conditions {
		t.Logf("  Job condition %s: %d", name, n)
	}
	for name, n := range seen.events {
		t.Logf("  event %s: %d", name, n)
	}
}

// casesFromEnv is the number of cases (3,000 unless the variable cases
// says) and the first seed (1 unless seed says).
func casesFromEnv(cases, seed string) (int, uint64) {
	n, first := 3000, uint64(1)
	if v, err := strconv.Atoi(os.Getenv(cases)); err == nil {
		n = v
	}
	if v, err := strconv.ParseUint(os.Getenv(seed), 10, 64); err == nil {
		first = v
	}
	return n, first
}

// withoutFieldsOf drops the fields of j that the API server drops with the
// gates off.
func withoutFieldsOf(j *batchv1.Job, off []featuregate.Feature) {
	for _, g := range off {
		switch g {
		case features.JobBackoffLimitPerIndex:
			if j.Spec.BackoffLimitPerIndex != nil {
				j.Spec.BackoffLimitPerIndex, j.Spec.MaxFailedIndexes, j.Status.FailedIndexes = nil, nil, nil
				j.Spec.BackoffLimit = ptr.To(int32(6))
				if p := j.Spec.PodFailurePolicy; p != nil {
					p.Rules = slices.DeleteFunc(p.Rules, func(r batchv1.PodFailurePolicyRule) bool {
						return r.Action == batchv1.PodFailurePolicyActionFailIndex
					})
				}
			}
		case features.JobPodReplacementPolicy:
			j.Spec.PodReplacementPolicy = nil
		case features.JobSuccessPolicy:
			j.Spec.SuccessPolicy = nil
		case features.JobManagedBy:
			j.Spec.ManagedBy = nil
		}
	}
}

// coverage counts what the reference's syncs decided over the cases, so
// that a run shows what it compared.
type coverage struct {
	Created, Deleted, Released, StatusChanged, Requeued int
	// TwoStatusWrites are syncs that wrote the status twice or more, pods
	// written in between.
	TwoStatusWrites int
	// Ties are cases the reference decided in more than one way.
	Ties               int
	conditions, events map[string]int
}

func (c *coverage) add(j *batchv1.Job, d decided) {
	if c.conditions == nil {
		c.conditions, c.events = map[string]int{}, map[string]int{}
	}
	for _, n := range []struct {
		count *int
		any   bool
	}{{&c.Created, len(d.Created) > 0}, {&c.Deleted, len(d.Deleted) > 0}, {&c.Released, len(d.Released) > 0},
		{&c.Requeued, len(d.Requeues) > 0}, {&c.TwoStatusWrites, len(d.Statuses) > 1},
		{&c.StatusChanged, len(d.Statuses) > 0}} {
		if n.any {
			*n.count++
		}
	}
	for _, cond := range d.final(j.Status).Conditions {
		c.conditions[string(cond.Type)+"/"+cond.Reason]++
	}
	for _, e := range d.Events {
		reason, _, _ := strings.Cut(e, ":")
		c.events[reason]++
	}
}

// decided is what one sync decided, in a form both sides give.
type decided struct {
	Created  []string // the pods created (createdPod), sorted
	Deleted  []string // pod names, sorted
	Released []string // pods whose tracking finalizer is removed, sorted
	// Statuses are the Job's statuses written, in order.
	Statuses []batchv1.JobStatus
	// Writes are the kinds of writes in order, a run of pod writes (creations,
	// deletions, finalizer removals, made at once) as one: "pods" or "status".
	Writes   []string
	Events   []string        // "type reason: message", sorted
	Requeues []time.Duration // sorted
	// Backoff is the Job's pod failure backoff record after the sync, as
	// the reference keeps it and the executor keeps the planner's.
	Backoff *plan.BackoffRecord
}

// wrote records a write of kind in order.
func (d *decided) wrote(kind string) {
	if n := len(d.Writes); n == 0 || d.Writes[n-1] != kind || kind != "pods" {
		d.Writes = append(d.Writes, kind)
	}
}

// finishedForgets is d without its backoff record once the Job is finished:
// the reference forgets it at its next sync, the executor at once, and no
// pod is created for a finished Job either way.
func (d decided) finishedForgets(before batchv1.JobStatus) decided {
	for _, c := range d.final(before).Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			d.Backoff = nil
		}
	}
	return d
}

// bigPodsAlike is d with the pods widenToTheCaps added named alike: of
// more finished pods than a sync counts, the reference counts those its
// informer lists first, in no set order, so only how many of them were
// counted is compared.
func (d decided) bigPodsAlike() decided {
	alike := func(name string) string {
		if strings.HasPrefix(name, "big-") {
			return "big"
		}
		return name
	}
	released := make([]string, len(d.Released))
	for i, name := range d.Released {
		released[i] = alike(name)
	}
	slices.Sort(released)
	d.Released = released
	d.Statuses = slices.Clone(d.Statuses)
	for i := range d.Statuses {
		u := d.Statuses[i].UncountedTerminatedPods
		if u == nil {
			continue
		}
		u = u.DeepCopy()
		for _, uids := range []*[]types.UID{&u.Succeeded, &u.Failed} {
			for k, uid := range *uids {
				(*uids)[k] = types.UID(alike(string(uid)))
			}
			slices.Sort(*uids)
		}
		d.Statuses[i].UncountedTerminatedPods = u
	}
	return d
}

// final is the Job's status after the sync: the last written, else before.
func (d decided) final(before batchv1.JobStatus) batchv1.JobStatus {
	if n := len(d.Statuses); n > 0 {
		return d.Statuses[n-1]
	}
	return before
}

// createdPod is what a created pod has of its own, beside the template, as
// JSON (map keys sorted).
func createdPod(p *corev1.Pod) string {
	var env []corev1.EnvVar
	for _, c := range append(slices.Clone(p.Spec.InitContainers), p.Spec.Containers...) {
		env = append(env, corev1.EnvVar{Name: "container", Value: c.Name})
		env = append(env, c.Env...)
	}
	b, err := json.Marshal(struct {
		GenerateName, Hostname, Subdomain string
		Labels, Annotations               map[string]string
		Finalizers                        []string
		Env                               []corev1.EnvVar
		Owners                            []metav1.OwnerReference
	}{p.GenerateName, p.Spec.Hostname, p.Spec.Subdomain, orNil(p.Labels), orNil(p.Annotations), p.Finalizers, env, p.OwnerReferences})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// orNil is m, nil when empty: both are written as no map.
func orNil(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// plannerSync asks the planner to plan j and pods once, by PlanSync; the
// same snapshot sent on stream as the executor sends it must be planned the
// same.
func plannerSync(t *testing.T, client jobplanev1.PlannerServiceClient, stream jobplanev1.PlannerService_StreamPlanSyncClient,
	j *batchv1.Job, pods []*corev1.Pod, state plan.State) decided {
	t.Helper()
	snap := &plan.Snapshot{Job: j, Pods: pods, Now: now, Finalizer: batchv1.JobTrackingFinalizer, State: state}
	resp, err := client.PlanSync(context.Background(), snap.Request())
	if err != nil {
		t.Fatalf("%s: %v", describe(j, pods), err)
	}
	// Written as the executor writes it: straight from the Kubernetes
	// objects (lib/podwire), through the chassis' codec.
	wire, err := snap.WireRequest(string(j.UID))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.SendMsg(wire); err != nil {
		t.Fatal(err)
	}
	streamed, err := stream.Recv()
	if err != nil || streamed.GetError() != nil {
		t.Fatalf("%s: streamed: %v %v", describe(j, pods), err, streamed.GetError())
	}
	if !proto.Equal(streamed.GetResponse().GetPlan(), resp.GetPlan()) {
		t.Errorf("%s: planned differently on a stream:\n%v\nunary:\n%v", describe(j, pods), streamed.GetResponse().GetPlan(), resp.GetPlan())
	}
	p, errs := plan.FromProto(resp.GetPlan(), nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	hasFinalizer := map[string]bool{}
	for _, pod := range pods {
		hasFinalizer[pod.Name] = slices.Contains(pod.Finalizers, batchv1.JobTrackingFinalizer)
	}
	d := decided{Backoff: state.Backoff}
	for _, a := range p.Actions {
		switch a := a.(type) {
		case plan.CreatePods:
			d.wrote("pods")
			for _, pod := range a.Pods {
				d.Created = append(d.Created, createdPod(plan.NewPod(j, pod)))
			}
		case plan.Requeue:
			d.Requeues = append(d.Requeues, a.After)
		case plan.DeletePods:
			d.wrote("pods")
			for _, pod := range a.Pods {
				if a.RemoveTrackingFinalizer && hasFinalizer[pod.Name] {
					d.Released = append(d.Released, pod.Name)
				}
				d.Deleted = append(d.Deleted, pod.Name)
			}
		case plan.RemoveFinalizers:
			d.wrote("pods")
			for _, pod := range a.Pods {
				d.Released = append(d.Released, pod.Name)
			}
		case plan.WriteStatus:
			d.wrote("status")
			d.Statuses = append(d.Statuses, *a.Status.DeepCopy())
			if a.BackoffRecord != nil {
				d.Backoff = a.BackoffRecord
			}
		case plan.RecordEvent:
			d.Events = append(d.Events, a.Type+" "+a.Reason+": "+a.Message)
		}
	}
	if p.ReleaseJobState {
		d.Backoff = nil // the executor forgets the finished Job's record
	}
	return d.sorted()
}

func (d decided) sorted() decided {
	for _, s := range [][]string{d.Created, d.Deleted, d.Released, d.Events} {
		slices.Sort(s)
	}
	slices.Sort(d.Requeues)
	// Times as the API server keeps them: seconds.
	round := func(t *metav1.Time) {
		if t != nil {
			*t = metav1.NewTime(t.Rfc3339Copy().Time.UTC())
		}
	}
	for i := range d.Statuses {
		st := &d.Statuses[i]
		// The reference lists uncounted pods in its informer's order.
		if u := st.UncountedTerminatedPods; u != nil {
			slices.Sort(u.Succeeded)
			slices.Sort(u.Failed)
		}
		round(st.StartTime)
		round(st.CompletionTime)
		for i := range st.Conditions {
			round(&st.Conditions[i].LastProbeTime)
			round(&st.Conditions[i].LastTransitionTime)
		}
	}
	return d
}

// describe says what a case is, for a failure.
func describe(j *batchv1.Job, pods []*corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Job spec %+v status %+v; pods:", j.Spec, j.Status)
	for _, p := range pods {
		fmt.Fprintf(&b, "\n  %s %s created=%s finalizers=%v deleting=%v annotations=%v conditions=%v", p.Name, p.Status.Phase, p.CreationTimestamp.Format(time.TimeOnly), p.Finalizers,
			p.DeletionTimestamp != nil, p.Annotations, p.Status.Conditions)
		for _, c := range p.Status.ContainerStatuses {
			if t := c.State.Terminated; t != nil {
				fmt.Fprintf(&b, " exit=%d finished=%s", t.ExitCode, t.FinishedAt.Format(time.TimeOnly))
			}
			if c.RestartCount > 0 {
				fmt.Fprintf(&b, " restarts=%d", c.RestartCount)
			}
		}
	}
	return b.String()
}
