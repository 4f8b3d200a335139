package plan

import (
	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/podwire"
)

// ReasonTooLarge is the ErrorInfo reason of a snapshot larger than the
// planner takes (RESOURCE_EXHAUSTED): larger than it keeps, sent in parts,
// or with its Job and one pod larger than a request may be, refused by the
// executor before it is sent.
const ReasonTooLarge = "SNAPSHOT_TOO_LARGE"

// WireRequest is a StreamPlanSync request encoded for the wire, its pods
// written straight from the Kubernetes pods (podwire.AppendPod) rather than
// converted to messages and then encoded: the bytes of the request as
// protobuf-go's deterministic marshaling writes it. It is what the
// executor sends (a grpcserver.WireMarshaler).
type WireRequest struct {
	parts [][]byte
	// What splitting a streamed request (Parts) needs: its id, its field
	// (full or delta), and the snapshot it encodes.
	id   string
	num  protowire.Number
	snap *Snapshot
}

// MarshalWire returns the encoded request, in parts.
func (w *WireRequest) MarshalWire() ([][]byte, error) { return w.parts, nil }

// Size is the encoded request's length.
func (w *WireRequest) Size() int {
	n := 0
	for _, p := range w.parts {
		n += len(p)
	}
	return n
}

// WireRequest is the snapshot in full as the StreamPlanSync request id.
func (s *Snapshot) WireRequest(id string) (*WireRequest, error) {
	return s.wireFull(id, true)
}

// WirePlanSync is the snapshot as a PlanSync request (unary).
func (s *Snapshot) WirePlanSync() (*WireRequest, error) {
	return s.wireFull("", false)
}

// wireFull is the snapshot in full, as the StreamPlanSync request id when
// streamed, else as a PlanSync request.
func (s *Snapshot) wireFull(id string, streamed bool) (*WireRequest, error) {
	req := newRequest(s.Job, s.State, s.Now, s.Finalizer)
	// Fields in number order: the Job (1), the pods (2), the others.
	job, rest := &jobplanev1.PlanSyncRequest{Job: req.Job}, req
	rest.Job = nil
	if !streamed {
		return wireMessage(job, podwire.PlanSyncRequestPods, s.Pods, rest)
	}
	w, err := wireRequest(id, podwire.StreamRequestRequest, job, podwire.PlanSyncRequestPods, s.Pods, rest)
	if w != nil {
		w.snap = s
	}
	return w, err
}

// WireDelta is Delta as the StreamPlanSync request id.
func (s *Snapshot) WireDelta(id string, base *Sent) (*WireRequest, error) {
	d, upserted := s.delta(base)
	// Fields in number order: base, Job UID and Job (1-3), the pods (4),
	// the others.
	head := &jobplanev1.PlanSyncDelta{BaseId: d.BaseId, JobUid: d.JobUid, Job: d.Job}
	d.BaseId, d.JobUid, d.Job = "", "", nil
	w, err := wireRequest(id, podwire.StreamRequestDelta, head, podwire.PlanSyncDeltaUpsertedPods, upserted, d)
	if w != nil {
		w.snap = s
	}
	return w, err
}

// wireRequest encodes the stream request id whose field num holds the
// message wireMessage encodes.
func wireRequest(id string, num protowire.Number, head vtMessage, podsNum protowire.Number, pods []*corev1.Pod, tail vtMessage) (*WireRequest, error) {
	msg, err := wireMessage(head, podsNum, pods, tail)
	if err != nil {
		return nil, err
	}
	var top []byte
	if id != "" {
		top = protowire.AppendString(protowire.AppendTag(top, podwire.StreamRequestID, protowire.BytesType), id)
	}
	top = protowire.AppendTag(top, num, protowire.BytesType)
	top = protowire.AppendVarint(top, uint64(msg.Size()))
	return &WireRequest{parts: append([][]byte{top}, msg.parts...), id: id, num: num}, nil
}

// vtMessage is a message with vtprotobuf's generated encoder. It writes
// what protobuf-go's deterministic marshaling writes, maps in key order
// (marshal_stable), several times faster, for every message here: the one
// map it writes in Go's order, a google.protobuf.Struct's, holds at most
// one field in a snapshot (the template's restartPolicy). Unlike
// protobuf-go it does not check that strings are UTF-8: the planner
// refuses a request that is not, as it refuses any other caller's.
type vtMessage interface {
	MarshalVTStrict() ([]byte, error)
}

// wireMessage encodes a message of head's fields, the pods in field
// podsNum, then tail's fields.
func wireMessage(head vtMessage, podsNum protowire.Number, pods []*corev1.Pod, tail vtMessage) (*WireRequest, error) {
	h, err := head.MarshalVTStrict()
	if err != nil {
		return nil, err
	}
	t, err := tail.MarshalVTStrict()
	if err != nil {
		return nil, err
	}
	p := make([]byte, 0, 400*len(pods)) // a typical pod's bytes, and room
	for _, pod := range pods {
		p = podwire.AppendPod(p, podsNum, pod, true)
	}
	return &WireRequest{parts: [][]byte{h, p, t}}, nil
}
