package grpcserver

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// deterministicCodec is gRPC's proto codec with deterministic marshaling:
// map entries are written in key order, so the same response is the same
// bytes (the planner's contract), whatever Go's map iteration does.
type deterministicCodec struct{}

var _ encoding.CodecV2 = deterministicCodec{}

var deterministic = proto.MarshalOptions{Deterministic: true}

func (deterministicCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("cannot marshal %T: not a proto message", v)
	}
	b, err := deterministic.Marshal(m)
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (deterministicCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("cannot unmarshal into %T: not a proto message", v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}

func (deterministicCodec) Name() string { return "proto" }
