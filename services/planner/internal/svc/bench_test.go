package svc_test

import (
	"context"
	"fmt"
	"io"
	"testing"

	"google.golang.org/protobuf/proto"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/grpcserver/grpctest"
	"github.com/jobplane/jobplane/services/planner/internal/svc"
)

// noopPlanner answers every request with the same canned plan: the cost of
// gRPC, the chassis and the messages, without planning. The planner is
// compared with it in the same run.
type noopPlanner struct {
	jobplanev1.UnimplementedPlannerServiceServer
	plan *jobplanev1.PlanSyncResponse
}

func (n noopPlanner) PlanSync(context.Context, *jobplanev1.PlanSyncRequest) (*jobplanev1.PlanSyncResponse, error) {
	return n.plan, nil
}

func (n noopPlanner) StreamPlanSync(stream jobplanev1.PlannerService_StreamPlanSyncServer) error {
	for {
		req, err := stream.Recv()
		if err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		if err := stream.Send(&jobplanev1.StreamPlanSyncResponse{Id: req.GetId(), Response: n.plan}); err != nil {
			return err
		}
	}
}

// benchRequest is a 10-pod Indexed Job in mixed states.
func benchRequest(b *testing.B) *jobplanev1.PlanSyncRequest {
	req := loadRequest(b, "plansync-indexed-job.json")
	req.Job.Spec.Parallelism = proto.Int32(10)
	req.Job.Spec.Completions = proto.Int32(20)
	template := req.Pods[1]
	for i := 2; i < 10; i++ {
		p := proto.Clone(template).(*jobplanev1.Pod)
		p.Metadata.Name = fmt.Sprintf("render-%d-x%d", i, i)
		p.Metadata.Uid = fmt.Sprintf("pod-%d", i)
		p.Metadata.Annotations = map[string]string{"batch.kubernetes.io/job-completion-index": fmt.Sprint(i)}
		switch i % 4 {
		case 0:
			p.Status.Phase = "Succeeded"
		case 1:
			p.Status.Phase = "Pending"
			p.Status.Conditions = nil
		}
		req.Pods = append(req.Pods, p)
	}
	return req
}

// serve starts a chassis server on loopback TCP with one planner
// implementation and returns a client.
func serve(b *testing.B, impl jobplanev1.PlannerServiceServer) jobplanev1.PlannerServiceClient {
	srv := grpctest.StartTCP(b, func(s *grpcserver.Server) {
		s.RegisterService(&svc.ServiceDesc, impl)
	})
	return jobplanev1.NewPlannerServiceClient(srv.Conn)
}

// BenchmarkPlanSyncGRPC measures plans per second over loopback gRPC for a
// 10-pod Job: the planner and the no-op handler, unary (16 callers) and
// streaming (one stream, pipelined). hack/bench-planner.sh turns the result
// into the ratios of BENCHMARKS.md.
func BenchmarkPlanSyncGRPC(b *testing.B) {
	req := benchRequest(b)
	canned, err := client(b).PlanSync(context.Background(), req)
	if err != nil {
		b.Fatal(err)
	}
	handlers := []struct {
		name string
		impl jobplanev1.PlannerServiceServer
	}{
		{"planner", svc.NewPlannerService()},
		{"noop", noopPlanner{plan: canned}},
	}
	reqSize, respSize := proto.Size(req), proto.Size(canned)
	for _, h := range handlers {
		c := serve(b, h.impl)
		b.Run("handler="+h.name+"/mode=unary", func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := c.PlanSync(context.Background(), req); err != nil {
						b.Error(err)
						return
					}
				}
			})
			reportSizes(b, reqSize, respSize)
		})
		b.Run("handler="+h.name+"/mode=stream", func(b *testing.B) {
			b.ReportAllocs()
			stream, err := c.StreamPlanSync(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			sent := make(chan error, 1)
			go func() {
				for i := range b.N {
					if err := stream.Send(&jobplanev1.StreamPlanSyncRequest{Id: fmt.Sprint(i), Request: req}); err != nil {
						sent <- err
						return
					}
				}
				sent <- stream.CloseSend()
			}()
			for range b.N {
				resp, err := stream.Recv()
				if err != nil || resp.GetError() != nil {
					b.Fatalf("receiving: %v %v", err, resp.GetError())
				}
			}
			if err := <-sent; err != nil {
				b.Fatal(err)
			}
			reportSizes(b, reqSize, respSize)
		})
	}
}

func reportSizes(b *testing.B, req, resp int) {
	b.ReportMetric(float64(req), "req-bytes")
	b.ReportMetric(float64(resp), "resp-bytes")
}
