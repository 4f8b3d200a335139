package refbench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8sversion "k8s.io/apimachinery/pkg/util/version"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/featuregate"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller"
	"k8s.io/kubernetes/pkg/controller/job"
	"k8s.io/kubernetes/pkg/features"
	clocktesting "k8s.io/utils/clock/testing"
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
	cases, first := 3000, uint64(1)
	if n, err := strconv.Atoi(os.Getenv("AGREE_CASES")); err == nil {
		cases = n
	}
	if n, err := strconv.ParseUint(os.Getenv("AGREE_SEED"), 10, 64); err == nil {
		first = n
	}
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
		withoutFieldsOf(j, off)
		state := randomState(seed)
		want := referenceSync(t, j, pods, state).finishedForgets(j.Status)
		got := plannerSync(t, client, stream, j, pods, state).finishedForgets(j.Status)
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

// recordingQueue records the delays the reference requeues its Job after.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[string]
	after *[]time.Duration
}

func (q recordingQueue) AddAfter(_ string, d time.Duration) { *q.after = append(*q.after, d) }

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// referenceSync runs the reference's syncJob once on j and pods.
func referenceSync(t *testing.T, j *batchv1.Job, pods []*corev1.Pod, state plan.State) decided {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	var (
		mu sync.Mutex // the reference writes pods from goroutines
		d  decided
	)
	client.PrependReactor("*", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetResource().Resource != "pods" {
			return true, &batchv1.Job{}, nil
		}
		mu.Lock()
		defer mu.Unlock()
		d.wrote("pods")
		switch a := action.(type) {
		case k8stesting.CreateAction:
			p := a.GetObject().(*corev1.Pod)
			d.Created = append(d.Created, createdPod(p))
			return true, p, nil
		case k8stesting.DeleteAction:
			d.Deleted = append(d.Deleted, a.GetName())
		case k8stesting.PatchAction:
			d.Released = append(d.Released, a.GetName())
		}
		return true, &corev1.Pod{}, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	podInformer, jobInformer := factory.Core().V1().Pods(), factory.Batch().V1().Jobs()
	jm, err := job.NewController(ctx, client, podInformer, jobInformer, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	recorder := record.NewFakeRecorder(1000)
	setField(jm, "clock", clocktesting.NewFakeClock(now))
	setField(jm, "recorder", record.EventRecorder(recorder))
	setField(jm, "podControl", controller.PodControlInterface(controller.RealPodControl{KubeClient: client, Recorder: recorder}))
	setField(jm, "updateStatusHandler", func(_ context.Context, j *batchv1.Job) (*batchv1.Job, error) {
		mu.Lock()
		defer mu.Unlock()
		d.wrote("status")
		d.Statuses = append(d.Statuses, *j.Status.DeepCopy())
		return j, nil
	})
	setField(jm, "patchJobHandler", func(context.Context, *batchv1.Job, []byte) error { return nil })
	real := fieldOf[workqueue.TypedRateLimitingInterface[string]](jm, "queue")
	setField(jm, "queue", workqueue.TypedRateLimitingInterface[string](recordingQueue{real, &d.Requeues}))
	// The controller's goroutines: its queues' and its event broadcaster's.
	defer real.ShutDown()
	defer fieldOf[interface{ ShutDown() }](jm, "orphanQueue").ShutDown()
	defer fieldOf[record.EventBroadcaster](jm, "broadcaster").Shutdown()
	if err := jobInformer.Informer().GetIndexer().Add(j.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if err := podInformer.Informer().GetIndexer().Add(p.DeepCopy()); err != nil {
			t.Fatal(err)
		}
	}
	key := j.Namespace + "/" + j.Name
	backoffs := (*backoffStoreOf)(reflect.ValueOf(jm).Elem().FieldByName("podBackoffStore").UnsafePointer())
	if state.Backoff != nil {
		if err := backoffs.store.Add(newBackoffRecord(key, state.Backoff)); err != nil {
			t.Fatal(err)
		}
	}
	if e := state.Expectations; e.PendingCreations > 0 || e.PendingDeletions > 0 {
		expectations := fieldOf[controller.ControllerExpectationsInterface](jm, "expectations")
		if err := expectations.SetExpectations(klog.Background(), key, int(e.PendingCreations), int(e.PendingDeletions)); err != nil {
			t.Fatal(err)
		}
	}
	// An error is a requeue; what the sync did before it is compared.
	_ = syncHandlerOf(jm)(ctx, key)
	if r, ok, _ := backoffs.store.GetByKey(key); ok {
		d.Backoff = backoffRecordOf(r)
	}
	close(recorder.Events)
	for e := range recorder.Events {
		typ, rest, _ := strings.Cut(e, " ")
		reason, message, _ := strings.Cut(rest, " ")
		if podControlEvent(reason) {
			continue
		}
		d.Events = append(d.Events, typ+" "+reason+": "+message)
	}
	return d.sorted()
}

// referenceMayDecide: the reference, synced again on j and pods, decides
// d in one of 100 tries. It breaks some ties by its informer's order, which
// is no set order (of failed pods of an index, one with more failures and
// one that finished later; of several pods a FailJob rule matches, the one
// named): any of its decisions is the reference's.
func referenceMayDecide(t *testing.T, j *batchv1.Job, pods []*corev1.Pod, state plan.State, d decided) bool {
	// A small map's order is one of its rotations: the pod the planner
	// names may come first in one try of eight.
	for range 100 {
		if cmp.Equal(referenceSync(t, j, pods, state).finishedForgets(j.Status), d, cmpopts.EquateEmpty()) {
			return true
		}
	}
	return false
}

// podControlEvent: the events of the reference's pod control, which the
// executor records as it writes pods (they are not in a plan).
func podControlEvent(reason string) bool {
	switch reason {
	case "SuccessfulCreate", "FailedCreate", "SuccessfulDelete", "FailedDelete":
		return true
	}
	return false
}

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

// randomState is what the executor knows of seed's Job from syncs before,
// as the reference's controller would: in a third of the cases a pod
// failure backoff record, in a tenth pod creations or deletions expected
// and not yet seen (set just now: not expired).
func randomState(seed uint64) plan.State {
	r := rand.New(rand.NewPCG(seed, 0x6261636b))
	var state plan.State
	if r.IntN(10) == 0 {
		state.Expectations = plan.Expectations{PendingCreations: int32(r.IntN(3)), PendingDeletions: int32(r.IntN(2)), RecordedAt: now}
	}
	state.Backoff = randomBackoff(r)
	return state
}

// randomBackoff is a backoff record in a third of the cases.
func randomBackoff(r *rand.Rand) *plan.BackoffRecord {
	if r.IntN(3) != 0 {
		return nil
	}
	if r.IntN(5) == 0 {
		return &plan.BackoffRecord{} // a success after the last failure
	}
	return &plan.BackoffRecord{FailuresAfterLastSuccess: int32(1 + r.IntN(4)),
		LastFailureTime: ptr.To(now.Add(-time.Duration(r.IntN(120)) * time.Second))}
}

// learnBackoffRecordType syncs a Job with a failed pod in the reference,
// which then records a backoff: its record's type is what
// newBackoffRecord makes.
func learnBackoffRecordType(t *testing.T) {
	if backoffRecordType != nil {
		return
	}
	j, _ := randomJob(1)
	j.Spec.Suspend, j.Spec.PodFailurePolicy, j.Status = ptr.To(false), nil, batchv1.JobStatus{}
	p := randomPod(rand.New(rand.NewPCG(1, 1)), j, 0)
	p.Status.Phase, p.DeletionTimestamp, p.Finalizers = corev1.PodFailed, nil, []string{batchv1.JobTrackingFinalizer}
	referenceSync(t, j, []*corev1.Pod{p}, plan.State{})
	if backoffRecordType == nil {
		t.Fatal("the reference recorded no backoff for a Job with a failed pod")
	}
}

// backoffStoreOf is the reference's backoffStore, whose one field is its
// store of *backoffRecord, keyed by the Job's key.
type backoffStoreOf struct{ store cache.Store }

// referenceBackoffRecord mirrors the reference's backoffRecord, field for
// field (checked by backoffRecordOf).
type referenceBackoffRecord struct {
	key                      string
	failuresAfterLastSuccess int32
	lastFailureTime          *time.Time
}

// backoffRecordType is the reference's *backoffRecord, learnt from a sync
// that records one (pointers to it are what its store takes).
var backoffRecordType reflect.Type

// newBackoffRecord is a reference *backoffRecord of key holding b.
func newBackoffRecord(key string, b *plan.BackoffRecord) any {
	r := reflect.New(backoffRecordType.Elem())
	*(*referenceBackoffRecord)(r.UnsafePointer()) = referenceBackoffRecord{key, b.FailuresAfterLastSuccess, b.LastFailureTime}
	return r.Interface()
}

// backoffRecordOf is a reference *backoffRecord as the planner's.
func backoffRecordOf(r any) *plan.BackoffRecord {
	v := reflect.ValueOf(r)
	if backoffRecordType == nil {
		t := v.Type().Elem()
		mirror := reflect.TypeOf(referenceBackoffRecord{})
		if t.NumField() != mirror.NumField() {
			panic(fmt.Sprintf("the reference's backoffRecord is %v, not %v", t, mirror))
		}
		for i := range t.NumField() {
			if t.Field(i).Name != mirror.Field(i).Name || t.Field(i).Type != mirror.Field(i).Type {
				panic(fmt.Sprintf("the reference's backoffRecord is %v, not %v", t, mirror))
			}
		}
		backoffRecordType = v.Type()
	}
	m := (*referenceBackoffRecord)(v.UnsafePointer())
	return &plan.BackoffRecord{FailuresAfterLastSuccess: m.failuresAfterLastSuccess, LastFailureTime: m.lastFailureTime}
}

// fieldOf is the unexported field name of jm.
func fieldOf[T any](jm *job.Controller, name string) T {
	f := reflect.ValueOf(jm).Elem().FieldByName(name)
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface().(T)
}

// setField sets the unexported field name of jm to v.
func setField(jm *job.Controller, name string, v any) {
	f := reflect.ValueOf(jm).Elem().FieldByName(name)
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Set(reflect.ValueOf(v).Convert(f.Type()))
}

// randomJob is the Job and pods of seed: a Job as the API server stores it
// (defaulted), mid-run, with pods in every phase.
func randomJob(seed uint64) (*batchv1.Job, []*corev1.Pod) {
	r := rand.New(rand.NewPCG(seed, 0x61677265))
	uid := types.UID(fmt.Sprintf("job-%d", seed))
	labels := map[string]string{batchv1.ControllerUidLabel: string(uid), batchv1.JobNameLabel: "job"}
	indexed := r.IntN(2) == 0
	mode := batchv1.NonIndexedCompletion
	if indexed {
		mode = batchv1.IndexedCompletion
	}
	completions := ptr.To(int32(1 + r.IntN(6)))
	if !indexed && r.IntN(5) == 0 {
		completions = nil // a work queue
	}
	parallelism := int32(r.IntN(5))
	restart := corev1.RestartPolicyNever
	if r.IntN(4) == 0 {
		restart = corev1.RestartPolicyOnFailure
	}
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns", UID: uid, ResourceVersion: "1",
			CreationTimestamp: metav1.NewTime(now.Add(-10 * time.Minute))},
		Spec: batchv1.JobSpec{
			Parallelism:    &parallelism,
			Completions:    completions,
			CompletionMode: &mode,
			BackoffLimit:   ptr.To(int32(r.IntN(4))),
			Suspend:        ptr.To(r.IntN(8) == 0),
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: string(uid)}},
			ManualSelector: nil,
			PodReplacementPolicy: ptr.To([]batchv1.PodReplacementPolicy{
				batchv1.TerminatingOrFailed, batchv1.Failed}[r.IntN(2)]),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{RestartPolicy: restart,
					Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
			},
		},
	}
	if r.IntN(4) == 0 {
		j.Spec.ActiveDeadlineSeconds = ptr.To(int64(60 + r.IntN(600)))
	}
	if r.IntN(4) == 0 { // a template of more than the defaults
		tmpl := &j.Spec.Template
		tmpl.Annotations = map[string]string{"team": "a"}
		tmpl.Finalizers = []string{"example.com/keep"}
		tmpl.Spec.Subdomain = "workers"
		always := corev1.ContainerRestartPolicyAlways
		tmpl.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "busybox"},
			{Name: "sidecar", Image: "busybox", RestartPolicy: &always}}
		tmpl.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "batch"}}
	}
	if indexed && r.IntN(3) == 0 {
		j.Spec.BackoffLimitPerIndex = ptr.To(int32(r.IntN(3)))
		j.Spec.BackoffLimit = ptr.To(int32(1<<31 - 1))
		if r.IntN(2) == 0 {
			j.Spec.MaxFailedIndexes = ptr.To(int32(r.IntN(3)))
		}
	}
	if restart == corev1.RestartPolicyNever && r.IntN(3) == 0 {
		j.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
		j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
			{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
				Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}}},
			{Action: batchv1.PodFailurePolicyActionIgnore, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{
				{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}},
			{Action: batchv1.PodFailurePolicyActionCount, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
				Operator: batchv1.PodFailurePolicyOnExitCodesOpNotIn, Values: []int32{0, 42, 7}}},
		}}
		if j.Spec.BackoffLimitPerIndex != nil {
			j.Spec.PodFailurePolicy.Rules = append(j.Spec.PodFailurePolicy.Rules, batchv1.PodFailurePolicyRule{
				Action: batchv1.PodFailurePolicyActionFailIndex, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
					Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{7}}})
		}
	}
	if indexed && r.IntN(4) == 0 {
		rule := batchv1.SuccessPolicyRule{SucceededCount: ptr.To(int32(1 + r.IntN(int(*completions))))}
		if r.IntN(2) == 0 {
			rule = batchv1.SuccessPolicyRule{SucceededIndexes: ptr.To("0-" + strconv.Itoa(r.IntN(int(*completions))))}
		}
		j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{rule}}
	}
	if r.IntN(5) != 0 {
		j.Status.StartTime = ptr.To(metav1.NewTime(now.Add(-time.Duration(r.IntN(600)) * time.Second)))
	}
	var pods []*corev1.Pod
	for i := range r.IntN(9) {
		pods = append(pods, randomPod(r, j, i))
	}
	countSome(r, j, pods)
	if indexed {
		someIndexes(r, j)
	}
	someCondition(r, j)
	return j, pods
}

// someIndexes records some indexes as completed or failed.
func someIndexes(r *rand.Rand, j *batchv1.Job) {
	var completed, failed []string
	for ix := range int(*j.Spec.Completions) {
		switch r.IntN(6) {
		case 0:
			completed = append(completed, strconv.Itoa(ix))
		case 1:
			if j.Spec.BackoffLimitPerIndex != nil {
				failed = append(failed, strconv.Itoa(ix))
			}
		}
	}
	j.Status.CompletedIndexes = strings.Join(completed, ",")
	if j.Spec.BackoffLimitPerIndex != nil {
		j.Status.FailedIndexes = ptr.To(strings.Join(failed, ","))
	}
}

// someCondition gives some Jobs a condition of a Job finishing or
// finished, set a while ago.
func someCondition(r *rand.Rand, j *batchv1.Job) {
	since := metav1.NewTime(now.Add(-30 * time.Second))
	add := func(typ batchv1.JobConditionType, reason string) {
		j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: typ, Status: corev1.ConditionTrue,
			Reason: reason, Message: "set before", LastProbeTime: since, LastTransitionTime: since})
	}
	switch r.IntN(12) {
	case 0:
		add(batchv1.JobFailureTarget, batchv1.JobReasonBackoffLimitExceeded)
	case 1:
		add(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached)
	case 2:
		add(batchv1.JobFailureTarget, batchv1.JobReasonDeadlineExceeded)
		add(batchv1.JobFailed, batchv1.JobReasonDeadlineExceeded)
	case 3:
		add(batchv1.JobSuspended, "JobSuspended")
	}
}

// randomPod is the i-th pod of j, in a random phase.
func randomPod(r *rand.Rand, j *batchv1.Job, i int) *corev1.Pod {
	// Distinct creation times: of pods alike in all else, the reference
	// deletes the newest, and keeps its informer's order, no set one, for a
	// tie.
	created := now.Add(-time.Duration(10+50*i+r.IntN(50)) * time.Second)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("job-%d", i), Namespace: j.Namespace, UID: types.UID(fmt.Sprintf("pod-%d", i)),
			ResourceVersion: "1", CreationTimestamp: metav1.NewTime(created),
			Labels:          map[string]string{batchv1.ControllerUidLabel: string(j.UID), batchv1.JobNameLabel: j.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(j, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: j.Spec.Template.Spec,
	}
	if r.IntN(6) != 0 {
		p.Finalizers = []string{batchv1.JobTrackingFinalizer}
	}
	if *j.Spec.CompletionMode == batchv1.IndexedCompletion {
		ix := strconv.Itoa(r.IntN(int(*j.Spec.Completions) + 1)) // one past the last: out of range
		p.Annotations = map[string]string{batchv1.JobCompletionIndexAnnotation: ix}
		p.Labels[batchv1.JobCompletionIndexAnnotation] = ix
		switch r.IntN(20) {
		case 0:
			delete(p.Annotations, batchv1.JobCompletionIndexAnnotation) // no index: not the Job's to count
		case 1:
			p.Annotations[batchv1.JobCompletionIndexAnnotation] = []string{"x", "-1", "01"}[r.IntN(3)]
		}
		if j.Spec.BackoffLimitPerIndex != nil && r.IntN(2) == 0 {
			p.Annotations[batchv1.JobIndexFailureCountAnnotation] = strconv.Itoa(r.IntN(3))
			if r.IntN(3) == 0 {
				p.Annotations[batchv1.JobIndexIgnoredFailureCountAnnotation] = strconv.Itoa(r.IntN(2))
			}
		}
	}
	finished := metav1.NewTime(created.Add(time.Duration(r.IntN(10)+1) * time.Second))
	switch r.IntN(5) {
	case 0:
		p.Status.Phase = corev1.PodPending
	case 1, 2:
		p.Status.Phase = corev1.PodRunning
		ready := corev1.ConditionFalse
		if r.IntN(2) == 0 {
			ready = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready,
			LastTransitionTime: metav1.NewTime(created.Add(time.Duration(1+r.IntN(5)) * time.Second))}}
		if j.Spec.Template.Spec.RestartPolicy == corev1.RestartPolicyOnFailure {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", RestartCount: int32(r.IntN(3))}}
		}
	case 3:
		p.Status.Phase = corev1.PodSucceeded
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, FinishedAt: finished}}}}
	case 4:
		p.Status.Phase = corev1.PodFailed
		code := []int32{1, 7, 42}[r.IntN(3)]
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: code, FinishedAt: finished}}}}
		if r.IntN(4) == 0 {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
				Reason: "EvictionByEvictionAPI", LastTransitionTime: finished}}
		}
		switch r.IntN(6) {
		case 0: // no container status: its finish time is its Ready=False condition's
			p.Status.ContainerStatuses = nil
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady,
				Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(finished.Add(2 * time.Second))})
		case 1: // a sidecar that stopped after the main container
			always := corev1.ContainerRestartPolicyAlways
			p.Spec.InitContainers = []corev1.Container{{Name: "sidecar", Image: "busybox", RestartPolicy: &always}}
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "sidecar", State: corev1.ContainerState{
				Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, FinishedAt: metav1.NewTime(finished.Add(3 * time.Second))}}}}
		}
	}
	if r.IntN(6) == 0 {
		// Distinct too: the reference keeps a failed index's latest pod, the
		// informer's order deciding a tie.
		p.DeletionTimestamp = ptr.To(metav1.NewTime(now.Add(-time.Duration(1+i) * time.Second)))
	}
	return p
}

// countSome puts the status in agreement with the pods already counted
// (terminal pods without the finalizer), and some in uncounted.
func countSome(r *rand.Rand, j *batchv1.Job, pods []*corev1.Pod) {
	var ready, active int32
	for _, p := range pods {
		terminal := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		if !terminal {
			if p.DeletionTimestamp == nil {
				active++
			}
			continue
		}
		counted := !slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer)
		switch {
		case counted && p.Status.Phase == corev1.PodSucceeded:
			j.Status.Succeeded++
		case counted:
			j.Status.Failed++
		case r.IntN(4) == 0:
			if j.Status.UncountedTerminatedPods == nil {
				j.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
			}
			if p.Status.Phase == corev1.PodSucceeded {
				j.Status.UncountedTerminatedPods.Succeeded = append(j.Status.UncountedTerminatedPods.Succeeded, p.UID)
			} else {
				j.Status.UncountedTerminatedPods.Failed = append(j.Status.UncountedTerminatedPods.Failed, p.UID)
			}
		}
	}
	if r.IntN(2) == 0 {
		j.Status.Active = active
		j.Status.Ready = &ready
		j.Status.Terminating = ptr.To(int32(r.IntN(2)))
	}
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
