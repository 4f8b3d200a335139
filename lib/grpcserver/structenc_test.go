package grpcserver

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/structpb"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
)

// Property: every message of the contract, filled at random (every kind of
// field, Structs nested in lists and Structs, unknown enum numbers,
// negative numbers, optional fields set to zero), is written as
// protobuf-go's deterministic marshaling writes it.
func TestPropertyRandomMessagesAreWrittenAsDeterministicProto(t *testing.T) {
	file := jobplanev1.File_jobplane_v1_planner_service_proto.Package()
	var types []protoreflect.MessageType
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		if mt.Descriptor().ParentFile().Package() == file {
			types = append(types, mt)
		}
		return true
	})
	if len(types) < 20 {
		t.Fatalf("found %d message types of the contract", len(types))
	}
	for _, mt := range types {
		t.Run(string(mt.Descriptor().FullName()), func(t *testing.T) {
			for seed := range uint64(30) {
				r := rand.New(rand.NewPCG(seed, 7))
				m := mt.New()
				randomFill(r, m, 0)
				want, err := proto.MarshalOptions{Deterministic: true}.Marshal(m.Interface())
				if err != nil {
					t.Fatal(err)
				}
				got, err := Codec().Marshal(m.Interface())
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got.Materialize(), want) {
					t.Fatalf("seed %d: not the bytes of protobuf-go's deterministic marshaling", seed)
				}
			}
		})
	}
}

// Structs the codec leaves to protobuf-go are still written as it writes
// them, or refused as it refuses them.
func TestStructsLeftToProtobufGo(t *testing.T) {
	invalid := string([]byte{0xc3, 0x28})
	for name, s := range map[string]*structpb.Struct{
		"unknown fields": func() *structpb.Struct {
			s, _ := structpb.NewStruct(map[string]any{"a": 1})
			s.ProtoReflect().SetUnknown([]byte{0xf8, 0x3e, 0x07}) // field 999, varint 7
			return s
		}(),
		"nil value":          {Fields: map[string]*structpb.Value{"a": nil}},
		"nil nested struct":  {Fields: map[string]*structpb.Value{"a": {Kind: &structpb.Value_StructValue{}}}},
		"nil list":           {Fields: map[string]*structpb.Value{"a": {Kind: &structpb.Value_ListValue{}}}},
		"invalid key":        {Fields: map[string]*structpb.Value{invalid: structpb.NewBoolValue(true)}},
		"invalid value":      {Fields: map[string]*structpb.Value{"a": structpb.NewStringValue(invalid)}},
		"value without kind": {Fields: map[string]*structpb.Value{"a": {}}},
	} {
		t.Run(name, func(t *testing.T) {
			for _, m := range []proto.Message{s, &jobplanev1.PodTemplateSpec{Spec: s}} {
				want, wantErr := proto.MarshalOptions{Deterministic: true}.Marshal(m)
				got, err := Codec().Marshal(m)
				if (err != nil) != (wantErr != nil) {
					t.Fatalf("error %v, protobuf-go's %v", err, wantErr)
				}
				if err == nil && !bytes.Equal(got.Materialize(), want) {
					t.Fatal("not the bytes of protobuf-go's deterministic marshaling")
				}
			}
		})
	}
}

// randomFill sets a random selection of m's fields to random values.
func randomFill(r *rand.Rand, m protoreflect.Message, depth int) {
	if m.Descriptor().FullName() == structName {
		s := randomStruct(r, depth)
		proto.Merge(m.Interface(), s)
		return
	}
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if r.IntN(3) == 0 || (fd.Message() != nil && depth > 5) {
			continue
		}
		switch {
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			for range r.IntN(4) {
				k := randomScalar(r, fd.MapKey())
				if fd.MapValue().Message() != nil {
					v := mp.NewValue()
					randomFill(r, v.Message(), depth+1)
					mp.Set(k.MapKey(), v)
				} else {
					mp.Set(k.MapKey(), randomScalar(r, fd.MapValue()))
				}
			}
		case fd.IsList():
			list := m.Mutable(fd).List()
			for range r.IntN(3) {
				if fd.Message() != nil {
					v := list.NewElement()
					randomFill(r, v.Message(), depth+1)
					list.Append(v)
				} else {
					list.Append(randomScalar(r, fd))
				}
			}
		case fd.Message() != nil:
			randomFill(r, m.Mutable(fd).Message(), depth+1)
		default:
			m.Set(fd, randomScalar(r, fd))
		}
	}
}

// randomStruct is a Struct of every kind of value, nested.
func randomStruct(r *rand.Rand, depth int) *structpb.Struct {
	s := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for range r.IntN(5) {
		s.Fields[randomString(r)] = randomValue(r, depth+1)
	}
	return s
}

func randomValue(r *rand.Rand, depth int) *structpb.Value {
	kinds := 5
	if depth < 4 {
		kinds = 7
	}
	switch r.IntN(kinds) {
	case 0:
		return structpb.NewNullValue()
	case 1:
		return structpb.NewNumberValue([]float64{0, math.Copysign(0, -1), 1.5, -3, math.MaxFloat64, math.Inf(1), math.NaN(), r.NormFloat64()}[r.IntN(8)])
	case 2:
		return structpb.NewStringValue(randomString(r))
	case 3:
		return structpb.NewBoolValue(r.IntN(2) == 0)
	case 4:
		return &structpb.Value{}
	case 5:
		return structpb.NewStructValue(randomStruct(r, depth))
	}
	l := &structpb.ListValue{}
	for range r.IntN(4) {
		l.Values = append(l.Values, randomValue(r, depth+1))
	}
	return structpb.NewListValue(l)
}

func randomString(r *rand.Rand) string {
	return []string{"", "a", "restartPolicy", "é", "containers", "名前", fmt.Sprint(r.Int64())}[r.IntN(7)]
}

func randomScalar(r *rand.Rand, fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(randomString(r))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(randomString(r)))
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(r.IntN(2) == 0)
	case protoreflect.EnumKind:
		values := fd.Enum().Values()
		if r.IntN(4) == 0 {
			return protoreflect.ValueOfEnum(protoreflect.EnumNumber(-1 - r.Int32N(5)))
		}
		return protoreflect.ValueOfEnum(values.Get(r.IntN(values.Len())).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32([]int32{0, -1, 1, math.MinInt32, math.MaxInt32, r.Int32()}[r.IntN(6)])
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64([]int64{0, -1, 1, math.MinInt64, math.MaxInt64, r.Int64()}[r.IntN(6)])
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32([]uint32{0, 1, math.MaxUint32, r.Uint32()}[r.IntN(4)])
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64([]uint64{0, 1, math.MaxUint64, r.Uint64()}[r.IntN(4)])
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32([]float32{0, -1.5, float32(math.Inf(-1)), r.Float32()}[r.IntN(4)])
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64([]float64{0, -1.5, math.NaN(), r.Float64()}[r.IntN(4)])
	}
	panic(fmt.Sprintf("no value for %s (%s)", fd.FullName(), fd.Kind()))
}

// Every scalar kind, of implicit presence (proto3) and explicit (proto2,
// whose strings need not be UTF-8), is written by the codec's own path as
// protobuf-go writes it, zero and negative values and unknown enum numbers
// included.
func TestEveryScalarKindIsWrittenAsDeterministicProto(t *testing.T) {
	for _, syntax := range []string{"proto3", "proto2"} {
		t.Run(syntax, func(t *testing.T) {
			md := allKindsMessage(t, syntax)
			for seed := range uint64(200) {
				r := rand.New(rand.NewPCG(seed, 11))
				m := dynamicpb.NewMessage(md)
				fields := md.Fields()
				for i := range fields.Len() {
					fd := fields.Get(i)
					if r.IntN(4) > 0 {
						m.Set(fd, randomScalar(r, fd))
					}
				}
				if syntax == "proto2" && r.IntN(3) == 0 {
					m.Set(fields.ByName("string_field"), protoreflect.ValueOfString(string([]byte{0xc3, 0x28})))
				}
				want, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
				if err != nil {
					t.Fatal(err)
				}
				got, err := Codec().Marshal(m)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got.Materialize(), want) {
					t.Fatalf("seed %d: %x, protobuf-go wrote %x", seed, got.Materialize(), want)
				}
			}
		})
	}
}

// allKindsMessage is a message with a singular field of each scalar kind.
func allKindsMessage(t *testing.T, syntax string) protoreflect.MessageDescriptor {
	t.Helper()
	kinds := map[string]descriptorpb.FieldDescriptorProto_Type{
		"bool": descriptorpb.FieldDescriptorProto_TYPE_BOOL, "enum": descriptorpb.FieldDescriptorProto_TYPE_ENUM,
		"int32": descriptorpb.FieldDescriptorProto_TYPE_INT32, "int64": descriptorpb.FieldDescriptorProto_TYPE_INT64,
		"uint32": descriptorpb.FieldDescriptorProto_TYPE_UINT32, "uint64": descriptorpb.FieldDescriptorProto_TYPE_UINT64,
		"sint32": descriptorpb.FieldDescriptorProto_TYPE_SINT32, "sint64": descriptorpb.FieldDescriptorProto_TYPE_SINT64,
		"fixed32": descriptorpb.FieldDescriptorProto_TYPE_FIXED32, "fixed64": descriptorpb.FieldDescriptorProto_TYPE_FIXED64,
		"sfixed32": descriptorpb.FieldDescriptorProto_TYPE_SFIXED32, "sfixed64": descriptorpb.FieldDescriptorProto_TYPE_SFIXED64,
		"float": descriptorpb.FieldDescriptorProto_TYPE_FLOAT, "double": descriptorpb.FieldDescriptorProto_TYPE_DOUBLE,
		"string": descriptorpb.FieldDescriptorProto_TYPE_STRING, "bytes": descriptorpb.FieldDescriptorProto_TYPE_BYTES,
	}
	msg := &descriptorpb.DescriptorProto{Name: proto.String("AllKinds")}
	for i, name := range slices.Sorted(maps.Keys(kinds)) {
		fd := &descriptorpb.FieldDescriptorProto{
			Name: proto.String(name + "_field"), Number: proto.Int32(int32(i + 1)), Type: kinds[name].Enum(),
			Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
		}
		if name == "enum" {
			fd.TypeName = proto.String(".codectest." + syntax + ".Kind")
		}
		msg.Field = append(msg.Field, fd)
	}
	file := &descriptorpb.FileDescriptorProto{
		Name: proto.String("codectest_" + syntax + ".proto"), Package: proto.String("codectest." + syntax), Syntax: proto.String(syntax),
		EnumType: []*descriptorpb.EnumDescriptorProto{{Name: proto.String("Kind"), Value: []*descriptorpb.EnumValueDescriptorProto{
			{Name: proto.String("KIND_" + syntax + "_ZERO"), Number: proto.Int32(0)}, {Name: proto.String("KIND_" + syntax + "_ONE"), Number: proto.Int32(1)},
		}}},
		MessageType: []*descriptorpb.DescriptorProto{msg},
	}
	fd, err := protodesc.NewFile(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	return fd.Messages().Get(0)
}
