package svc

import (
	"bytes"
	"errors"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/services/planner/internal/podwire"
)

// The planner's requests hold up to 100,000 pods, whose strings vtprotobuf's
// UnmarshalVT copies one by one: most of the cost of decoding them. The
// codec decodes them here instead: PlanSync's requests with
// decodePlanSyncRequest, StreamPlanSync's into a streamRequest, their pods
// straight into Kubernetes pods.
func init() {
	grpcserver.RegisterDecoder(decodePlanSyncRequest)
}

// The fields holding pods, and the messages holding them.
const (
	planSyncRequestPods          protowire.Number = 2 // PlanSyncRequest.pods
	planSyncDeltaUpsertedPods    protowire.Number = 4 // PlanSyncDelta.upserted_pods
	streamPlanSyncRequestRequest protowire.Number = 2 // StreamPlanSyncRequest.request
	streamPlanSyncRequestDelta   protowire.Number = 3 // StreamPlanSyncRequest.delta
)

// decodePlanSyncRequest decodes b into m as UnmarshalVT does, but each pod
// from its own copy of its bytes, which its strings alias (UnmarshalVTUnsafe):
// one allocation per pod for its strings rather than one per string, and a
// pod kept (the snapshot bases keep the converted pods, whose strings are
// the pod's) pins its own bytes, not the request's. The other fields are
// decoded with UnmarshalVT, which copies, run by run in wire order: it
// merges into m, so that is decoding them together. Inputs the walk does not
// read as UnmarshalVT does are left to UnmarshalVT whole.
func decodePlanSyncRequest(b []byte, m *jobplanev1.PlanSyncRequest) error {
	var n podCounts
	if !n.request(b) {
		return m.UnmarshalVT(b)
	}
	d := newPodDecoder(n.total())
	m.Pods = make([]*jobplanev1.Pod, 0, n.requestPods)
	return d.request(b, m)
}

// streamRequest is a StreamPlanSync request as the planner decodes it:
// the message, whose pods are not read, and its pods as Kubernetes pods.
type streamRequest struct {
	msg *jobplanev1.StreamPlanSyncRequest
	// requestPods are msg.Request's pods; deltaPods msg.Delta's upserted.
	requestPods, deltaPods []*corev1.Pod
	// releasePods gives back the array of requestPods (podSlab) unless
	// the request became a base, which took it; nil when there is none.
	releasePods func()
}

// release gives back the array of the request's pods: nothing may use them
// after.
func (r *streamRequest) release() {
	if r.releasePods != nil {
		r.releasePods()
		r.releasePods = nil
	}
}

var _ grpcserver.WireUnmarshaler = (*streamRequest)(nil)

// UnmarshalWire decodes an encoded StreamPlanSyncRequest, which it keeps:
// its pods straight into Kubernetes pods (podwire), the other fields as the
// codec decodes them. It decodes what the codec and podConverter make of
// the message, and fails where the codec fails.
func (r *streamRequest) UnmarshalWire(b []byte) error {
	var n podCounts
	if !n.stream(b) { // left to the codec, whole
		m := &jobplanev1.StreamPlanSyncRequest{}
		if err := grpcserver.Unmarshal(b, m); err != nil {
			return err
		}
		*r = *streamRequestOf(m)
		return nil
	}
	*r = streamRequest{msg: &jobplanev1.StreamPlanSyncRequest{}}
	// A full snapshot's pods are kept together, in one array, their strings
	// views of b, the request's bytes (the codec's copy); a delta's each
	// alone (kept in a base, they would keep each other alive).
	full, alone := podwire.NewDecoder(n.requestPods), podwire.NewDecoder(1)
	slab, release := podSlab(n.requestPods)
	r.releasePods = release
	return eachField(b, isRequestOrDelta, unmarshalRun(r.msg), func(num protowire.Number, v []byte) error {
		// The field may appear more than once: its messages merge, as
		// UnmarshalVT merges them.
		if num == streamPlanSyncRequestRequest {
			if r.msg.Request == nil {
				r.msg.Request = &jobplanev1.PlanSyncRequest{}
				r.requestPods = make([]*corev1.Pod, 0, n.requestPods)
			}
			return eachField(v, isPlanSyncRequestPods, unmarshalRun(r.msg.Request), func(_ protowire.Number, v []byte) error {
				p := &slab[len(r.requestPods)]
				r.requestPods = append(r.requestPods, p)
				return full.DecodeShared(v, p)
			})
		}
		if r.msg.Delta == nil {
			r.msg.Delta = &jobplanev1.PlanSyncDelta{}
			r.deltaPods = make([]*corev1.Pod, 0, n.deltaPods)
		}
		return eachField(v, isPlanSyncDeltaPods, unmarshalRun(r.msg.Delta), func(_ protowire.Number, v []byte) error {
			p := &corev1.Pod{}
			r.deltaPods = append(r.deltaPods, p)
			return alone.Decode(v, p)
		})
	})
}

// unmarshalRun merges a run of m's encoded fields into m, as the codec
// decodes them.
func unmarshalRun[M interface {
	proto.Message
	UnmarshalVT([]byte) error
}](m M) func([]byte) error {
	return func(b []byte) error {
		if err := m.UnmarshalVT(b); err != nil {
			return err
		}
		return grpcserver.CheckUTF8(b, m)
	}
}

// streamRequestOf is the streamRequest of a decoded message, its pods
// converted.
func streamRequestOf(m *jobplanev1.StreamPlanSyncRequest) *streamRequest {
	r := &streamRequest{msg: m}
	if full := m.GetRequest(); full != nil {
		r.requestPods = convertPods(full.GetPods(), true)
	}
	if d := m.GetDelta(); d != nil {
		r.deltaPods = convertPods(d.GetUpsertedPods(), false)
	}
	return r
}

func isRequestOrDelta(num protowire.Number) bool {
	return num == streamPlanSyncRequestRequest || num == streamPlanSyncRequestDelta
}

func isPlanSyncRequestPods(num protowire.Number) bool { return num == planSyncRequestPods }

func isPlanSyncDeltaPods(num protowire.Number) bool { return num == planSyncDeltaUpsertedPods }

// podDecoder decodes the pods of one request into Pod structs allocated
// together, counted beforehand: one allocation rather than one per pod.
type podDecoder struct {
	pods []jobplanev1.Pod
}

func newPodDecoder(n int) *podDecoder {
	return &podDecoder{pods: make([]jobplanev1.Pod, 0, n)}
}

// request merges b, an encoded PlanSyncRequest, into m.
func (d *podDecoder) request(b []byte, m *jobplanev1.PlanSyncRequest) error {
	return eachField(b, isPlanSyncRequestPods, m.UnmarshalVT, func(_ protowire.Number, v []byte) error {
		p, err := d.pod(v)
		m.Pods = append(m.Pods, p)
		return err
	})
}

// pod decodes b, an encoded Pod, from a copy of it that its strings alias.
func (d *podDecoder) pod(b []byte) (*jobplanev1.Pod, error) {
	var p *jobplanev1.Pod
	if len(d.pods) < cap(d.pods) { // counted
		d.pods = d.pods[:len(d.pods)+1]
		p = &d.pods[len(d.pods)-1]
	} else {
		p = &jobplanev1.Pod{}
	}
	return p, p.UnmarshalVTUnsafe(bytes.Clone(b))
}

// errUnusual is what eachField answers for what it leaves to UnmarshalVT.
var errUnusual = errors.New("encoding left to UnmarshalVT")

// eachField walks b, an encoded message, in wire order: it calls field with
// the value of each length-delimited field whose number split accepts, and
// rest (when not nil) with each run of the fields between them; it answers
// the first error of either. It answers errUnusual for an encoding it might
// not read as UnmarshalVT reads it (malformed, a group, a varint of more
// than 64 bits, a field number beyond int32): the decoders walk the whole
// request once to count its pods, and leave those to UnmarshalVT.
func eachField(b []byte, split func(protowire.Number) bool, rest func([]byte) error, field func(protowire.Number, []byte) error) error {
	runStart := 0
	for i := 0; i < len(b); {
		num, typ, n := protowire.ConsumeTag(b[i:])
		if n < 0 {
			return errUnusual
		}
		if typ == protowire.BytesType && split(num) {
			v, m := protowire.ConsumeBytes(b[i+n:])
			if m < 0 {
				return errUnusual
			}
			if rest != nil && runStart < i {
				if err := rest(b[runStart:i]); err != nil {
					return err
				}
			}
			if field != nil {
				if err := field(num, v); err != nil {
					return err
				}
			}
			i += n + m
			runStart = i
			continue
		}
		if typ == protowire.StartGroupType || typ == protowire.EndGroupType {
			return errUnusual
		}
		m := protowire.ConsumeFieldValue(num, typ, b[i+n:])
		if m < 0 {
			return errUnusual
		}
		i += n + m
	}
	if rest != nil && runStart < len(b) {
		return rest(b[runStart:])
	}
	return nil
}

// podCounts are the pods of a request, counted in a first pass to allocate
// them together.
type podCounts struct {
	requestPods, deltaPods int
}

func (c *podCounts) total() int { return c.requestPods + c.deltaPods }

// request counts the pods of b, an encoded PlanSyncRequest; false when
// eachField would not read it as UnmarshalVT does.
func (c *podCounts) request(b []byte) bool {
	return eachField(b, isPlanSyncRequestPods, nil, func(protowire.Number, []byte) error {
		c.requestPods++
		return nil
	}) == nil
}

// delta counts the pods of b, an encoded PlanSyncDelta.
func (c *podCounts) delta(b []byte) bool {
	return eachField(b, isPlanSyncDeltaPods, nil, func(protowire.Number, []byte) error {
		c.deltaPods++
		return nil
	}) == nil
}

// stream counts the pods of b, an encoded StreamPlanSyncRequest.
func (c *podCounts) stream(b []byte) bool {
	return eachField(b, isRequestOrDelta, nil, func(num protowire.Number, v []byte) error {
		ok := false
		if num == streamPlanSyncRequestRequest {
			ok = c.request(v)
		} else {
			ok = c.delta(v)
		}
		if !ok {
			return errUnusual
		}
		return nil
	}) == nil
}
