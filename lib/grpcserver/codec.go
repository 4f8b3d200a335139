package grpcserver

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/structpb"
)

// deterministicCodec is gRPC's proto codec with deterministic marshaling:
// map entries are written in key order, so the same response is the same
// bytes (the planner's contract), whatever Go's map iteration does. Its
// bytes are those of protobuf-go's deterministic marshaling.
//
// Messages with vtprotobuf's generated code (gen/, buf.gen.yaml) are encoded
// and decoded with it, several times faster than protobuf-go's reflection,
// other messages with protobuf-go. Two gaps of vtprotobuf are closed here:
//   - Its encoder writes map entries in key order (marshal_stable, built by
//     hack/tools/cmd/protoc-gen-go-vtproto-stable) except those of maps with
//     bool keys and of google.protobuf.Struct (its own well-known types
//     package): messages that can hold one of those, or a message without
//     vtprotobuf's code, are encoded field by field (encoder),
//     the fields that can hold them with protobuf-go and the others
//     (a request's pods) with vtprotobuf.
//   - Its decoder does not check that proto3 strings are valid UTF-8 as
//     proto.Unmarshal does: the codec checks the encoded strings itself
//     (validUTF8), so that both refuse the same inputs.
//
// A service may decode a request its own way (WireUnmarshaler).
type deterministicCodec struct{}

var _ encoding.CodecV2 = deterministicCodec{}

var deterministic = proto.MarshalOptions{Deterministic: true}

// Codec is the chassis' codec, for the clients of its servers: a client
// whose connection uses it (CallCodec) decodes responses as the server
// decodes requests.
func Codec() encoding.CodecV2 { return deterministicCodec{} }

// CallCodec is the call option that makes a client connection use Codec
// (with grpc.WithDefaultCallOptions).
func CallCodec() grpc.CallOption { return grpc.ForceCodecV2(deterministicCodec{}) }

func (deterministicCodec) Marshal(v any) (mem.BufferSlice, error) {
	if h, ok := v.(heldEncoding); ok {
		return mem.BufferSlice{h.buf}, nil
	}
	if w, ok := v.(WireMarshaler); ok {
		parts, err := w.MarshalWire()
		if err != nil {
			return nil, err
		}
		out := make(mem.BufferSlice, len(parts))
		for i, p := range parts {
			out[i] = mem.SliceBuffer(p)
		}
		return out, nil
	}
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("cannot marshal %T: not a proto message", v)
	}
	var e encoder
	size, err := e.size(m.ProtoReflect())
	if err != nil {
		return nil, err
	}
	b, err := e.append(make([]byte, 0, size), m.ProtoReflect())
	if err != nil {
		return nil, err
	}
	if len(b) != size {
		return nil, fmt.Errorf("encoded %d bytes of %T, sized %d", len(b), m, size)
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

// vtMarshaler is a message with vtprotobuf's generated encoder.
type vtMarshaler interface {
	SizeVT() int
	MarshalToSizedBufferVTStrict([]byte) (int, error)
}

// encoder writes a message as protobuf-go's deterministic marshaling writes
// it, in two passes: size, then append into a buffer of that size. A message
// whose type is stable (marshalPlan) is written whole by vtprotobuf (or by
// protobuf-go without its code); the others field by field, in field number
// order as protobuf-go writes them (no extensions here), then their unknown
// fields: the fields holding messages are written by the same rule, every
// other one with protobuf-go, alone in a message of the same type.
type encoder struct {
	// sizes of the messages met, in the order both passes meet them.
	sizes []int
	next  int
	// structs says, of each Struct met, in the same order, whether the
	// codec writes it itself (structSize).
	structs    []bool
	nextStruct int
}

func (e *encoder) size(m protoreflect.Message) (int, error) {
	return e.sizeOf(marshalPlanOf(m.Descriptor()), m)
}

// sizeOf is size with m's plan.
func (e *encoder) sizeOf(p *marshalPlan, m protoreflect.Message) (int, error) {
	if p.isStruct {
		n, own := structSize(m.Interface().(*structpb.Struct))
		e.structs = append(e.structs, own)
		if own {
			e.sizes = append(e.sizes, n)
			return n, nil
		}
	}
	if p.whole(m) {
		var n int
		if vt, ok := m.Interface().(vtMarshaler); ok {
			n = vt.SizeVT()
		} else {
			n = deterministic.Size(m.Interface())
		}
		e.sizes = append(e.sizes, n)
		return n, nil
	}
	at := len(e.sizes)
	e.sizes = append(e.sizes, 0)
	n := 0
	var single protoreflect.Message
	for _, fd := range p.fields {
		if !m.Has(fd) {
			continue
		}
		if fd.Kind() != protoreflect.MessageKind || fd.IsMap() {
			if k, ok := scalarSize(fd, m.Get(fd)); ok {
				n += k
				continue
			}
			single = alone(single, m, fd)
			n += deterministic.Size(single.Interface())
			single.Clear(fd)
			continue
		}
		cp := marshalPlanOf(fd.Message())
		err := eachMessage(m, fd, func(c protoreflect.Message) error {
			s, err := e.sizeOf(cp, c)
			n += protowire.SizeTag(fd.Number()) + protowire.SizeBytes(s)
			return err
		})
		if err != nil {
			return 0, err
		}
	}
	n += len(m.GetUnknown())
	e.sizes[at] = n
	return n, nil
}

func (e *encoder) append(b []byte, m protoreflect.Message) ([]byte, error) {
	return e.appendOf(b, marshalPlanOf(m.Descriptor()), m)
}

// appendOf is append with m's plan.
func (e *encoder) appendOf(b []byte, p *marshalPlan, m protoreflect.Message) ([]byte, error) {
	n := e.sizes[e.next]
	e.next++
	if p.isStruct {
		own := e.structs[e.nextStruct]
		e.nextStruct++
		if own {
			start := len(b)
			b = slices.Grow(b, n)[:start+n]
			if k := writeStruct(b[start:], m.Interface().(*structpb.Struct)); k != n {
				return nil, fmt.Errorf("wrote %d bytes of a Struct, sized %d", k, n)
			}
			return b, nil
		}
	}
	if p.whole(m) {
		vt, ok := m.Interface().(vtMarshaler)
		if !ok {
			return deterministic.MarshalAppend(b, m.Interface())
		}
		start := len(b)
		b = b[:start+n]
		k, err := vt.MarshalToSizedBufferVTStrict(b[start:])
		if err != nil {
			return nil, err
		}
		if k != n {
			return nil, fmt.Errorf("vtprotobuf encoded %d bytes of %s, sized %d", k, m.Descriptor().FullName(), n)
		}
		return b, nil
	}
	var single protoreflect.Message
	for _, fd := range p.fields {
		if !m.Has(fd) {
			continue
		}
		var err error
		if fd.Kind() != protoreflect.MessageKind || fd.IsMap() {
			if v := m.Get(fd); scalarOK(fd, v) {
				b = appendScalar(b, fd, v)
				continue
			}
			single = alone(single, m, fd)
			b, err = deterministic.MarshalAppend(b, single.Interface())
			single.Clear(fd)
		} else {
			cp := marshalPlanOf(fd.Message())
			err = eachMessage(m, fd, func(c protoreflect.Message) error {
				b = protowire.AppendTag(b, fd.Number(), protowire.BytesType)
				b = protowire.AppendVarint(b, uint64(e.sizes[e.next]))
				var err error
				b, err = e.appendOf(b, cp, c)
				return err
			})
		}
		if err != nil {
			return nil, err
		}
	}
	return append(b, m.GetUnknown()...), nil
}

// alone is a message of m's type holding only m's field fd (in single when
// not nil, which holds no field).
func alone(single, m protoreflect.Message, fd protoreflect.FieldDescriptor) protoreflect.Message {
	if single == nil {
		single = m.Type().New()
	}
	single.Set(fd, m.Get(fd))
	return single
}

// eachMessage calls f with the message of m's field fd, or each of its list.
func eachMessage(m protoreflect.Message, fd protoreflect.FieldDescriptor, f func(protoreflect.Message) error) error {
	if !fd.IsList() {
		return f(m.Get(fd).Message())
	}
	l := m.Get(fd).List()
	for i := range l.Len() {
		if err := f(l.Get(i).Message()); err != nil {
			return err
		}
	}
	return nil
}

// marshalPlan is how the encoder writes a message type.
type marshalPlan struct {
	// stable: no message it can hold (itself included) is a
	// google.protobuf.Struct, has a map with bool keys, or lacks
	// vtprotobuf's code (the generated code of a type without it, or of a
	// well-known type, calls protobuf-go's non-deterministic proto.Marshal or
	// vtprotobuf's types, whose maps are in Go's order).
	stable bool
	// unstable are the fields that make a type with vtprotobuf's code not
	// stable; a message of it none of them is set in is written whole all
	// the same (a streamed plan: its google.rpc.Status is set on errors
	// alone). Nil for a stable type or one without vtprotobuf's code.
	unstable []protoreflect.FieldDescriptor
	// fields in field number order.
	fields []protoreflect.FieldDescriptor
	// isStruct: the type is google.protobuf.Struct (structenc.go).
	isStruct bool
}

// whole says whether m, of the plan's type, is written whole by vtprotobuf
// (or protobuf-go) rather than field by field.
func (p *marshalPlan) whole(m protoreflect.Message) bool {
	if p.stable {
		return true
	}
	if p.unstable == nil {
		return false
	}
	for _, fd := range p.unstable {
		if m.Has(fd) {
			return false
		}
	}
	return true
}

// marshalPlans caches the plans by message type (protoreflect.FullName).
var marshalPlans sync.Map

func marshalPlanOf(md protoreflect.MessageDescriptor) *marshalPlan {
	if p, ok := marshalPlans.Load(md.FullName()); ok {
		return p.(*marshalPlan)
	}
	fields := make([]protoreflect.FieldDescriptor, md.Fields().Len())
	for i := range fields {
		fields[i] = md.Fields().Get(i)
	}
	slices.SortFunc(fields, func(a, b protoreflect.FieldDescriptor) int { return cmp.Compare(a.Number(), b.Number()) })
	p := &marshalPlan{stable: stableTypes(md, map[protoreflect.FullName]bool{}), fields: fields, isStruct: md.FullName() == structName}
	if !p.stable {
		p.unstable = unstableFields(md)
	}
	marshalPlans.Store(md.FullName(), p)
	return p
}

// unstableFields are the fields of md, a type that is not stable, that
// make it so, when md has vtprotobuf's code and its maps have no bool keys
// (nil otherwise).
func unstableFields(md protoreflect.MessageDescriptor) []protoreflect.FieldDescriptor {
	if !hasVTCode(md) {
		return nil
	}
	unstable := []protoreflect.FieldDescriptor{}
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.Message() != nil && !stableTypes(fd.Message(), map[protoreflect.FullName]bool{}) {
			unstable = append(unstable, fd)
		}
	}
	return unstable
}

// stableTypes says whether vtprotobuf's generated encoder of md writes every
// message md can hold deterministically. seen holds the types being looked at
// (recursive types).
func stableTypes(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	if seen[md.FullName()] {
		return true
	}
	seen[md.FullName()] = true
	if md.FullName() == structName {
		return false
	}
	switch {
	case md.IsMapEntry():
		if md.Fields().ByNumber(1).Kind() == protoreflect.BoolKind {
			return false
		}
	case vtWellKnown[md.FullName()]:
	case !hasVTCode(md):
		return false
	}
	fields := md.Fields()
	for i := range fields.Len() {
		if fd := fields.Get(i); fd.Message() != nil && !stableTypes(fd.Message(), seen) {
			return false
		}
	}
	return true
}

// hasVTCode says whether md's generated type has vtprotobuf's encoder.
func hasVTCode(md protoreflect.MessageDescriptor) bool {
	if _, ok := vtTypes.Load(md.FullName()); ok {
		return true
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
	if err != nil {
		return false
	}
	if _, ok := mt.New().Interface().(vtMarshaler); !ok {
		return false
	}
	vtTypes.Store(md.FullName(), true)
	return true
}

// vtTypes are the message types known to have vtprotobuf's encoder.
var vtTypes sync.Map

// vtWellKnown are the well-known types whose vtprotobuf encoder (in its own
// types/known packages, which generated code calls) has no map: it writes
// them as protobuf-go does, but for unknown fields, which it drops (none
// reach here: the messages encoded are built, not decoded). google.protobuf.Struct is not one of them, nor
// Value and ListValue, which hold Structs.
var vtWellKnown = map[protoreflect.FullName]bool{
	"google.protobuf.Any": true, "google.protobuf.Duration": true, "google.protobuf.Empty": true,
	"google.protobuf.FieldMask": true, "google.protobuf.Timestamp": true,
	"google.protobuf.DoubleValue": true, "google.protobuf.FloatValue": true,
	"google.protobuf.Int64Value": true, "google.protobuf.UInt64Value": true,
	"google.protobuf.Int32Value": true, "google.protobuf.UInt32Value": true,
	"google.protobuf.BoolValue": true, "google.protobuf.StringValue": true,
	"google.protobuf.BytesValue": true,
}

// vtUnmarshaler is a message with vtprotobuf's generated decoder.
type vtUnmarshaler interface {
	proto.Message
	UnmarshalVT([]byte) error
}

func (deterministicCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if !chargeFor(v, data.Len()) {
		// Not decoded: the call answers the admission's refusal instead
		// (chargingDecoder). An error here would be answered as grpc's
		// INTERNAL "failed to unmarshal".
		return nil
	}
	if w, ok := v.(WireUnmarshaler); ok {
		return w.UnmarshalWire(data.Materialize())
	}
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("cannot unmarshal into %T: not a proto message", v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	// UnmarshalVT copies strings and bytes out of the buffer, which is
	// freed on return.
	return Unmarshal(buf.ReadOnlyData(), m)
}

// Unmarshal decodes b into m as the codec decodes a message without a
// registered decoder: vtprotobuf's decoder when m has one, then the UTF-8
// check; protobuf-go's otherwise. m is reset first.
func Unmarshal(b []byte, m proto.Message) error {
	vt, ok := m.(vtUnmarshaler)
	if !ok {
		return proto.Unmarshal(b, m)
	}
	// UnmarshalVT merges into the message, proto.Unmarshal replaces it.
	proto.Reset(vt)
	if err := vt.UnmarshalVT(b); err != nil {
		return err
	}
	return validUTF8(b, vt.ProtoReflect().Descriptor())
}

// CheckUTF8 is the codec's UTF-8 check of b, an encoding of m's type (or a
// run of its fields): nil when every proto3 string in it is valid UTF-8.
func CheckUTF8(b []byte, m proto.Message) error {
	return validUTF8(b, m.ProtoReflect().Descriptor())
}

// WireMarshaler is a value the codec has encode itself: a client sending a
// message it writes straight from other types than its generated ones (the
// executor writes pods straight from Kubernetes pods). The concatenated
// parts are the message's encoding.
type WireMarshaler interface {
	MarshalWire() ([][]byte, error)
}

// WireUnmarshaler is a value the codec has decode itself from the wire
// format: a service receiving a message into other types than its
// generated ones (the planner decodes pods straight into Kubernetes pods).
// b is the value's own (a copy of what was received), so what it decodes
// may be views of b; it must refuse what the codec refuses, invalid UTF-8
// included (Unmarshal, CheckUTF8).
type WireUnmarshaler interface {
	UnmarshalWire(b []byte) error
}

func (deterministicCodec) Name() string { return "proto" }

// errInvalidUTF8 is what the codec answers for a proto3 string that is not
// valid UTF-8, as proto.Unmarshal does.
var errInvalidUTF8 = errors.New("string field contains invalid UTF-8")

// validUTF8 is nil when every proto3 string field in b, encoded message of
// md (nested messages, list elements and map keys and values included), is
// valid UTF-8. It reads the wire format again rather than the decoded
// message: no allocation, a fraction of the decoding's cost. b has already
// been decoded without error.
func validUTF8(b []byte, md protoreflect.MessageDescriptor) error {
	return utf8PlanOf(md).check(b)
}

// utf8Plan is what validUTF8 does with each length-delimited field of a
// message type: fields[n] for field number n below 4096, big for the others.
type utf8Plan struct {
	fields []utf8Field
	big    map[protowire.Number]utf8Field
}

type utf8Field struct {
	str bool      // a proto3 string
	msg *utf8Plan // a message (a map's entry included) holding strings
}

// utf8Plans caches the plans by message type (protoreflect.FullName).
var utf8Plans sync.Map

func utf8PlanOf(md protoreflect.MessageDescriptor) *utf8Plan {
	if p, ok := utf8Plans.Load(md.FullName()); ok {
		return p.(*utf8Plan)
	}
	p := buildUTF8Plan(md, map[protoreflect.FullName]*utf8Plan{})
	utf8Plans.Store(md.FullName(), p)
	return p
}

// buildUTF8Plan is md's plan; seen holds those being built (recursive types).
func buildUTF8Plan(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]*utf8Plan) *utf8Plan {
	if p, ok := seen[md.FullName()]; ok {
		return p
	}
	p := &utf8Plan{}
	seen[md.FullName()] = p
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		var f utf8Field
		switch fd.Kind() {
		case protoreflect.StringKind:
			f.str = fd.ParentFile().Syntax() == protoreflect.Proto3
		case protoreflect.MessageKind:
			if holdsStrings(fd.Message(), map[protoreflect.FullName]bool{}) { // not a Timestamp
				f.msg = buildUTF8Plan(fd.Message(), seen)
			}
		}
		if !f.str && f.msg == nil {
			continue
		}
		n := int(fd.Number())
		if n >= 1<<12 {
			if p.big == nil {
				p.big = map[protowire.Number]utf8Field{}
			}
			p.big[fd.Number()] = f
			continue
		}
		for len(p.fields) <= n {
			p.fields = append(p.fields, utf8Field{})
		}
		p.fields[n] = f
	}
	return p
}

// holdsStrings says whether a message of type md can hold a proto3 string;
// seen holds the types being looked at.
func holdsStrings(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	if seen[md.FullName()] {
		return false
	}
	seen[md.FullName()] = true
	fields := md.Fields()
	for i := range fields.Len() {
		switch fd := fields.Get(i); fd.Kind() {
		case protoreflect.StringKind:
			if fd.ParentFile().Syntax() == protoreflect.Proto3 {
				return true
			}
		case protoreflect.MessageKind:
			if holdsStrings(fd.Message(), seen) {
				return true
			}
		}
	}
	return false
}

func (p *utf8Plan) check(b []byte) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var f utf8Field
		if int(num) < len(p.fields) {
			f = p.fields[num]
		} else if p.big != nil {
			f = p.big[num]
		}
		switch {
		case f.str:
			if !utf8.Valid(v) {
				return errInvalidUTF8
			}
		case f.msg != nil:
			if err := f.msg.check(v); err != nil {
				return err
			}
		}
	}
	return nil
}
