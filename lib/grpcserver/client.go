package grpcserver

import "google.golang.org/grpc"

// The flow-control windows of a client of a chassis server: room for a
// large plan or watch event in flight, not buffered beyond what the client
// reads.
const (
	clientStreamWindow = 4 << 20
	clientConnWindow   = 16 << 20
)

// ClientWindows are the dial options that give a client connection fixed
// flow-control windows. A fixed window turns off grpc-go's BDP estimation,
// which pings the server whenever an answer arrives after its last ping was
// acknowledged: on a stream of small answers, one PING and its ack for
// every answer, a read and a write more for the server each time (a small
// sync cost the planner 200 µs of CPU with it, 140 µs without:
// BenchmarkSparseSmallSyncs).
func ClientWindows() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithInitialWindowSize(clientStreamWindow),
		grpc.WithInitialConnWindowSize(clientConnWindow),
	}
}
