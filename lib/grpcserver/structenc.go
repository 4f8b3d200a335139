package grpcserver

import (
	"encoding/binary"
	"math"
	"slices"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"
)

// The codec writes a google.protobuf.Struct itself, its map in key order as
// protobuf-go's deterministic marshaling writes it, without reflection: the
// contract's pod template spec is one, in every Job an answer holds.
// structSize sizes it and says whether it may (ok); writeStruct then writes
// it backwards, as vtprotobuf does, so that no nested size is computed
// twice. A Struct holding what the codec leaves to protobuf-go, whose
// bytes and errors are then its own, is not ok: unknown fields, a string
// that is not valid UTF-8, a nil value or nested message.

// structName is the full name of google.protobuf.Struct.
const structName = "google.protobuf.Struct"

// The field numbers of struct.proto.
const (
	structFields    = 1 // Struct.fields, and of its map entries key = 1, value = 2
	valueNull       = 1
	valueNumber     = 2
	valueString     = 3
	valueBool       = 4
	valueStruct     = 5
	valueList       = 6
	listValueValues = 1
)

// structSize is the length of s's encoding, and whether the codec writes
// it (writeStruct).
func structSize(s *structpb.Struct) (int, bool) {
	if len(s.ProtoReflect().GetUnknown()) > 0 {
		return 0, false
	}
	n := 0
	for k, v := range s.GetFields() {
		if !utf8.ValidString(k) {
			return 0, false
		}
		vn, ok := valueSize(v)
		if !ok {
			return 0, false
		}
		entry := protowire.SizeTag(1) + protowire.SizeBytes(len(k)) + protowire.SizeTag(2) + protowire.SizeBytes(vn)
		n += protowire.SizeTag(structFields) + protowire.SizeBytes(entry)
	}
	return n, true
}

func valueSize(v *structpb.Value) (int, bool) {
	if v == nil || len(v.ProtoReflect().GetUnknown()) > 0 {
		return 0, false
	}
	switch k := v.GetKind().(type) {
	case nil:
		return 0, true
	case *structpb.Value_NullValue:
		return protowire.SizeTag(valueNull) + protowire.SizeVarint(uint64(k.NullValue)), true
	case *structpb.Value_NumberValue:
		return protowire.SizeTag(valueNumber) + protowire.SizeFixed64(), true
	case *structpb.Value_StringValue:
		if !utf8.ValidString(k.StringValue) {
			return 0, false
		}
		return protowire.SizeTag(valueString) + protowire.SizeBytes(len(k.StringValue)), true
	case *structpb.Value_BoolValue:
		return protowire.SizeTag(valueBool) + 1, true
	case *structpb.Value_StructValue:
		if k.StructValue == nil {
			return 0, false
		}
		n, ok := structSize(k.StructValue)
		return protowire.SizeTag(valueStruct) + protowire.SizeBytes(n), ok
	case *structpb.Value_ListValue:
		if k.ListValue == nil {
			return 0, false
		}
		n, ok := listSize(k.ListValue)
		return protowire.SizeTag(valueList) + protowire.SizeBytes(n), ok
	}
	return 0, false
}

func listSize(l *structpb.ListValue) (int, bool) {
	if len(l.ProtoReflect().GetUnknown()) > 0 {
		return 0, false
	}
	n := 0
	for _, v := range l.GetValues() {
		vn, ok := valueSize(v)
		if !ok {
			return 0, false
		}
		n += protowire.SizeTag(listValueValues) + protowire.SizeBytes(vn)
	}
	return n, true
}

// writeStruct writes s, which structSize accepted, so that it ends where
// buf does, and returns its length.
func writeStruct(buf []byte, s *structpb.Struct) int {
	i := len(buf)
	fields := s.GetFields()
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range slices.Backward(keys) {
		end := i
		i -= writeValue(buf[:i], fields[k])
		i = writeLength(buf, i, end-i)
		i = writeTag(buf, i, 2, protowire.BytesType)
		i -= copy(buf[i-len(k):i], k)
		i = writeLength(buf, i, len(k))
		i = writeTag(buf, i, 1, protowire.BytesType)
		i = writeLength(buf, i, end-i)
		i = writeTag(buf, i, structFields, protowire.BytesType)
	}
	return len(buf) - i
}

func writeValue(buf []byte, v *structpb.Value) int {
	i := len(buf)
	switch k := v.GetKind().(type) {
	case *structpb.Value_NullValue:
		i = writeVarint(buf, i, uint64(k.NullValue))
		i = writeTag(buf, i, valueNull, protowire.VarintType)
	case *structpb.Value_NumberValue:
		i -= 8
		binary.LittleEndian.PutUint64(buf[i:], math.Float64bits(k.NumberValue))
		i = writeTag(buf, i, valueNumber, protowire.Fixed64Type)
	case *structpb.Value_StringValue:
		i -= copy(buf[i-len(k.StringValue):i], k.StringValue)
		i = writeLength(buf, i, len(k.StringValue))
		i = writeTag(buf, i, valueString, protowire.BytesType)
	case *structpb.Value_BoolValue:
		i--
		buf[i] = 0
		if k.BoolValue {
			buf[i] = 1
		}
		i = writeTag(buf, i, valueBool, protowire.VarintType)
	case *structpb.Value_StructValue:
		i -= writeStruct(buf[:i], k.StructValue)
		i = writeLength(buf, i, len(buf)-i)
		i = writeTag(buf, i, valueStruct, protowire.BytesType)
	case *structpb.Value_ListValue:
		for _, e := range slices.Backward(k.ListValue.GetValues()) {
			end := i
			i -= writeValue(buf[:i], e)
			i = writeLength(buf, i, end-i)
			i = writeTag(buf, i, listValueValues, protowire.BytesType)
		}
		i = writeLength(buf, i, len(buf)-i)
		i = writeTag(buf, i, valueList, protowire.BytesType)
	}
	return len(buf) - i
}

// writeLength writes n as a varint ending at buf[i] and returns where it
// starts.
func writeLength(buf []byte, i, n int) int { return writeVarint(buf, i, uint64(n)) }

func writeTag(buf []byte, i int, num protowire.Number, typ protowire.Type) int {
	return writeVarint(buf, i, protowire.EncodeTag(num, typ))
}

func writeVarint(buf []byte, i int, v uint64) int {
	var tmp [binary.MaxVarintLen64]byte
	enc := protowire.AppendVarint(tmp[:0], v)
	return i - copy(buf[i-len(enc):i], enc)
}

// A singular scalar field of a message written field by field is written
// by the codec too, as protobuf-go writes it, where a message holding it
// alone would otherwise be made and encoded. scalarSize says whether it
// is (a string that is not valid UTF-8 is left to protobuf-go, whose error
// it is).
func scalarSize(fd protoreflect.FieldDescriptor, v protoreflect.Value) (int, bool) {
	if fd.IsList() || fd.IsMap() {
		return 0, false
	}
	tag := protowire.SizeTag(fd.Number())
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return tag + 1, true
	case protoreflect.EnumKind:
		return tag + protowire.SizeVarint(uint64(v.Enum())), true
	case protoreflect.Int32Kind, protoreflect.Int64Kind:
		return tag + protowire.SizeVarint(uint64(v.Int())), true
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind:
		return tag + protowire.SizeVarint(v.Uint()), true
	case protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		return tag + protowire.SizeVarint(protowire.EncodeZigZag(v.Int())), true
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return tag + protowire.SizeFixed32(), true
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return tag + protowire.SizeFixed64(), true
	case protoreflect.StringKind:
		if !utf8.ValidString(v.String()) {
			return 0, false
		}
		return tag + protowire.SizeBytes(len(v.String())), true
	case protoreflect.BytesKind:
		return tag + protowire.SizeBytes(len(v.Bytes())), true
	}
	return 0, false
}

// scalarOK says whether the codec writes fd's value v itself, as the
// size pass decided.
func scalarOK(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
	_, ok := scalarSize(fd, v)
	return ok
}

// appendScalar appends the field fd of value v, which scalarSize accepted.
func appendScalar(b []byte, fd protoreflect.FieldDescriptor, v protoreflect.Value) []byte {
	num := fd.Number()
	switch fd.Kind() {
	case protoreflect.BoolKind:
		b = protowire.AppendTag(b, num, protowire.VarintType)
		return protowire.AppendVarint(b, protowire.EncodeBool(v.Bool()))
	case protoreflect.EnumKind:
		b = protowire.AppendTag(b, num, protowire.VarintType)
		return protowire.AppendVarint(b, uint64(v.Enum()))
	case protoreflect.Int32Kind, protoreflect.Int64Kind:
		b = protowire.AppendTag(b, num, protowire.VarintType)
		return protowire.AppendVarint(b, uint64(v.Int()))
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind:
		b = protowire.AppendTag(b, num, protowire.VarintType)
		return protowire.AppendVarint(b, v.Uint())
	case protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		b = protowire.AppendTag(b, num, protowire.VarintType)
		return protowire.AppendVarint(b, protowire.EncodeZigZag(v.Int()))
	case protoreflect.Fixed32Kind:
		b = protowire.AppendTag(b, num, protowire.Fixed32Type)
		return protowire.AppendFixed32(b, uint32(v.Uint()))
	case protoreflect.Sfixed32Kind:
		b = protowire.AppendTag(b, num, protowire.Fixed32Type)
		return protowire.AppendFixed32(b, uint32(v.Int()))
	case protoreflect.FloatKind:
		b = protowire.AppendTag(b, num, protowire.Fixed32Type)
		return protowire.AppendFixed32(b, math.Float32bits(float32(v.Float())))
	case protoreflect.Fixed64Kind:
		b = protowire.AppendTag(b, num, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, v.Uint())
	case protoreflect.Sfixed64Kind:
		b = protowire.AppendTag(b, num, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, uint64(v.Int()))
	case protoreflect.DoubleKind:
		b = protowire.AppendTag(b, num, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, math.Float64bits(v.Float()))
	case protoreflect.StringKind:
		b = protowire.AppendTag(b, num, protowire.BytesType)
		return protowire.AppendString(b, v.String())
	case protoreflect.BytesKind:
		b = protowire.AppendTag(b, num, protowire.BytesType)
		return protowire.AppendBytes(b, v.Bytes())
	}
	panic("appendScalar: a field scalarSize refuses: " + string(fd.FullName()))
}
