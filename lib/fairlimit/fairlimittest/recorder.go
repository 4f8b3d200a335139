// Package fairlimittest holds test helpers for code that queues its API
// requests in fairlimit's lanes.
package fairlimittest

import (
	"context"
	"slices"
	"sync"

	"k8s.io/client-go/util/flowcontrol"

	"github.com/jobplane/jobplane/lib/fairlimit"
)

// LaneRecorder is a client-go rate limiter that lets every request through
// and records the lane each was made in (fairlimit.LaneOf).
type LaneRecorder struct {
	mu    sync.Mutex
	lanes []string
}

var _ flowcontrol.RateLimiter = (*LaneRecorder)(nil)

func (r *LaneRecorder) Wait(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lanes = append(r.lanes, fairlimit.LaneOf(ctx))
	return nil
}
func (r *LaneRecorder) TryAccept() bool { return true }
func (r *LaneRecorder) Accept()         {}
func (r *LaneRecorder) Stop()           {}
func (r *LaneRecorder) QPS() float32    { return 1 }

// Seen are the lanes recorded so far, in order.
func (r *LaneRecorder) Seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lanes)
}
