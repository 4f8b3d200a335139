package plan

import (
	"encoding/binary"
	"slices"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/podwire"
)

// Parts is the streamed request w as requests of at most limit bytes each:
// its snapshot in parts (StreamPlanSyncRequest.partial), for a planner
// that takes no request as large as w. The first part is w but for the pods
// that do not fit; each next one is a delta based on the one before, with
// the sync fields again and as many of w's next pods as fit. The last part
// has w's id, the ones before it w's id and ".1", ".2", … (a client's own
// ids hold no dot). ok is false when w cannot be split so: its first part
// without pods, or a next one with a single pod, is larger than limit.
func (w *WireRequest) Parts(limit int) (parts []*WireRequest, ok bool) {
	if w.Size() <= limit {
		return []*WireRequest{w}, true
	}
	if w.snap == nil || len(w.parts) != 4 {
		return nil, false // a unary request, or one of the parts already
	}
	head, pods, tail := w.parts[1], w.parts[2], w.parts[3]
	ends, ok := fieldEnds(pods)
	if !ok {
		return nil, false
	}
	jobUID := string(w.snap.Job.UID)
	nextTail, err := w.snap.syncFields().MarshalVTStrict()
	if err != nil {
		return nil, false
	}
	num, prev := w.num, ""
	for start := 0; ; {
		id := w.id + "." + strconv.Itoa(len(parts)+1)
		if len(parts) > 0 {
			num, tail = podwire.StreamRequestDelta, nextTail
			if head, err = (&jobplanev1.PlanSyncDelta{BaseId: prev, JobUid: jobUID}).MarshalVTStrict(); err != nil {
				return nil, false
			}
		}
		// The message's bytes, less what its envelope may take: the id,
		// two tags, a length, the partial flag and the whole's size.
		room := limit - (len(id) + 2*binaryTagAndLength + 2 + wholeFields) - len(head) - len(tail)
		from := fieldStart(ends, start)
		end := start
		for end < len(ends) && ends[end]-from <= room {
			end++
		}
		if room < 0 || (end == start && len(parts) > 0) {
			return nil, false
		}
		last := end == len(ends)
		if last {
			id = w.id
		}
		chunk := pods[from:fieldStart(ends, end)]
		if len(parts) > 0 && w.num == podwire.StreamRequestRequest {
			chunk = retagged(chunk, ends[start:end], from, podwire.PlanSyncDeltaUpsertedPods)
		}
		parts = append(parts, partRequest(id, num, [][]byte{head, chunk, tail}, !last))
		if last {
			parts[0].declareWhole(parts, len(ends))
			return parts, true
		}
		start, prev = end, id
	}
}

// declareWhole has the first part w say the bytes and pods of all the
// parts (whole_bytes, whole_pods), so that a planner that could never keep
// them refuses it at once.
func (w *WireRequest) declareWhole(parts []*WireRequest, pods int) {
	size := 0
	for _, p := range parts {
		size += p.Size()
	}
	b := protowire.AppendVarint(protowire.AppendTag(nil, podwire.StreamRequestWholeBytes, protowire.VarintType), uint64(size))
	b = protowire.AppendVarint(protowire.AppendTag(b, podwire.StreamRequestWholePods, protowire.VarintType), uint64(pods))
	w.parts = append(w.parts, b)
}

// wholeFields is the most whole_bytes and whole_pods take.
const wholeFields = 2 * (1 + binary.MaxVarintLen64)

// binaryTagAndLength is the most a length-delimited field's tag (field
// numbers below 16) and length take.
const binaryTagAndLength = 1 + 5

// partRequest is the stream request id whose field num holds the message
// of msg's bytes; partial marks a part that the next one continues.
func partRequest(id string, num protowire.Number, msg [][]byte, partial bool) *WireRequest {
	size := 0
	for _, b := range msg {
		size += len(b)
	}
	top := protowire.AppendString(protowire.AppendTag(nil, podwire.StreamRequestID, protowire.BytesType), id)
	top = protowire.AppendVarint(protowire.AppendTag(top, num, protowire.BytesType), uint64(size))
	parts := append([][]byte{top}, msg...)
	if partial {
		parts = append(parts, protowire.AppendVarint(protowire.AppendTag(nil, podwire.StreamRequestPartial, protowire.VarintType), 1))
	}
	return &WireRequest{parts: parts, id: id, num: num}
}

// fieldEnds are the offsets in b, encoded fields, where each ends; false
// when b is not a run of whole fields.
func fieldEnds(b []byte) ([]int, bool) {
	var ends []int
	for off := 0; off < len(b); {
		_, _, n := protowire.ConsumeField(b[off:])
		if n < 0 {
			return nil, false
		}
		off += n
		ends = append(ends, off)
	}
	return ends, true
}

// retagged is a copy of fields, encoded pods starting at offset from of
// the pods that end at ends, each in field num: a full request's pods in
// a delta. The tags of both fields are one byte long.
func retagged(fields []byte, ends []int, from int, num protowire.Number) []byte {
	out := slices.Clone(fields)
	tag := protowire.AppendTag(nil, num, protowire.BytesType)[0]
	start := from
	for _, end := range ends {
		out[start-from] = tag
		start = end
	}
	return out
}

// fieldStart is where field i of those ending at ends starts.
func fieldStart(ends []int, i int) int {
	if i == 0 {
		return 0
	}
	return ends[i-1]
}

// ID is the request's id.
func (w *WireRequest) ID() string { return w.id }
