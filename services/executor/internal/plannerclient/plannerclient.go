// Package plannerclient asks the planner for plans over a long-lived
// StreamPlanSync stream shared by every worker: requests are multiplexed by
// id, and a broken stream is reopened, with backoff, by the next request.
// A full snapshot larger than a quarter of what the planner takes goes on a
// second stream, the bulk lane, so that its bytes never come before another
// Job's sync on the first (HTTP/2 delivers a stream's bytes in order; two
// streams share the connection frame by frame). A Job's snapshots after the
// first are sent as deltas against the last one the planner planned, on the
// stream that holds it; a reopened stream starts in full.
// While the planner is unavailable every request fails with Unavailable, so
// no action is taken and the caller retries the Job later.
package plannerclient

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/types"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/admission"
	"github.com/jobplane/jobplane/lib/apierr"
	"github.com/jobplane/jobplane/lib/grpcserver"
	libplan "github.com/jobplane/jobplane/lib/plan"
)

// Client plans over shared streams, one per lane.
type Client struct {
	conn    *grpc.ClientConn
	planner jobplanev1.PlannerServiceClient
	health  healthpb.HealthClient

	mu     sync.Mutex
	lanes  [lanes]laneState
	nextID uint64

	fullResends atomic.Int64
	sentInParts atomic.Int64
	opened      atomic.Int64
	broke       atomic.Int64
}

// laneState is a lane's current stream, and when to open the next.
type laneState struct {
	stream  *stream
	retryAt time.Time
	backoff time.Duration
	// refusedUntil: the planner refused the lane's stream
	// (RESOURCE_EXHAUSTED: too many streams for the executor); until then
	// the bulk lane's snapshots go on the syncs lane.
	refusedUntil time.Time
}

// lane is what a stream carries.
type lane int

const (
	// syncs carries every Job's syncs but the large full snapshots.
	syncs lane = iota
	// bulk carries the full snapshots larger than a quarter of what the
	// planner takes, in parts when they must be, and then their Jobs'
	// deltas (the planner holds a Job's snapshot on the stream it came
	// on).
	bulk
	lanes
)

// stream is one open StreamPlanSync call and its requests waiting for an
// answer.
type stream struct {
	lane   lane
	call   jobplanev1.PlannerService_StreamPlanSyncClient
	cancel context.CancelFunc
	sendMu sync.Mutex
	// maxMessage is the largest request the planner takes on it, from
	// its header (grpcserver.MaxMessageHeader); 0: unknown. headerSeen is
	// closed once the header is in, or the stream ended without one.
	maxMessage atomic.Int64
	headerSeen chan struct{}

	mu      sync.Mutex
	waiting map[string]chan result
	err     error // set once the stream broke
	// bases are the last snapshots of each Job the planner planned on this
	// stream, hence holds unless it evicted them.
	bases map[types.UID]*libplan.Sent
}

// takeBase removes and returns the record of the Job's last snapshot.
func (s *stream) takeBase(uid types.UID) *libplan.Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bases[uid]
	delete(s.bases, uid)
	return b
}

// putBase records b as the Job's last snapshot planned with p, unless the
// plan finishes the Job (the planner then drops it) or the stream broke.
func (s *stream) putBase(uid types.UID, b *libplan.Sent, p *jobplanev1.SyncPlan) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil || p.GetReleaseJobState() {
		return
	}
	s.bases[uid] = b
}

type result struct {
	resp *jobplanev1.StreamPlanSyncResponse
	err  error
}

const (
	openTimeout = 5 * time.Second
	// headerWait bounds a request's wait for its stream's header: an
	// older planner sends none before its first answer.
	headerWait = time.Second
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
	// refusedLaneRetry is how long a lane whose stream the planner refused
	// is left unused.
	refusedLaneRetry = time.Minute
)

// New returns a client of the planner reached through conn.
func New(conn *grpc.ClientConn) *Client {
	return &Client{conn: conn, planner: jobplanev1.NewPlannerServiceClient(conn), health: healthpb.NewHealthClient(conn)}
}

// Ready reports whether the planner answers its health check as serving.
func (c *Client) Ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := c.health.Check(ctx, &healthpb.HealthCheckRequest{Service: jobplanev1.PlannerService_ServiceDesc.ServiceName})
	if err != nil {
		return fmt.Errorf("planner health check: %w", err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("planner is %s", resp.GetStatus())
	}
	return nil
}

// Plan returns the planner's plan for req, sent in full. Errors are gRPC
// status errors: the planner's own (InvalidArgument for a snapshot it
// refuses) or Unavailable when the stream cannot carry the request.
func (c *Client) Plan(ctx context.Context, req *jobplanev1.PlanSyncRequest) (*jobplanev1.SyncPlan, error) {
	// The planner now holds this snapshot of the Job, not the one recorded.
	c.takeBase(types.UID(req.GetJob().GetMetadata().GetUid()))
	s, id, err := c.open(syncs)
	if err != nil {
		return nil, err
	}
	requests, err := s.fitted(ctx, id, &jobplanev1.StreamPlanSyncRequest{Id: id, Request: req})
	if err != nil {
		return nil, err
	}
	return c.exchange(ctx, s, requests)
}

// PlanSnapshot returns the planner's plan for snap, sent as a delta against
// the last snapshot of the Job planned on a current stream, or in full
// when there is none (a new stream, a new Job, a failed request) or the
// planner answers that it no longer holds it. Errors are as Plan's.
func (c *Client) PlanSnapshot(ctx context.Context, snap *libplan.Snapshot) (*jobplanev1.SyncPlan, error) {
	uid := snap.Job.UID
	// The record is out of the stream's while the request is in flight: a
	// concurrent sync of the same Job sends in full.
	if s, base := c.takeBase(uid); base != nil {
		id := c.newID()
		d, err := snap.WireDelta(id, base)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "encoding the delta: %v", err)
		}
		// A delta that cannot be sent even in parts (its removed pods are
		// more than a request takes) goes in full.
		if requests, err := s.fitted(ctx, id, d); err == nil {
			p, err := c.exchange(ctx, s, requests)
			if err == nil {
				base.ID = id
				c.putBase(s, uid, base, p)
				return p, nil
			}
			if !baseUnknown(err) {
				return nil, err
			}
			c.fullResends.Add(1)
		}
	}
	return c.planInFull(ctx, snap)
}

// planInFull sends snap in full: on the syncs lane, or on the bulk lane
// when it is larger than a quarter of what the planner takes (and the
// planner has not refused the bulk lane's stream lately).
func (c *Client) planInFull(ctx context.Context, snap *libplan.Snapshot) (*jobplanev1.SyncPlan, error) {
	s, id, err := c.open(syncs)
	if err != nil {
		return nil, err
	}
	req, err := snap.WireRequest(id)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "encoding the snapshot: %v", err)
	}
	if limit := s.largestMessage(ctx); limit > 0 && req.Size() > limit/4 && c.usable(bulk) {
		// The id stays: ids are the client's, unique across its streams.
		if s, _, err = c.open(bulk); err != nil {
			return nil, err
		}
	}
	requests, err := s.fitted(ctx, id, req)
	if err != nil {
		return nil, err
	}
	p, err := c.exchange(ctx, s, requests)
	if err == nil {
		c.putBase(s, snap.Job.UID, snap.Record(id), p)
	}
	return p, err
}

// usable says whether the planner has not refused lane l's stream lately.
func (c *Client) usable(l lane) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !time.Now().Before(c.lanes[l].refusedUntil)
}

// putBase records b as the Job's last snapshot on s, planned with p, and
// forgets any record of it on another lane (a Job whose full snapshot
// changed lanes), which the planner no longer holds as its base.
func (c *Client) putBase(s *stream, uid types.UID, b *libplan.Sent, p *jobplanev1.SyncPlan) {
	s.putBase(uid, b, p)
	for _, other := range c.current() {
		if other != nil && other != s {
			other.takeBase(uid)
		}
	}
}

// current is each lane's current stream, nil where none is open.
func (c *Client) current() [lanes]*stream {
	c.mu.Lock()
	defer c.mu.Unlock()
	var streams [lanes]*stream
	for l := range c.lanes {
		streams[l] = c.lanes[l].stream
	}
	return streams
}

// takeBase removes and returns the record of the Job's last snapshot a
// current stream holds, and that stream.
func (c *Client) takeBase(uid types.UID) (*stream, *libplan.Sent) {
	for _, s := range c.current() {
		if s == nil {
			continue
		}
		if b := s.takeBase(uid); b != nil {
			return s, b
		}
	}
	return nil, nil
}

// newID is an id for a request, unique across the client's streams.
func (c *Client) newID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextID++
	return strconv.FormatUint(c.nextID, 36)
}

// Streams is the number of streams opened: one, two once a large snapshot
// was sent, more when one broke.
func (c *Client) Streams() int64 { return c.opened.Load() }

// BrokenStreams is the number of streams that broke (the planner gone,
// or a stream refused).
func (c *Client) BrokenStreams() int64 { return c.broke.Load() }

// Collectors are the client's counters as metrics.
func (c *Client) Collectors() []prometheus.Collector {
	counter := func(name, help string, n func() int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(n()) })
	}
	return []prometheus.Collector{
		counter("jobplane_planner_streams_opened_total", "StreamPlanSync streams opened: one, two once a large snapshot was sent (the bulk lane), more when one broke.", c.Streams),
		counter("jobplane_planner_full_resends_total", "Deltas whose base the planner no longer held (SNAPSHOT_BASE_UNKNOWN), resent in full.", c.FullResends),
		counter("jobplane_planner_snapshots_sent_in_parts_total", "Snapshots larger than the planner takes in one request, sent in parts.", c.SentInParts),
		counter("jobplane_planner_streams_broken_total", "StreamPlanSync streams that broke: the planner gone, or a stream refused.", c.BrokenStreams),
	}
}

// SentInParts is the number of snapshots sent in parts, each larger than
// the planner takes in one request.
func (c *Client) SentInParts() int64 { return c.sentInParts.Load() }

// FullResends is the number of deltas the planner answered with
// SNAPSHOT_BASE_UNKNOWN, resent in full.
func (c *Client) FullResends() int64 { return c.fullResends.Load() }

// baseUnknown: the planner does not hold the delta's base.
func baseUnknown(err error) bool {
	return status.Code(err) == codes.FailedPrecondition && apierr.Reason(err) == "SNAPSHOT_BASE_UNKNOWN"
}

// streamRefused: the planner's admission refused the stream (err its end),
// as it refuses a caller one stream too many: not a request it refused.
func streamRefused(err error) bool {
	reason := apierr.Reason(err)
	return status.Code(err) == codes.ResourceExhausted && (reason == admission.ReasonTooManyStreams || reason == admission.ReasonStreamPreempted)
}

// outgoing is a request to send, its id, and where its answer comes.
type outgoing struct {
	id     string
	msg    any
	answer chan result
}

// fitted is msg, the request id, as the requests the planner takes on s:
// itself, or its snapshot in parts (libplan.WireRequest.Parts) when the
// planner takes no request as large: on the syncs lane in parts of a
// quarter of that when they can be, on the bulk lane of all of it. A request that cannot be split so is
// refused: sent, it would end the stream every Job's plans share.
func (s *stream) fitted(ctx context.Context, id string, msg any) ([]outgoing, error) {
	limit := s.largestMessage(ctx)
	var size int
	switch m := msg.(type) {
	case *libplan.WireRequest:
		size = m.Size()
		if limit <= 0 || size <= limit {
			break
		}
		if parts, ok := s.inParts(m, limit); ok {
			out := make([]outgoing, len(parts))
			for i, p := range parts {
				out[i] = outgoing{id: p.ID(), msg: p, answer: make(chan result, 1)}
			}
			return out, nil
		}
	case proto.Message:
		size = proto.Size(m)
	}
	if limit <= 0 || size <= limit {
		return []outgoing{{id: id, msg: msg, answer: make(chan result, 1)}}, nil
	}
	return nil, apierr.New(codes.ResourceExhausted, libplan.ReasonTooLarge, map[string]string{"size": strconv.Itoa(size), "limit": strconv.Itoa(limit)},
		"the Job's snapshot is %d bytes, more than the planner takes (%d), and cannot be sent in parts: its Job, or one of its pods, is too large alone; a planner with more memory (-max-recv-msg-bytes, GOMEMLIMIT) takes it", size, limit)
}

// inParts is w, larger than limit, in parts. On the syncs lane (a large
// delta, or a Plan in full) they are of at most a quarter of limit when
// they can be: a part's bytes come before those of any request sent after
// it, and quarter parts let another Job's sync through a quarter as late.
// On the bulk lane no other Job's sync waits behind them, and the fewer
// parts, the fewer decoded at once beside the syncs (BENCHMARKS.md, "A
// large snapshot on a stream of its own").
func (s *stream) inParts(w *libplan.WireRequest, limit int) ([]*libplan.WireRequest, bool) {
	if s.lane == syncs {
		if parts, ok := w.Parts(limit / 4); ok {
			return parts, true
		}
	}
	return w.Parts(limit)
}

// largestMessage is the largest request the planner takes on s, 0 when
// unknown. The planner sends its header as the stream opens; one that
// does not (an older planner) sends it with its first answer, so a request
// waits for it at most headerWait.
func (s *stream) largestMessage(ctx context.Context) int {
	select {
	case <-s.headerSeen:
	default:
		wait := time.NewTimer(headerWait)
		defer wait.Stop()
		select {
		case <-s.headerSeen:
		case <-wait.C:
		case <-ctx.Done():
		}
	}
	return int(s.maxMessage.Load())
}

// exchange sends requests, a snapshot as fitted made it (one request, or
// its parts), on s and waits for its answer: the plan, or the first error
// of its parts.
func (c *Client) exchange(ctx context.Context, s *stream, requests []outgoing) (*jobplanev1.SyncPlan, error) {
	if len(requests) > 1 {
		c.sentInParts.Add(1)
	}
	for i, r := range requests {
		if err := s.register(r.id, r.answer); err != nil {
			s.unregister(requests[:i]...)
			return nil, err
		}
	}
	for _, r := range requests {
		s.sendMu.Lock()
		err := s.call.SendMsg(r.msg)
		s.sendMu.Unlock()
		if err != nil {
			c.broken(s, err)
			return nil, unavailable(err)
		}
	}
	for i, req := range requests {
		select {
		case r := <-req.answer:
			if r.err != nil {
				return nil, r.err
			}
			if e := r.resp.GetError(); e != nil {
				s.unregister(requests[i+1:]...)
				return nil, status.ErrorProto(e)
			}
			if i == len(requests)-1 {
				return r.resp.GetResponse().GetPlan(), nil
			}
		case <-ctx.Done():
			s.unregister(requests[i:]...)
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	panic("unreachable: a request has at least one part")
}

// open returns the current stream of lane l, opening one when none is,
// and an id for a request.
func (c *Client) open(l lane) (*stream, string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextID++
	id := strconv.FormatUint(c.nextID, 36)
	if s := c.lanes[l].stream; s != nil {
		return s, id, nil
	}
	if now := time.Now(); now.Before(c.lanes[l].retryAt) {
		return nil, "", status.Errorf(codes.Unavailable, "planner stream closed; reconnecting in %s", c.lanes[l].retryAt.Sub(now).Round(time.Millisecond))
	}
	// The stream outlives this call, but opening it must not hold every
	// worker (they wait on c.mu) longer than openTimeout.
	ctx, cancel := context.WithCancel(context.Background())
	timer := time.AfterFunc(openTimeout, cancel)
	// The chassis' codec sends the requests written straight from the
	// Kubernetes objects (libplan.WireRequest).
	call, err := c.planner.StreamPlanSync(ctx, grpcserver.CallCodec())
	if !timer.Stop() && err == nil {
		err = fmt.Errorf("opening the stream took more than %s", openTimeout)
	}
	if err != nil {
		cancel()
		c.failedOpen(l)
		return nil, "", unavailable(err)
	}
	c.opened.Add(1)
	s := &stream{lane: l, call: call, cancel: cancel, headerSeen: make(chan struct{}), waiting: map[string]chan result{}, bases: map[types.UID]*libplan.Sent{}}
	c.lanes[l].stream = s
	go c.receive(s)
	return s, id, nil
}

// headerLimit is the largest request the planner takes on call, as its
// header says (grpcserver.MaxMessageHeader); 0 when it does not say, or the
// stream ended first (Recv then says why).
func headerLimit(call jobplanev1.PlannerService_StreamPlanSyncClient) int64 {
	md, err := call.Header()
	if err != nil {
		return 0
	}
	if v := md.Get(grpcserver.MaxMessageHeader); len(v) == 1 {
		if n, err := strconv.ParseInt(v[0], 10, 64); err == nil {
			return n
		}
	}
	return 0
}

// failedOpen pushes lane l's next attempt back, exponentially; c.mu is
// held.
func (c *Client) failedOpen(l lane) {
	ls := &c.lanes[l]
	ls.backoff = min(max(2*ls.backoff, minBackoff), maxBackoff)
	ls.retryAt = time.Now().Add(ls.backoff)
}

func (c *Client) receive(s *stream) {
	s.maxMessage.Store(headerLimit(s.call))
	close(s.headerSeen)
	for {
		resp, err := s.call.Recv()
		if err != nil {
			c.broken(s, err)
			return
		}
		c.mu.Lock()
		c.lanes[s.lane].backoff = 0 // the stream works
		c.mu.Unlock()
		s.deliver(resp.GetId(), result{resp: resp})
	}
}

// broken fails every request waiting on s and lets the next request reopen
// its lane; a bulk lane the planner refused (streamRefused) is left unused
// for refusedLaneRetry.
func (c *Client) broken(s *stream, err error) {
	c.mu.Lock()
	ls := &c.lanes[s.lane]
	if ls.stream == s {
		ls.stream = nil
		c.failedOpen(s.lane)
		c.broke.Add(1)
	}
	// Its status comes to the receiver; a send may have seen only its end.
	if s.lane == bulk && streamRefused(err) {
		ls.refusedUntil = time.Now().Add(refusedLaneRetry)
	}
	c.mu.Unlock()
	s.cancel()
	s.fail(unavailable(err))
}

func (s *stream) register(id string, ch chan result) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.waiting[id] = ch
	return nil
}

func (s *stream) unregister(requests ...outgoing) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range requests {
		delete(s.waiting, r.id)
	}
}

func (s *stream) deliver(id string, r result) {
	s.mu.Lock()
	ch, ok := s.waiting[id]
	delete(s.waiting, id)
	s.mu.Unlock()
	if ok {
		ch <- r
	}
}

func (s *stream) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
	for id, ch := range s.waiting {
		ch <- result{err: err}
		delete(s.waiting, id)
	}
}

// Close ends the current streams.
func (c *Client) Close() {
	c.mu.Lock()
	var streams [lanes]*stream
	for l := range c.lanes {
		streams[l], c.lanes[l].stream = c.lanes[l].stream, nil
	}
	c.mu.Unlock()
	for _, s := range streams {
		if s != nil {
			s.cancel()
			s.fail(status.Error(codes.Unavailable, "planner client closed"))
		}
	}
}

func unavailable(err error) error {
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown && st.Code() != codes.OK {
		if st.Code() == codes.Canceled || st.Code() == codes.Unavailable || st.Code() == codes.DeadlineExceeded {
			return status.Errorf(codes.Unavailable, "planner unavailable: %s", st.Message())
		}
		return err
	}
	if errors.Is(err, context.Canceled) {
		return status.Error(codes.Unavailable, "planner stream cancelled")
	}
	return status.Errorf(codes.Unavailable, "planner unavailable: %v", err)
}
