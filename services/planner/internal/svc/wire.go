package svc

import (
	"errors"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/podwire"
	"github.com/jobplane/jobplane/services/planner/internal/engine"
)

// The planner's requests hold up to 100,000 pods, whose strings vtprotobuf's
// UnmarshalVT copies one by one, into messages the planner then converts:
// most of the cost of a sync. The planner decodes them itself instead (the
// codec's WireUnmarshaler): PlanSync's requests into a unaryRequest
// (ServiceDesc), StreamPlanSync's into a streamRequest, their pods straight
// into Kubernetes pods.

// The pods are decoded with the annotations a sync reads kept out of their
// maps (engine.AnnotationKeys), beside them: most pods then have no map
// (an Indexed Job's carry only their completion index), two allocations
// fewer a pod. A request's annotations are nil when its pods were decoded
// as messages (an encoding left to the codec), whose maps hold them.

// newPodDecoder is a decoder of n pods taking the annotations a sync reads.
func newPodDecoder(n int) *podwire.Decoder {
	d := podwire.NewDecoder(n)
	d.Take(engine.AnnotationKeys[:]...)
	return d
}

// decodePod decodes b into out (its strings views of b when shared), the
// annotations a sync reads of it answered.
func decodePod(d *podwire.Decoder, b []byte, out *corev1.Pod, shared bool) (engine.PodAnnotations, error) {
	var err error
	if shared {
		err = d.DecodeShared(b, out)
	} else {
		err = d.Decode(b, out)
	}
	v := d.Taken()
	return engine.PodAnnotations{CompletionIndex: v[0], FailureCount: v[1], IgnoredFailureCount: v[2]}, err
}

// fullPods decodes the pods of a full snapshot together: into one array
// (podSlab), their strings views of the request's bytes.
type fullPods struct {
	decoder     *podwire.Decoder
	slab        []corev1.Pod
	used        int // of slab
	pods        []*corev1.Pod
	annotations []engine.PodAnnotations
	// release gives back the array.
	release func()
}

func newFullPods(n int) *fullPods {
	slab, release := podSlab(n)
	return &fullPods{decoder: newPodDecoder(n), slab: slab, pods: make([]*corev1.Pod, 0, n),
		annotations: make([]engine.PodAnnotations, 0, n), release: release}
}

// next is the array's next pod, not among p.pods.
func (p *fullPods) next() *corev1.Pod {
	pod := &p.slab[p.used]
	p.used++
	return pod
}

// decode merges b, an encoded PlanSyncRequest whose pods were counted, into
// m, its pods into p.pods.
func (p *fullPods) decode(b []byte, m *jobplanev1.PlanSyncRequest) error {
	return eachField(b, isPlanSyncRequestPods, unmarshalRun(m), func(_ protowire.Number, v []byte) error {
		pod := p.next()
		p.pods = append(p.pods, pod)
		a, err := decodePod(p.decoder, v, pod, true)
		p.annotations = append(p.annotations, a)
		return err
	})
}

// unaryRequest is a PlanSync request as the planner decodes it: the
// message, whose pods are not read, and its pods as Kubernetes pods.
type unaryRequest struct {
	msg         *jobplanev1.PlanSyncRequest
	pods        []*corev1.Pod
	annotations []engine.PodAnnotations
	// releasePods gives back the array of pods (podSlab); nil when there
	// is none.
	releasePods func()
}

var _ grpcserver.WireUnmarshaler = (*unaryRequest)(nil)

// UnmarshalWire decodes an encoded PlanSyncRequest, which it keeps: its
// pods straight into Kubernetes pods (podwire), the other fields as the
// codec decodes them. It decodes what the codec and podConverter make of
// the message, and fails where the codec fails.
func (r *unaryRequest) UnmarshalWire(b []byte) error {
	var n podCounts
	if !n.request(b) { // left to the codec, whole
		m := &jobplanev1.PlanSyncRequest{}
		if err := grpcserver.Unmarshal(b, m); err != nil {
			return err
		}
		*r = unaryRequest{msg: m, pods: convertPods(m.GetPods(), true)}
		return nil
	}
	full := newFullPods(n.requestPods)
	*r = unaryRequest{msg: &jobplanev1.PlanSyncRequest{}, releasePods: full.release}
	err := full.decode(b, r.msg)
	r.pods, r.annotations = full.pods, full.annotations
	return err
}

// release gives back the array of the request's pods: nothing may use them
// after.
func (r *unaryRequest) release() {
	if r.releasePods != nil {
		r.releasePods()
		r.releasePods = nil
	}
}

// streamRequest is a StreamPlanSync request as the planner decodes it:
// the message, whose pods are not read, and its pods as Kubernetes pods.
type streamRequest struct {
	msg *jobplanev1.StreamPlanSyncRequest
	// requestPods are msg.Request's pods; deltaPods msg.Delta's upserted;
	// the annotations of each.
	requestPods, deltaPods               []*corev1.Pod
	requestAnnotations, deltaAnnotations []engine.PodAnnotations
	// size is the request's encoded size; deltaSizes each upserted pod's.
	size       int64
	deltaSizes []int64
	// deltaTogether: the delta's pods were decoded together, into the
	// array of releasePods, their strings views of the request's bytes
	// (a part continuing a snapshot), not each alone.
	deltaTogether bool
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
	return r.unmarshal(b, false)
}

// unmarshal is UnmarshalWire, a delta's pods decoded together when
// deltaTogether: those of a part continuing a snapshot, which stay with it
// as a full snapshot's do.
func (r *streamRequest) unmarshal(b []byte, deltaTogether bool) error {
	var n podCounts
	if !n.stream(b) { // left to the codec, whole
		m := &jobplanev1.StreamPlanSyncRequest{}
		if err := grpcserver.Unmarshal(b, m); err != nil {
			return err
		}
		*r = *streamRequestOf(m)
		r.size = int64(len(b))
		return nil
	}
	deltaTogether = deltaTogether && n.deltaPods > 0
	*r = streamRequest{msg: &jobplanev1.StreamPlanSyncRequest{}, size: int64(len(b)), deltaTogether: deltaTogether}
	// A full snapshot's pods are kept together, in one array, their strings
	// views of b, the request's bytes (the codec's copy); a delta's each
	// alone (kept in a base, they would keep each other alive), but for a
	// part continuing a snapshot's, in the same array.
	together := n.requestPods
	if deltaTogether {
		together += n.deltaPods
	}
	full, alone := newFullPods(together), newPodDecoder(1)
	r.releasePods = full.release
	return eachField(b, isRequestOrDelta, unmarshalRun(r.msg), func(num protowire.Number, v []byte) error {
		// The field may appear more than once: its messages merge, as
		// UnmarshalVT merges them.
		if num == podwire.StreamRequestRequest {
			if r.msg.Request == nil {
				r.msg.Request = &jobplanev1.PlanSyncRequest{}
			}
			err := full.decode(v, r.msg.Request)
			r.requestPods, r.requestAnnotations = full.pods, full.annotations
			return err
		}
		if r.msg.Delta == nil {
			r.msg.Delta = &jobplanev1.PlanSyncDelta{}
			r.deltaPods = make([]*corev1.Pod, 0, n.deltaPods)
			r.deltaAnnotations = make([]engine.PodAnnotations, 0, n.deltaPods)
			r.deltaSizes = make([]int64, 0, n.deltaPods)
		}
		return eachField(v, isPlanSyncDeltaPods, unmarshalRun(r.msg.Delta), func(_ protowire.Number, v []byte) error {
			if deltaTogether {
				p := full.next()
				r.deltaPods = append(r.deltaPods, p)
				a, err := decodePod(full.decoder, v, p, true)
				r.deltaAnnotations = append(r.deltaAnnotations, a)
				r.deltaSizes = append(r.deltaSizes, int64(len(v)))
				return err
			}
			p := &corev1.Pod{}
			r.deltaPods = append(r.deltaPods, p)
			a, err := decodePod(alone, v, p, false)
			r.deltaAnnotations = append(r.deltaAnnotations, a)
			r.deltaSizes = append(r.deltaSizes, int64(len(v)))
			return err
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
		for _, p := range d.GetUpsertedPods() {
			r.deltaSizes = append(r.deltaSizes, int64(p.SizeVT()))
		}
	}
	return r
}

func isRequestOrDelta(num protowire.Number) bool {
	return num == podwire.StreamRequestRequest || num == podwire.StreamRequestDelta
}

func isPlanSyncRequestPods(num protowire.Number) bool { return num == podwire.PlanSyncRequestPods }

func isPlanSyncDeltaPods(num protowire.Number) bool { return num == podwire.PlanSyncDeltaUpsertedPods }

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
		if num == podwire.StreamRequestRequest {
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

// receivedRequest is a StreamPlanSync request as received, its bytes (the
// codec's copy, the request's own) decoded later, by the work answering it
// (streamRequest.UnmarshalWire).
type receivedRequest struct {
	b []byte
}

var _ grpcserver.WireUnmarshaler = (*receivedRequest)(nil)

func (r *receivedRequest) UnmarshalWire(b []byte) error {
	r.b = b
	return nil
}

// jobOfEncoded is the UID of the Job that b, an encoded
// StreamPlanSyncRequest, is a snapshot of, as decoding b would find it;
// false when b holds both a request and a delta. What cannot be walked
// names no Job ("").
func jobOfEncoded(b []byte) (string, bool) {
	_, full := lastField(b, podwire.StreamRequestRequest)
	_, delta := lastField(b, podwire.StreamRequestDelta)
	switch {
	case full && delta:
		return "", false
	case delta:
		uid, _ := lastField(b, podwire.StreamRequestDelta, podwire.PlanSyncDeltaJobUID)
		return string(uid), true
	default:
		uid, _ := lastField(b, podwire.StreamRequestRequest, podwire.PlanSyncRequestJob, podwire.JobMetadata, podwire.ObjectMetaUID)
		return string(uid), true
	}
}

// idOfEncoded is the id of b, an encoded StreamPlanSyncRequest, as far as
// it can be read: "" when it is not UTF-8 (an answer carrying it could not
// be decoded).
func idOfEncoded(b []byte) string {
	id, _ := lastField(b, podwire.StreamRequestID)
	if !utf8.Valid(id) {
		return ""
	}
	return string(id)
}

// lastField is the value of the length-delimited field at path in b, an
// encoded message, as decoding would find it: a message field's
// occurrences merge, the last value of a singular field wins.
func lastField(b []byte, path ...protowire.Number) (value []byte, found bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return value, found
		}
		b = b[n:]
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return value, found
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return value, found
		}
		b = b[n:]
		if num != path[0] {
			continue
		}
		if len(path) == 1 {
			value, found = v, true
		} else if inner, ok := lastField(v, path[1:]...); ok {
			value, found = inner, true
		}
	}
	return value, found
}
