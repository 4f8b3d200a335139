package plan

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
)

// held is the planner's side of a stream's snapshot of a Job, as the
// contract defines a delta's application.
type held struct {
	id   string
	job  *jobplanev1.Job
	pods map[string]*jobplanev1.Pod
}

func (h *held) apply(t *testing.T, id string, d *jobplanev1.PlanSyncDelta) *jobplanev1.PlanSyncRequest {
	t.Helper()
	if d.GetBaseId() != h.id {
		t.Fatalf("delta against %q, the base is %q", d.GetBaseId(), h.id)
	}
	if d.GetJob() != nil {
		h.job = d.GetJob()
	}
	for _, uid := range d.GetRemovedPodUids() {
		if h.pods[uid] == nil {
			t.Fatalf("removed pod %s is not in the base", uid)
		}
		delete(h.pods, uid)
	}
	for _, p := range d.GetUpsertedPods() {
		h.pods[p.GetMetadata().GetUid()] = p
	}
	h.id = id
	req := &jobplanev1.PlanSyncRequest{Job: h.job, Now: d.GetNow(), Expectations: d.GetExpectations(),
		FinalizerRemovalsInFlight: d.GetFinalizerRemovalsInFlight(), BackoffRecord: d.GetBackoffRecord(), TrackingFinalizer: d.GetTrackingFinalizer()}
	for _, p := range h.pods {
		req.Pods = append(req.Pods, p)
	}
	return req
}

// sameSnapshot: the same Job, fields and pods, in any order.
func sameSnapshot(a, b *jobplanev1.PlanSyncRequest) bool {
	if len(a.GetPods()) != len(b.GetPods()) {
		return false
	}
	pods := map[string]*jobplanev1.Pod{}
	for _, p := range a.GetPods() {
		pods[p.GetMetadata().GetUid()] = p
	}
	for _, p := range b.GetPods() {
		if !proto.Equal(pods[p.GetMetadata().GetUid()], p) {
			return false
		}
	}
	x, y := proto.Clone(a).(*jobplanev1.PlanSyncRequest), proto.Clone(b).(*jobplanev1.PlanSyncRequest)
	x.Pods, y.Pods = nil, nil
	return proto.Equal(x, y)
}

func testPod(i, rv int, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%d", i), Namespace: "ns", UID: types.UID(fmt.Sprintf("uid-%d", i)), ResourceVersion: strconv.Itoa(rv)},
		Status:     corev1.PodStatus{Phase: phase},
	}
}

// onePodJob is a one-pod Job as kubectl creates it, defaulted by the API
// server, with its pod running.
func onePodJob() (*batchv1.Job, *corev1.Pod) {
	labels := map[string]string{"batch.kubernetes.io/controller-uid": "job-uid", "batch.kubernetes.io/job-name": "pi", "controller-uid": "job-uid", "job-name": "pi"}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "tenant-a", UID: "job-uid", ResourceVersion: "1042", Generation: 1,
			Labels: labels, CreationTimestamp: metav1.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1), BackoffLimit: ptr.To[int32](6),
			CompletionMode: ptr.To(batchv1.NonIndexedCompletion), Suspend: ptr.To(false),
			PodReplacementPolicy: ptr.To(batchv1.TerminatingOrFailed), ManagedBy: ptr.To("jobplane.dev/executor"),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"batch.kubernetes.io/controller-uid": "job-uid"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name: "pi", Image: "perl:5.34.0", Command: []string{"perl", "-Mbignum=bpi", "-wle", "print bpi(2000)"},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
					}},
				},
			},
		},
		Status: batchv1.JobStatus{Active: 1, StartTime: ptr.To(metav1.Date(2026, 6, 1, 8, 0, 1, 0, time.UTC))},
	}
	pod := testPod(1, 1050, corev1.PodRunning)
	pod.Labels = labels
	pod.Finalizers = []string{"batch.kubernetes.io/job-tracking"}
	return job, pod
}

// Along random changes (pods added, changed, removed, some without a
// resourceVersion; the Job changed or not; the executor's state), each
// delta applied to the planner's base gives the full snapshot, and carries
// only what changed.
func TestDeltaAppliedToItsBaseIsTheFullSnapshot(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	rv := 100
	job, _ := onePodJob() // maps of several entries: written in key order
	job.ResourceVersion = "1"
	job.Status = batchv1.JobStatus{}
	pods := map[int]*corev1.Pod{}
	next := 0
	var base *Sent
	h := &held{}
	now := time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)
	for step := range 300 {
		changes := map[string]bool{}
		for range r.IntN(6) {
			rv++
			switch k := r.IntN(4); {
			case k == 0 || len(pods) == 0:
				pods[next] = testPod(next, rv, corev1.PodPending)
				changes[string(pods[next].UID)] = true
				next++
			case k == 1:
				for i := range pods {
					delete(pods, i)
					break
				}
			default:
				for i, p := range pods {
					p = p.DeepCopy()
					p.Status.Phase = corev1.PodRunning
					p.ResourceVersion = strconv.Itoa(rv)
					if r.IntN(10) == 0 {
						p.ResourceVersion = ""
					}
					pods[i] = p
					changes[string(p.UID)] = true
					break
				}
			}
		}
		if r.IntN(3) == 0 {
			job = job.DeepCopy()
			job.Status.Active = int32(len(pods))
			rv++
			job.ResourceVersion = strconv.Itoa(rv)
		}
		s := &Snapshot{Job: job, Now: now.Add(time.Duration(step) * time.Second), Finalizer: "jobplane.dev/job-tracking",
			State: State{Expectations: Expectations{PendingCreations: int32(step % 3)}, FinalizerRemovalsInFlight: []types.UID{"x"}}}
		for _, p := range pods {
			s.Pods = append(s.Pods, p)
			if p.ResourceVersion == "" {
				changes[string(p.UID)] = true
			}
		}
		id := strconv.Itoa(step)
		want := s.Request()
		if base == nil || step%50 == 0 { // now and then, in full
			base = s.Record(id)
			h = &held{id: id, job: want.GetJob(), pods: map[string]*jobplanev1.Pod{}}
			for _, p := range want.GetPods() {
				h.pods[p.GetMetadata().GetUid()] = p
			}
			continue
		}
		checkWireRequest(t, s, id, want)
		before := cloneSent(base)
		d := s.Delta(base)
		base.ID = id
		checkWireDelta(t, s, id, before, d)
		for _, p := range d.GetUpsertedPods() {
			if !changes[p.GetMetadata().GetUid()] {
				t.Errorf("step %d: pod %s upserted, unchanged", step, p.GetMetadata().GetUid())
			}
		}
		if got := h.apply(t, id, d); !sameSnapshot(got, want) {
			t.Fatalf("step %d: the delta applied to its base is not the snapshot", step)
		}
		if base.Pods() != len(pods) {
			t.Fatalf("step %d: the record holds %d pods, the snapshot %d", step, base.Pods(), len(pods))
		}
	}
}

// Requests leave the pods' labels out (the sync reads none) and leave the
// executor's objects as they were.
func TestRequestsCarryNoPodLabels(t *testing.T) {
	p := testPod(1, 5, corev1.PodRunning)
	p.Labels = map[string]string{"app": "x"}
	p.Annotations = map[string]string{batchv1.JobCompletionIndexAnnotation: "1"}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", UID: "job-uid", ResourceVersion: "1"}}
	s := &Snapshot{Job: job, Pods: []*corev1.Pod{p}, Now: time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)}
	full := s.Request().GetPods()[0]
	base := s.Record("1")
	p2 := p.DeepCopy()
	p2.ResourceVersion = "6"
	s.Pods = []*corev1.Pod{p2}
	delta := s.Delta(base).GetUpsertedPods()[0]
	for _, got := range []*jobplanev1.Pod{full, delta} {
		if got.GetMetadata().GetLabels() != nil || got.GetMetadata().GetAnnotations()[batchv1.JobCompletionIndexAnnotation] != "1" || got.GetMetadata().GetName() != p.Name {
			t.Errorf("request pod %v: want the pod without its labels", got.GetMetadata())
		}
	}
	if p.Labels["app"] != "x" || p2.Labels["app"] != "x" {
		t.Error("the executor's pods lost their labels")
	}
}

// checkWireRequest checks that the snapshot's WireRequest and WirePlanSync
// are the encodings of the request want, streamed and unary.
func checkWireRequest(t *testing.T, s *Snapshot, id string, want *jobplanev1.PlanSyncRequest) {
	t.Helper()
	w, err := s.WireRequest(id)
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(&jobplanev1.StreamPlanSyncRequest{Id: id, Request: want})
	if err != nil {
		t.Fatal(err)
	}
	if got := bytes.Join(w.parts, nil); !bytes.Equal(got, b) {
		t.Fatalf("WireRequest wrote\n%q\nthe request encodes as\n%q", got, b)
	}
	u, err := s.WirePlanSync()
	if err != nil {
		t.Fatal(err)
	}
	b, err = proto.MarshalOptions{Deterministic: true}.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if got := bytes.Join(u.parts, nil); !bytes.Equal(got, b) {
		t.Fatalf("WirePlanSync wrote\n%q\nthe request encodes as\n%q", got, b)
	}
}

// checkWireDelta checks that the snapshot's WireDelta against base is
// want, the Delta against a copy of base, removed pods in any order.
func checkWireDelta(t *testing.T, s *Snapshot, id string, base *Sent, want *jobplanev1.PlanSyncDelta) {
	t.Helper()
	w, err := s.WireDelta(id, base)
	if err != nil {
		t.Fatal(err)
	}
	var got jobplanev1.StreamPlanSyncRequest
	if err := proto.Unmarshal(bytes.Join(w.parts, nil), &got); err != nil {
		t.Fatal(err)
	}
	want = proto.Clone(want).(*jobplanev1.PlanSyncDelta)
	slices.Sort(want.RemovedPodUids)
	slices.Sort(got.Delta.RemovedPodUids)
	if got.GetId() != id || !proto.Equal(got.GetDelta(), want) {
		t.Fatalf("WireDelta decodes as\n%v\nthe delta is\n%v", &got, want)
	}
	if len(want.RemovedPodUids) == 0 { // one order: the same bytes
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(&jobplanev1.StreamPlanSyncRequest{Id: id, Delta: want})
		if err != nil || !bytes.Equal(bytes.Join(w.parts, nil), b) {
			t.Fatalf("WireDelta wrote\n%q\nthe delta encodes as\n%q", bytes.Join(w.parts, nil), b)
		}
	}
}

func cloneSent(b *Sent) *Sent {
	c := *b
	c.pods = maps.Clone(b.pods)
	return &c
}
