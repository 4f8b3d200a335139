package svc

import (
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
)

// FuzzPlanSync feeds arbitrary bytes as a PlanSync request: every input that
// decodes is either planned or refused with InvalidArgument, never a panic,
// and planning it twice gives the same plan; sent on a stream as a delta
// against a base derived from it, it is planned byte for byte the same, or
// refused likewise. The committed corpus is in testdata/fuzz/FuzzPlanSync;
// `make fuzz` runs it longer.
func FuzzPlanSync(f *testing.F) {
	for _, name := range []string{"plansync-indexed-job.json"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		req := &jobplanev1.PlanSyncRequest{}
		if err := protojson.Unmarshal(data, req); err != nil {
			f.Fatal(err)
		}
		seed, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &jobplanev1.PlanSyncRequest{}
		if err := proto.Unmarshal(data, req); err != nil {
			return
		}
		first, err := planSync(req)
		if err != nil {
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("refused with %v, want InvalidArgument", err)
			}
			return
		}
		second, err := planSync(req)
		if err != nil || !proto.Equal(first, second) {
			t.Fatalf("the same request planned twice differs: %v", err)
		}
		checkDeltaEquivalence(t, req, len(data))
	})
}
