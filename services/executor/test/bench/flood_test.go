package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The flood's answers are counted by the code of their meaning, whichever
// front door gave them.
func TestFloodAnswersAreCountedByCode(t *testing.T) {
	jobs := schema.GroupResource{Group: "batch", Resource: "jobs"}
	for err, want := range map[error]codes.Code{
		nil: codes.OK,
		apierrors.NewForbidden(jobs, "", errors.New("no")): codes.PermissionDenied,
		apierrors.NewTooManyRequests("later", 1):           codes.ResourceExhausted,
		status.Error(codes.PermissionDenied, "no"):         codes.PermissionDenied,
		status.Error(codes.ResourceExhausted, "later"):     codes.ResourceExhausted,
		errors.New("connection reset"):                     codes.Unknown,
	} {
		if got := codeOf(err); got != want {
			t.Errorf("codeOf(%v) = %v, want %v", err, got, want)
		}
	}
	answers := []error{nil, status.Error(codes.PermissionDenied, "no"), nil}
	var made atomic.Int32
	stop := startFlood(1, func(context.Context) error {
		if i := int(made.Add(1)) - 1; i < len(answers) {
			return answers[i]
		}
		return status.Error(codes.ResourceExhausted, "later")
	})
	for made.Load() <= int32(len(answers)) {
		time.Sleep(time.Millisecond)
	}
	answered, _ := stop()
	total := 0
	for _, k := range answered {
		total += k
	}
	if answered["OK"] != 2 || answered["PermissionDenied"] != 1 || total != int(made.Load()) {
		t.Errorf("answered %v of %d calls, want 2 OK, 1 PermissionDenied and every other call ResourceExhausted", answered, made.Load())
	}
}

func TestTheFloodTableComparesEachPhaseWithTheQuietOne(t *testing.T) {
	r := &result{Scenario: "flood", Variant: "jobplane", QPS: "20/30", Jobs: 200, BesidePods: 4, Flooders: 64, Flood: map[string]*floodPhase{
		"quiet":   {Seconds: []float64{2, 2, 2}, Bystander: &bystanderReads{P50: 1, P99: 2, Max: 3, Calls: map[string]int{"OK": 300}}},
		"allowed": {Seconds: []float64{3, 3, 3}, Calls: map[string]int{"OK": 4000}, CallSeconds: 40, Bystander: &bystanderReads{P50: 1.5, P99: 5, Max: 9, Calls: map[string]int{"OK": 290, "ResourceExhausted": 10}}},
		"denied":  {Seconds: []float64{2, 2, 2}, Calls: map[string]int{"PermissionDenied": 8000}, CallSeconds: 40},
	}}
	var out bytes.Buffer
	writeReport(&out, []string{"20/30"}, func(scenario, variant, qps string) *result {
		if scenario == r.Scenario && variant == r.Variant && qps == r.QPS {
			return r
		}
		return nil
	})
	for _, want := range []string{
		"| 20/30 | jobplane | allowed | 3.00, 3.00, 3.00 | 3.00 | 1.50 | 4000 OK | 100 |",
		"| 20/30 | jobplane | denied | 2.00, 2.00, 2.00 | 2.00 | 1.00 | 8000 PermissionDenied | 200 |",
		"| 20/30 | jobplane | quiet | 300 OK | 1.0 | 2.0 | 3.0 | 1.00 |",
		"| 20/30 | jobplane | allowed | 290 OK, 10 ResourceExhausted | 1.5 | 5.0 | 9.0 | 2.50 |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
}

// The bystander reads one call at a time, at its pace, and times only the
// calls answered.
func TestTheBystanderTimesItsAnsweredReads(t *testing.T) {
	var made, inFlight atomic.Int32
	stop := startBystander(func(context.Context) error {
		if inFlight.Add(1) > 1 {
			t.Error("two reads at once")
		}
		defer inFlight.Add(-1)
		if made.Add(1)%2 == 0 {
			return status.Error(codes.ResourceExhausted, "later")
		}
		time.Sleep(2 * time.Millisecond)
		return nil
	})
	for made.Load() < 4 {
		time.Sleep(time.Millisecond)
	}
	got := stop()
	ok, exhausted := got.Calls["OK"], got.Calls["ResourceExhausted"]
	if ok+exhausted != int(made.Load()) || ok < 2 || exhausted < 2 {
		t.Errorf("calls %v, want the %d made, every other one ResourceExhausted", got.Calls, made.Load())
	}
	if got.P50 < 2 || got.P99 < got.P50 || got.Max < got.P99 {
		t.Errorf("times %+v, want p50 ≥ 2 ms ≤ p99 ≤ max", got)
	}
}
