package plannerclient

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/admission"
	"github.com/jobplane/jobplane/lib/apierr"
	libplan "github.com/jobplane/jobplane/lib/plan"
)

// deltaPlanner holds the snapshots of each stream as the contract says and
// answers with a plan whose summary is a digest of the snapshot it stands
// for. Jobs named "finish" are finished by their plan; pods named "bad" are
// refused.
type deltaPlanner struct {
	jobplanev1.UnimplementedPlannerServiceServer

	// maxMessage is the largest request it takes, 64 MiB when 0: a larger
	// one ends the stream, as the chassis does.
	maxMessage int
	// maxStreams: the streams it opens, then refuses (0: any number), as
	// the chassis refuses a caller past -max-streams-per-caller.
	maxStreams int
	// endSecondStream ends the second stream opened at its first request
	// with this error, when set.
	endSecondStream error

	mu    sync.Mutex
	kinds []string // "full" or "delta N/M" (upserted/removed), "+" when partial, in order
	// on are the streams the kinds came on, numbered from 1 as they opened.
	on     []int
	opened int
	forget bool // evict every snapshot before the next request
}

type heldSnapshot struct {
	id   string
	job  *jobplanev1.Job
	pods map[string]*jobplanev1.Pod
}

func (f *deltaPlanner) StreamPlanSync(stream grpc.BidiStreamingServer[jobplanev1.StreamPlanSyncRequest, jobplanev1.StreamPlanSyncResponse]) error {
	f.mu.Lock()
	f.opened++
	n := f.opened
	f.mu.Unlock()
	if f.maxStreams > 0 && n > f.maxStreams {
		return admission.Exhausted("too many streams", admission.ReasonTooManyStreams, "system", time.Second)
	}
	limit := cmp.Or(f.maxMessage, 64<<20)
	if err := sendMaxMessage(stream, limit); err != nil {
		return err
	}
	held := map[string]*heldSnapshot{}
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if n := proto.Size(req); n > limit {
			return status.Errorf(codes.ResourceExhausted, "a request of %d bytes, more than %d", n, limit)
		}
		if f.endSecondStream != nil && n == 2 {
			f.mu.Lock()
			end := f.endSecondStream
			f.endSecondStream = nil
			f.mu.Unlock()
			if end != nil {
				return end
			}
		}
		resp := &jobplanev1.StreamPlanSyncResponse{Id: req.GetId()}
		if plan, err := f.plan(held, req, n); err != nil {
			resp.Error = status.Convert(err).Proto()
		} else if plan != nil {
			resp.Response = &jobplanev1.PlanSyncResponse{Plan: plan}
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

func (f *deltaPlanner) plan(held map[string]*heldSnapshot, req *jobplanev1.StreamPlanSyncRequest, stream int) (*jobplanev1.SyncPlan, error) {
	f.mu.Lock()
	if f.forget {
		clear(held)
		f.forget = false
	}
	f.mu.Unlock()
	var h *heldSnapshot
	if full := req.GetRequest(); full != nil {
		h = &heldSnapshot{job: full.GetJob(), pods: map[string]*jobplanev1.Pod{}}
		for _, p := range full.GetPods() {
			h.pods[p.GetMetadata().GetUid()] = p
		}
		delete(held, full.GetJob().GetMetadata().GetUid())
		f.record("full", req.GetPartial(), stream)
	} else {
		d := req.GetDelta()
		h = held[d.GetJobUid()]
		delete(held, d.GetJobUid())
		f.record(fmt.Sprintf("delta %d/%d", len(d.GetUpsertedPods()), len(d.GetRemovedPodUids())), req.GetPartial(), stream)
		if h == nil || h.id != d.GetBaseId() {
			return nil, apierr.New(codes.FailedPrecondition, "SNAPSHOT_BASE_UNKNOWN", nil, "unknown base %q", d.GetBaseId())
		}
		if d.GetJob() != nil {
			h.job = d.GetJob()
		}
		for _, uid := range d.GetRemovedPodUids() {
			delete(h.pods, uid)
		}
		for _, p := range d.GetUpsertedPods() {
			h.pods[p.GetMetadata().GetUid()] = p
		}
	}
	for _, p := range h.pods {
		if p.GetMetadata().GetName() == "bad" {
			return nil, apierr.Invalid("invalid", field.ErrorList{field.Invalid(field.NewPath("pods"), "bad", "bad")})
		}
	}
	h.id = req.GetId()
	name := h.job.GetMetadata().GetName()
	if req.GetPartial() {
		held[h.job.GetMetadata().GetUid()] = h
		return nil, nil
	}
	if name != "finish" {
		held[h.job.GetMetadata().GetUid()] = h
	}
	return &jobplanev1.SyncPlan{Summary: digest(h.job, h.pods), ReleaseJobState: name == "finish"}, nil
}

func (f *deltaPlanner) record(kind string, partial bool, stream int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if partial {
		kind += "+"
	}
	f.kinds = append(f.kinds, kind)
	f.on = append(f.on, stream)
}

// sent is what came, in order, and on which stream.
func (f *deltaPlanner) sent() ([]string, []int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.kinds), slices.Clone(f.on)
}

func (f *deltaPlanner) lastKind() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.kinds[len(f.kinds)-1]
}

// digest names a snapshot's Job and pods by content.
func digest(job *jobplanev1.Job, pods map[string]*jobplanev1.Pod) string {
	var parts []string
	for uid, p := range pods {
		parts = append(parts, uid+"="+p.GetStatus().GetPhase()+"@"+p.GetMetadata().GetResourceVersion())
	}
	slices.Sort(parts)
	return fmt.Sprintf("%s active=%d: %s", job.GetMetadata().GetName(), job.GetStatus().GetActive(), strings.Join(parts, ","))
}

// digestOf is the digest of snap sent in full.
func digestOf(snap *libplan.Snapshot) string {
	req := snap.Request()
	pods := map[string]*jobplanev1.Pod{}
	for _, p := range req.GetPods() {
		pods[p.GetMetadata().GetUid()] = p
	}
	return digest(req.GetJob(), pods)
}

// world is a Job and its pods as the executor's informers show them.
type world struct {
	job  *batchv1.Job
	pods []*corev1.Pod
	rv   int
}

func newWorld(name string, n int) *world {
	w := &world{job: &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), ResourceVersion: "1"}}, rv: 10}
	for i := range n {
		w.pods = append(w.pods, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, i), Namespace: "ns", UID: types.UID(fmt.Sprintf("%s-pod-%d", name, i)), ResourceVersion: strconv.Itoa(w.rv)},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning},
		})
	}
	return w
}

func (w *world) snapshot() *libplan.Snapshot {
	return &libplan.Snapshot{Job: w.job, Pods: slices.Clone(w.pods), Now: time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)}
}

// succeed changes pod i (a new object, a new resourceVersion).
func (w *world) succeed(i int) {
	w.rv++
	p := w.pods[i].DeepCopy()
	p.Status.Phase = corev1.PodSucceeded
	p.ResourceVersion = strconv.Itoa(w.rv)
	w.pods[i] = p
}

func (w *world) setActive(n int32) {
	w.rv++
	j := w.job.DeepCopy()
	j.Status.Active = n
	j.ResourceVersion = strconv.Itoa(w.rv)
	w.job = j
}

func planSnapshot(t *testing.T, c *Client, w *world) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	snap := w.snapshot()
	p, err := c.PlanSnapshot(ctx, snap)
	if err == nil && p.GetSummary() != digestOf(snap) {
		t.Fatalf("the planner planned %q, the snapshot is %q", p.GetSummary(), digestOf(snap))
	}
	return p.GetSummary(), err
}

func mustPlan(t *testing.T, c *Client, w *world, wantKind string, f *deltaPlanner) {
	t.Helper()
	if _, err := planSnapshot(t, c, w); err != nil {
		t.Fatal(err)
	}
	if got := f.lastKind(); got != wantKind {
		t.Fatalf("sent %q, want %q", got, wantKind)
	}
}

func TestSnapshotsAfterTheFirstAreSentAsDeltas(t *testing.T) {
	f := &deltaPlanner{}
	c := clientOf(t, f)
	a, b := newWorld("a", 50), newWorld("b", 20)
	mustPlan(t, c, a, "full", f)
	mustPlan(t, c, b, "full", f)
	mustPlan(t, c, a, "delta 0/0", f)
	a.succeed(3)
	a.succeed(7)
	mustPlan(t, c, a, "delta 2/0", f)
	a.pods = slices.Delete(a.pods, 10, 13)
	a.setActive(5)
	mustPlan(t, c, a, "delta 0/3", f)
	a.pods = append(a.pods, newWorld("c", 1).pods[0])
	mustPlan(t, c, a, "delta 1/0", f)
	b.succeed(0)
	mustPlan(t, c, b, "delta 1/0", f)

	// Pods without a resourceVersion are always sent.
	a.pods[0] = a.pods[0].DeepCopy()
	a.pods[0].ResourceVersion = ""
	mustPlan(t, c, a, "delta 1/0", f)
	mustPlan(t, c, a, "delta 1/0", f)

	// The Job of the plan Plan sent in full is the planner's base now.
	if _, err := c.Plan(context.Background(), a.snapshot().Request()); err != nil {
		t.Fatal(err)
	}
	mustPlan(t, c, a, "full", f)
	mustPlan(t, c, a, "delta 1/0", f)
}

// clientOf is a client of a planner serving f.
func clientOf(t *testing.T, f *deltaPlanner) *Client {
	t.Helper()
	return newClient(t, startPlannerImpl(t, f))
}

// startPlannerImpl starts a planner process serving impl.
func startPlannerImpl(t *testing.T, impl jobplanev1.PlannerServiceServer) *planner {
	t.Helper()
	p := &planner{t: t, addr: "127.0.0.1:0", serve: impl}
	p.start()
	t.Cleanup(p.stop)
	return p
}

func TestDeltaAgainstAnEvictedBaseIsResentInFull(t *testing.T) {
	f := &deltaPlanner{}
	c := clientOf(t, f)
	a := newWorld("a", 30)
	mustPlan(t, c, a, "full", f)
	a.succeed(1)
	f.mu.Lock()
	f.forget = true
	f.mu.Unlock()
	mustPlan(t, c, a, "full", f) // after the refused delta
	f.mu.Lock()
	kinds := slices.Clone(f.kinds)
	f.mu.Unlock()
	if want := []string{"full", "delta 1/0", "full"}; !slices.Equal(kinds, want) {
		t.Errorf("sent %q, want %q", kinds, want)
	}
	if c.FullResends() != 1 {
		t.Errorf("%d full resends, want 1", c.FullResends())
	}
	a.succeed(2)
	mustPlan(t, c, a, "delta 1/0", f)
}

func TestFailedOrFinishingSyncsAreFollowedByFullSnapshots(t *testing.T) {
	f := &deltaPlanner{}
	c := clientOf(t, f)
	a := newWorld("a", 5)
	mustPlan(t, c, a, "full", f)
	good := a.pods[2]
	a.pods[2] = good.DeepCopy()
	a.pods[2].Name, a.pods[2].ResourceVersion = "bad", "999"
	if _, err := planSnapshot(t, c, a); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("got %v, want InvalidArgument", err)
	}
	a.pods[2] = good
	mustPlan(t, c, a, "full", f)
	mustPlan(t, c, a, "delta 0/0", f)

	fin := newWorld("finish", 3)
	mustPlan(t, c, fin, "full", f)
	mustPlan(t, c, fin, "full", f)
}

func TestReconnectStartsWithFullSnapshots(t *testing.T) {
	f := &deltaPlanner{}
	p := startPlannerImpl(t, f)
	c := newClient(t, p)
	a := newWorld("a", 10)
	mustPlan(t, c, a, "full", f)
	mustPlan(t, c, a, "delta 0/0", f)
	p.stop()
	p.start()
	eventually(t, 20*time.Second, "plans work again once the planner is back", func() bool {
		_, err := planSnapshot(t, c, a)
		return err == nil
	})
	if got := f.lastKind(); got != "full" {
		t.Fatalf("first request on the new stream: %q, want full", got)
	}
	a.succeed(4)
	mustPlan(t, c, a, "delta 1/0", f)
}

// A snapshot larger than the planner takes is sent in parts, each within
// its limit, and planned whole: in full, then as a delta; a snapshot that
// fits is sent as it is, and the next delta is based on the last part. A
// full snapshot that large goes on the bulk lane's stream, in parts of all
// the planner takes, and its Job's deltas follow it there.
func TestASnapshotLargerThanThePlannerTakesIsSentInParts(t *testing.T) {
	f := &deltaPlanner{maxMessage: 1500}
	c := clientOf(t, f)
	a := newWorld("a", 60)
	if _, err := planSnapshot(t, c, a); err != nil {
		t.Fatal(err)
	}
	a.succeed(3)
	mustPlan(t, c, a, "delta 1/0", f)
	for i := range a.pods {
		a.succeed(i)
	}
	a.pods = a.pods[5:]
	if _, err := planSnapshot(t, c, a); err != nil {
		t.Fatal(err)
	}
	kinds, on := f.sent()
	// Parts of what the planner takes, 1,500 bytes: about 30 pods.
	want := []string{"full+", "delta 25/0", "delta 1/0", "delta 32/5+", "delta 23/0"}
	if !slices.Equal(kinds, want) {
		t.Errorf("sent %q, want %q", kinds, want)
	}
	if want := slices.Repeat([]int{2}, len(kinds)); !slices.Equal(on, want) {
		t.Errorf("sent on streams %v, want all on the second opened (the bulk lane's; the syncs lane's opens first, empty)", on)
	}
	if n := c.SentInParts(); n != 2 {
		t.Errorf("%d snapshots sent in parts, want 2", n)
	}
	if n := testutil.ToFloat64(c.Collectors()[2]); n != 2 {
		t.Errorf("jobplane_planner_snapshots_sent_in_parts_total = %v, want 2", n)
	}
	if n := c.Streams(); n != 2 {
		t.Errorf("%d streams opened, want 2 (the syncs lane and the bulk lane): a request was too large for the planner", n)
	}
}

// A part the planner refuses fails the sync with its error, and the next
// sync of the Job starts again in full.
func TestAPartRefusedFailsTheSync(t *testing.T) {
	f := &deltaPlanner{maxMessage: 1500}
	c := clientOf(t, f)
	a := newWorld("a", 60)
	good := a.pods[2]
	a.pods[2] = good.DeepCopy()
	a.pods[2].Name = "bad"
	if _, err := planSnapshot(t, c, a); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("got %v, want the first part's InvalidArgument", err)
	}
	a.pods[2] = good
	f.mu.Lock()
	before := len(f.kinds)
	f.mu.Unlock()
	if _, err := planSnapshot(t, c, a); err != nil {
		t.Fatal(err)
	}
	// The refused sync's later parts may still be recorded after it
	// returned: the next sync is the chain from the last full part.
	f.mu.Lock()
	kinds := slices.Clone(f.kinds)
	f.mu.Unlock()
	start := len(kinds) - 1
	for start >= 0 && kinds[start] != "full+" {
		start--
	}
	if start < before {
		t.Errorf("sent %q after the refusal, want the snapshot in full, in parts", kinds[before:])
	}
}

// A delta whose removed pods alone are more than the planner takes in one
// request (it cannot be split) is sent in full instead, in parts.
func TestADeltaThatCannotBeSplitIsSentInFull(t *testing.T) {
	f := &deltaPlanner{maxMessage: 1500}
	c := clientOf(t, f)
	a := newWorld(strings.Repeat("a", 40), 60)
	if _, err := planSnapshot(t, c, a); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	before := len(f.kinds)
	f.mu.Unlock()
	a.pods = a.pods[50:]
	if _, err := planSnapshot(t, c, a); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	kinds := slices.Clone(f.kinds[before:])
	f.mu.Unlock()
	if len(kinds) == 0 || !strings.HasPrefix(kinds[0], "full") {
		t.Errorf("sent %q after 50 pods were removed, want the snapshot in full", kinds)
	}
}

// A sync whose parts are not all answered before its deadline fails alone:
// none of its parts stays waiting, and the stream serves the next sync.
func TestASyncInPartsCancelledLeavesNothingWaiting(t *testing.T) {
	impl := &fakePlanner{maxMessage: 1000}
	c := newClient(t, startPlanner(t, impl))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := c.PlanSnapshot(ctx, newWorld("hold-big", 60).snapshot()) // its first part is never answered
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("got %v, want DeadlineExceeded", err)
	}
	if c.SentInParts() != 1 {
		t.Fatalf("%d snapshots sent in parts, want 1", c.SentInParts())
	}
	if summary, err := plan(t, c, "after"); err != nil || summary != "plan for after" {
		t.Fatalf("plan after it = %q, %v", summary, err)
	}
	waiting := 0
	for _, s := range c.current() {
		s.mu.Lock()
		waiting += len(s.waiting)
		s.mu.Unlock()
	}
	if waiting != 0 || impl.streams.Load() != 2 {
		t.Errorf("%d requests still waiting, %d streams opened; want none and 2 (a lane each)", waiting, impl.streams.Load())
	}
}

// A planner that refuses the executor a second stream (its
// -max-streams-per-caller at 1) costs a large Job's sync one retry: its
// snapshots then go on the syncs lane, in quarters.
func TestARefusedBulkLaneLeavesTheSyncsLane(t *testing.T) {
	f := &deltaPlanner{maxMessage: 1500, maxStreams: 1}
	c := clientOf(t, f)
	large := newWorld("large", 60)
	if _, err := planSnapshot(t, c, large); err == nil {
		t.Fatal("planned on a refused stream")
	}
	eventually(t, 5*time.Second, "the large Job planned on the syncs lane", func() bool {
		_, err := planSnapshot(t, c, large)
		return err == nil
	})
	kinds, on := f.sent()
	if len(kinds) < 5 || kinds[0] != "full+" || slices.Max(on) != 1 {
		t.Errorf("sent %q on streams %v, want the snapshot in quarters on the first stream", kinds, on)
	}
	if n := c.BrokenStreams(); n != 1 {
		t.Errorf("%d streams broke, want 1 (the refused one)", n)
	}
	large.succeed(0)
	mustPlan(t, c, large, "delta 1/0", f)
}

// A bulk stream ended by a RESOURCE_EXHAUSTED that is not its refusal (a
// request the planner would not take, its unread answers) costs the sync
// that was on it and nothing more: the next large snapshot opens a bulk
// stream again, rather than go on the syncs lane for refusedLaneRetry.
func TestABulkStreamEndedOtherwiseIsReopened(t *testing.T) {
	f := &deltaPlanner{maxMessage: 1500,
		endSecondStream: status.Error(codes.ResourceExhausted, "a request of 1501 bytes, more than 1500")}
	c := clientOf(t, f)
	large := newWorld("large", 60)
	if _, err := planSnapshot(t, c, large); err == nil {
		t.Fatal("planned on a stream that ended")
	}
	eventually(t, 5*time.Second, "the large Job planned once its lane reopens", func() bool {
		_, err := planSnapshot(t, c, large)
		return err == nil
	})
	if _, on := f.sent(); on[len(on)-1] != 3 {
		t.Errorf("the snapshot sent on streams %v, want its last part on a third stream: the bulk lane opened again", on)
	}
}

// On the syncs lane a request in parts goes in parts of a quarter of what
// the planner takes: a small Job's delta grown large (its base is there).
// A snapshot whose Job alone is more than a quarter goes in parts of what
// it takes.
func TestPartsOnTheSyncsLaneAreAQuarterOfTheLimit(t *testing.T) {
	f := &deltaPlanner{maxMessage: 1500}
	c := clientOf(t, f)
	a := newWorld("a", 2)
	mustPlan(t, c, a, "full", f)
	a.pods = append(a.pods, newWorld("b", 40).pods...)
	if _, err := planSnapshot(t, c, a); err != nil {
		t.Fatal(err)
	}
	kinds, on := f.sent()
	// Quarters of 1,500 bytes, seven or eight pods each: six parts, where
	// parts of 1,500 bytes would be two.
	if len(kinds) != 7 || kinds[0] != "full" || kinds[1] != "delta 8/0+" || slices.Max(on) != 1 {
		t.Errorf("sent %q on streams %v, want the full snapshot then the delta in six parts, all on the first stream", kinds, on)
	}
}

// A full snapshot larger than a quarter of what the planner takes goes on
// the bulk lane's stream, so that its bytes never come before another Job's
// sync; each Job's deltas follow its base.
func TestALargeSnapshotGoesOnAStreamOfItsOwn(t *testing.T) {
	f := &deltaPlanner{maxMessage: 1500}
	c := clientOf(t, f)
	small, large := newWorld("small", 2), newWorld("large", 20)
	mustPlan(t, c, small, "full", f)
	if _, err := planSnapshot(t, c, large); err != nil {
		t.Fatal(err)
	}
	small.succeed(0)
	mustPlan(t, c, small, "delta 1/0", f)
	large.succeed(0)
	mustPlan(t, c, large, "delta 1/0", f)
	kinds, on := f.sent()
	if want := []string{"full", "full", "delta 1/0", "delta 1/0"}; !slices.Equal(kinds, want) {
		t.Fatalf("sent %q, want %q", kinds, want)
	}
	if want := []int{1, 2, 1, 2}; !slices.Equal(on, want) {
		t.Errorf("sent on streams %v, want %v: the large Job's on a stream of its own", on, want)
	}
	if n := c.BrokenStreams(); n != 0 {
		t.Errorf("%d streams broke, want none", n)
	}
}

// A Job whose full snapshot goes on the other lane (it grew, or its base
// was lost) is recorded on that lane alone: its next delta goes there, and
// the lane it left keeps no record of it.
func TestAJobsBaseIsOnOneLaneOnly(t *testing.T) {
	f := &deltaPlanner{maxMessage: 1500}
	c := clientOf(t, f)
	grown := newWorld("grown", 2)
	mustPlan(t, c, grown, "full", f)
	// Sent in full with its new pods (as after a lost base): the bulk lane.
	grown.pods = append(grown.pods, newWorld("more", 20).pods...)
	if _, err := c.planInFull(context.Background(), grown.snapshot()); err != nil {
		t.Fatal(err)
	}
	streams := c.current()
	if b := streams[syncs].takeBase(grown.job.UID); b != nil {
		t.Error("the syncs lane still records the Job's base")
	}
	grown.succeed(0)
	mustPlan(t, c, grown, "delta 1/0", f)
	if _, on := f.sent(); on[len(on)-1] != 2 {
		t.Errorf("the delta went on stream %d, want 2 (the bulk lane, which holds its base)", on[len(on)-1])
	}
}

// A snapshot whose Job alone is more than a quarter of what the planner
// takes goes in parts of what it takes.
func TestPartsAreAQuarterOfTheLimitWhenTheJobFits(t *testing.T) {
	f := &deltaPlanner{maxMessage: 1500}
	c := clientOf(t, f)
	a := newWorld("a", 60)
	var indexes []string
	for i := 0; i < 400; i += 2 {
		indexes = append(indexes, strconv.Itoa(i))
	}
	a.job.Status.CompletedIndexes = strings.Join(indexes, ",") // about 700 bytes
	if _, err := planSnapshot(t, c, a); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	kinds := slices.Clone(f.kinds)
	f.mu.Unlock()
	if len(kinds) < 2 || len(kinds) > 6 || kinds[0] != "full+" {
		t.Errorf("sent %q, want a few parts of up to 1500 bytes", kinds)
	}
}
