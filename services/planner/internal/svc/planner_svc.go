// Package svc is the gRPC face of the planner: it checks and converts
// requests, calls the sync engine, and answers with status errors only.
package svc

import (
	"cmp"
	"context"
	"errors"
	"io"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
	"github.com/jobplane/jobplane/lib/auth"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/jobvalidation"
	"github.com/jobplane/jobplane/lib/kubeconv"
	"github.com/jobplane/jobplane/lib/plan"
	"github.com/jobplane/jobplane/services/planner/internal/engine"
	"github.com/jobplane/jobplane/services/planner/internal/validation"
)

// PlannerService implements jobplane.v1.PlannerService.
type PlannerService struct {
	jobplanev1.UnimplementedPlannerServiceServer
	snapshots *snapshotStore
	settings  syncSettings
}

// syncSettings are what every sync of this planner follows beside its
// snapshot: the planner's flags.
type syncSettings struct {
	backoff  engine.PodFailureBackoff
	features engine.Features
}

func (s syncSettings) apply(snap *engine.Snapshot) {
	snap.PodFailureBackoff, snap.Features = s.backoff, s.features
}

var _ jobplanev1.PlannerServiceServer = (*PlannerService)(nil)

// Config tunes the service.
type Config struct {
	// StreamSnapshotMaxPods bounds the pods of the snapshots StreamPlanSync
	// keeps as bases of deltas, over all streams, each Job counting as one
	// pod more; 0 keeps none (every delta then fails with
	// FAILED_PRECONDITION).
	StreamSnapshotMaxPods int
	// StreamSnapshotMaxBytes bounds their memory, counted from the bytes
	// they were sent as (DefaultStreamSnapshotMaxBytes when 0).
	StreamSnapshotMaxBytes int64
	// PodFailureBackoff is the delay before pods replace failed ones;
	// zero is the reference's.
	PodFailureBackoff engine.PodFailureBackoff
	// Features are the reference's feature gates followed; zero is v1.36's.
	Features engine.Features
}

// NewPlannerService returns the service with the default configuration.
func NewPlannerService() *PlannerService {
	return NewPlannerServiceWith(Config{StreamSnapshotMaxPods: DefaultStreamSnapshotMaxPods})
}

// NewPlannerServiceWith returns the service configured by cfg.
func NewPlannerServiceWith(cfg Config) *PlannerService {
	return &PlannerService{snapshots: newSnapshotStore(max(cfg.StreamSnapshotMaxPods, 0), cmp.Or(cfg.StreamSnapshotMaxBytes, DefaultStreamSnapshotMaxBytes())),
		settings: syncSettings{backoff: cfg.PodFailureBackoff, features: cfg.Features}}
}

// ServiceDesc is the planner's service as generated, but for PlanSync's
// handler: it decodes the request's pods straight into Kubernetes pods
// (unaryRequest), where the generated one decodes them into messages that
// PlanSync then converts. Register the service with it.
var ServiceDesc = serviceDesc()

func serviceDesc() grpc.ServiceDesc {
	desc := jobplanev1.PlannerService_ServiceDesc
	desc.Methods = slices.Clone(desc.Methods)
	for i, m := range desc.Methods {
		if m.MethodName == "PlanSync" {
			desc.Methods[i].Handler = planSyncHandler(m.Handler)
		}
	}
	return desc
}

// planSyncHandler is the generated handler of PlanSync with the request
// decoded into a unaryRequest. The interceptors see its message, without
// its pods. Another implementation than PlannerService (a test's) gets the
// generated handler.
func planSyncHandler(generated grpc.MethodHandler) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		s, ok := srv.(*PlannerService)
		if !ok {
			return generated(srv, ctx, dec, interceptor)
		}
		return s.planSyncDecoded(ctx, dec, interceptor)
	}
}

// planSyncDecoded is PlanSync's handler for the request that dec decodes.
func (s *PlannerService) planSyncDecoded(ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := &unaryRequest{}
	defer in.release()
	if err := dec(in); err != nil {
		return nil, err
	}
	handler := func(ctx context.Context, req any) (any, error) {
		if msg := req.(*jobplanev1.PlanSyncRequest); msg != in.msg { // an interceptor's own
			return s.PlanSync(ctx, msg)
		}
		return planSync(in.msg, in.pods, in.annotations, s.settings)
	}
	if interceptor == nil {
		return handler(ctx, in.msg)
	}
	return interceptor(ctx, in.msg, &grpc.UnaryServerInfo{Server: s, FullMethod: jobplanev1.PlannerService_PlanSync_FullMethodName}, handler)
}

// PlanSync plans one sync of a Job. The server calls it only through
// ServiceDesc's handler when registered with the generated description.
func (s *PlannerService) PlanSync(_ context.Context, req *jobplanev1.PlanSyncRequest) (*jobplanev1.PlanSyncResponse, error) {
	return planRequest(req, s.settings)
}

// planRequest plans the sync of a request decoded into its message, its
// pods converted.
func planRequest(req *jobplanev1.PlanSyncRequest, settings syncSettings) (*jobplanev1.PlanSyncResponse, error) {
	slab, release := podSlab(len(req.GetPods()))
	defer release()
	pods := make([]*corev1.Pod, len(slab))
	c := podConverter(len(pods))
	for i, p := range req.GetPods() {
		c.IntoKube(p, &slab[i])
		pods[i] = &slab[i]
	}
	return planSync(req, pods, nil, settings)
}

// planSync plans the sync of req, whose pods are pods, and the annotations
// a sync reads of them annotations (nil: in their maps).
func planSync(req *jobplanev1.PlanSyncRequest, pods []*corev1.Pod, annotations []engine.PodAnnotations, settings syncSettings) (*jobplanev1.PlanSyncResponse, error) {
	snap, err := snapshotFromRequest(req, pods)
	if err != nil {
		return nil, err
	}
	settings.apply(snap)
	if annotations != nil {
		snap.Views = views(pods, annotations, snap.TrackingFinalizer)
	}
	return &jobplanev1.PlanSyncResponse{Plan: plan.ToProto(engine.Sync(snap))}, nil
}

// tenantOf is the tenant of the caller of ctx; "" for a server without
// authentication.
func tenantOf(ctx context.Context) string {
	if id, ok := auth.FromContext(ctx); ok {
		return id.Tenant()
	}
	return ""
}

// StreamPlanSync answers each snapshot of the stream with its plan; a bad
// snapshot fails its own answer, not the stream. The last snapshot of each
// Job is kept as the base of the next delta of that Job. A system caller's
// requests of different Jobs are decoded and planned at once (at most
// max(4, twice the cores) held, their bytes charged until answered) and
// answered as each is planned, a Job's own in order; an outside caller's
// one after another, so that a stream costs it a core at most.
func (s *PlannerService) StreamPlanSync(stream jobplanev1.PlannerService_StreamPlanSyncServer) error {
	ctx := stream.Context()
	system := grpcserver.SystemCaller(ctx)
	bases := s.snapshots.stream(system, tenantOf(ctx))
	defer bases.close()
	concurrency := 1
	if system {
		concurrency = max(4, 2*runtime.GOMAXPROCS(0))
	}
	work := newStreamWork(concurrency)
	defer work.close() // before the bases are closed
	var (
		sendMu  sync.Mutex
		sendErr error
	)
	send := func(resp *jobplanev1.StreamPlanSyncResponse) {
		sendMu.Lock()
		defer sendMu.Unlock()
		if sendErr == nil {
			sendErr = stream.Send(resp)
		}
	}
	for {
		work.reserve()
		received := &receivedRequest{} // decoded by the work that answers it
		if err := stream.RecvMsg(received); err != nil {
			work.unreserve()
			work.wait()
			sendMu.Lock()
			defer sendMu.Unlock()
			if errors.Is(err, io.EOF) {
				return sendErr
			}
			return err
		}
		// Its bytes stay charged while it is decoded and planned beside
		// the next.
		charged := grpcserver.HoldReceived(ctx)
		job, ok := jobOfEncoded(received.b)
		answer := func() {
			defer charged()
			send(answerStreamed(bases, received.b, job, ok, s.settings))
		}
		if !ok { // it drops the snapshots of two Jobs: alone
			work.wait()
			answer()
			work.unreserve()
			continue
		}
		work.run(job, answer)
	}
}

// decodeStreamed decodes b, an encoded request of the stream of bases, a
// snapshot of the Job job (jobOfEncoded; not one: of two), its pods
// straight for the sync: those of a part continuing a snapshot together, as
// a full snapshot's.
func decodeStreamed(bases *streamSnapshots, b []byte, job string, one bool) (*streamRequest, error) {
	req := &streamRequest{}
	return req, req.unmarshal(b, one && bases.continues(job))
}

// answerStreamed decodes and plans b, an encoded request of a stream, a
// snapshot of job as decodeStreamed's.
func answerStreamed(bases *streamSnapshots, b []byte, job string, one bool, settings syncSettings) *jobplanev1.StreamPlanSyncResponse {
	req, err := decodeStreamed(bases, b, job, one)
	if err != nil {
		req.release()
		if one && job != "" {
			bases.take(job).dispose() // a failed request drops its Job's snapshot
		}
		return &jobplanev1.StreamPlanSyncResponse{Id: idOfEncoded(b),
			Error: status.New(codes.InvalidArgument, "the request cannot be decoded: "+strings.ToValidUTF8(err.Error(), "\uFFFD")).Proto()}
	}
	resp := &jobplanev1.StreamPlanSyncResponse{Id: req.msg.GetId()}
	if plan, err := planStreamed(bases, req, settings); err != nil {
		resp.Error = status.Convert(err).Proto()
	} else {
		resp.Response = plan
	}
	return resp
}

// planStreamed plans one request of a stream, full or delta, and keeps its
// snapshot as the base of the Job's next delta unless it failed or the Job
// is finished.
func planStreamed(bases *streamSnapshots, req *streamRequest, settings syncSettings) (*jobplanev1.PlanSyncResponse, error) {
	var (
		b   *baseSnapshot
		err error
	)
	switch full, delta := req.msg.GetRequest(), req.msg.GetDelta(); {
	case delta != nil && full != nil:
		bases.take(delta.GetJobUid()).dispose()
		bases.take(full.GetJob().GetMetadata().GetUid()).dispose()
		req.release()
		return nil, apierr.Invalid("invalid StreamPlanSync request", field.ErrorList{field.Invalid(field.NewPath("delta"), field.OmitValueType{}, "exactly one of request and delta may be set")})
	case delta != nil:
		b, err = applyDelta(bases, req.msg.GetId(), delta, req.deltaPods, req.deltaAnnotations, req.deltaSizes, req.deltaTogether, req.size)
		if err != nil {
			req.release()
			return nil, err
		}
		if req.deltaTogether { // their array is the base's now
			b.keep(req.releasePods)
			req.releasePods = nil
		}
		return settleBase(bases, b, delta, req, settings)
	default:
		if uid := full.GetJob().GetMetadata().GetUid(); uid != "" {
			bases.take(uid).dispose() // superseded, whatever comes of this request
		}
		b, err = baseFromRequest(req.msg.GetId(), full, req.requestPods, req.requestAnnotations, req.size)
		if err != nil {
			req.release()
			return nil, err
		}
		b.release, req.releasePods = req.releasePods, nil // the base's now
		return settleBase(bases, b, full, req, settings)
	}
}

// settleBase plans the snapshot b, built from req, or, when req is a part
// of a snapshot that continues (partial), only keeps b as the base of the
// next part: a part that cannot be kept fails, since the next would find
// no base, and so does a first part whose whole could never be kept.
func settleBase(bases *streamSnapshots, b *baseSnapshot, fields validation.SyncFields, req *streamRequest, settings syncSettings) (*jobplanev1.PlanSyncResponse, error) {
	b.partial = req.msg.GetPartial()
	if !b.partial {
		return planBase(bases, b, fields, settings), nil
	}
	w := b.weight()
	if whole := wholeWeight(w, req); !bases.store.fits(whole) {
		b.dispose()
		return nil, notKept(whole, bases.store)
	}
	if !bases.put(b) {
		return nil, notKept(w, bases.store)
	}
	return nil, nil
}

// wholeWeight is what the snapshot of parts whose first is req will weigh,
// as req says (whole_bytes, whole_pods), from w, what the snapshot weighs
// with req's part; w when req does not say.
func wholeWeight(w weight, req *streamRequest) weight {
	pods := int(req.msg.GetWholePods()) - len(req.requestPods) - len(req.deltaPods)
	bytes := min(req.msg.GetWholeBytes(), math.MaxInt64/2) - req.size // a caller's number: never overflowing the sum
	return w.add(weight{pods: max(pods, 0), bytes: max(bytes, 0) + int64(max(pods, 0))*heldPodBytes})
}

// notKept answers a part of a snapshot that would weigh w, which the store
// cannot keep.
func notKept(w weight, st *snapshotStore) error {
	return apierr.New(codes.ResourceExhausted, plan.ReasonTooLarge,
		map[string]string{"bytes": strconv.FormatInt(w.bytes, 10), "pods": strconv.Itoa(w.pods - 1),
			"limitBytes": strconv.FormatInt(st.maxBytes, 10), "limitPods": strconv.Itoa(st.maxPods)},
		"the snapshot, sent in parts, would hold %d pods in %d bytes: more than the planner can keep (at most %d pods and %d bytes over all streams: -stream-snapshot-max-pods, -stream-snapshot-max-bytes)",
		w.pods-1, w.bytes, st.maxPods, st.maxBytes)
}

// planBase plans the snapshot b with the sync fields of its request and
// keeps b unless the Job is finished.
func planBase(bases *streamSnapshots, b *baseSnapshot, fields validation.SyncFields, settings syncSettings) *jobplanev1.PlanSyncResponse {
	snap := engineSnapshot(b.job, b.pods, fields)
	settings.apply(snap)
	snap.Views = b.views
	p := engine.Sync(snap)
	resp := &jobplanev1.PlanSyncResponse{Plan: plan.ToProto(p)}
	if p.ReleaseJobState {
		b.dispose()
	} else {
		bases.put(b)
	}
	return resp
}

// ValidateJob checks a Job as the API server would and returns it defaulted.
func (s *PlannerService) ValidateJob(_ context.Context, req *jobplanev1.ValidateJobRequest) (*jobplanev1.ValidateJobResponse, error) {
	job, errs := jobvalidation.Check(req.GetJob(), field.NewPath("job"))
	if err := apierr.Invalid("invalid Job", errs); err != nil {
		return nil, err
	}
	defaulted, err := kubeconv.JobFromKube(job)
	if err != nil {
		return nil, invalidTemplateSpec("invalid Job", field.NewPath("job"), err)
	}
	return &jobplanev1.ValidateJobResponse{Job: defaulted}, nil
}
