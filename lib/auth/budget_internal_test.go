package auth

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sync/singleflight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/jobplane/jobplane/lib/retryinfo"
)

// A call that ends while its review waits is answered at once; the review
// goes on, so that its caller, calling again with a deadline as short,
// finds the answer cached (or joins the review) rather than waiting from
// the back of its lane again.
func TestAReviewOutlivesItsCall(t *testing.T) {
	turn := make(chan struct{})
	wait := func(context.Context) error { <-turn; return nil }
	reviewed := make(chan struct{})
	review := func(context.Context) (any, error) { close(reviewed); return "answer", nil }

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := shareReview(ctx, &singleflight.Group{}, "q", wait, review)
	if got := status.Code(budgetStatus(ctx, err, "TokenReview")); got != codes.DeadlineExceeded {
		t.Fatalf("the call that ended: %v (%v), want DeadlineExceeded", got, err)
	}
	close(turn)
	select {
	case <-reviewed:
	case <-time.After(5 * time.Second):
		t.Fatal("the review was dropped with its call")
	}
}

// A review that had no turn is RESOURCE_EXHAUSTED with a RetryInfo, for a
// client to come back later; other failures are left to the caller.
func TestAReviewWithNoTurnIsExhausted(t *testing.T) {
	noTurn := func(context.Context) error { return fmt.Errorf("%w: %w", errNoTurn, context.DeadlineExceeded) }
	_, err := shareReview(context.Background(), &singleflight.Group{}, "q", noTurn, nil)
	st := budgetStatus(context.Background(), err, "SubjectAccessReview")
	if status.Code(st) != codes.ResourceExhausted {
		t.Fatalf("got %v, want ResourceExhausted", st)
	}
	if delay, ok := retryinfo.Delay(st); !ok || delay < reviewTimeout/2 || delay > 3*reviewTimeout/2 {
		t.Errorf("RetryInfo delay %v (%v), want about %v", delay, ok, reviewTimeout)
	}
	if budgetStatus(context.Background(), errors.New("connection refused"), "TokenReview") != nil {
		t.Error("a failure of the API server was taken for the budget's")
	}
}

// At most as many reviews wait as the budget serves in reviewTimeout; when
// that many wait, a new one takes the place of the newest of the lane with
// the most, as long as that lane keeps more than the newcomer's: a lane
// flooding alone may fill the bound, and leaves room to every other.
func TestWaitingReviewsAreSharedMaxMinFairly(t *testing.T) {
	b := NewReviewBudget(0.5, 1) // 5 may wait
	defer b.Stop()
	if err := b.wait(context.Background(), "hosts/used"); err != nil { // the burst
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	left := make(chan error, 10)
	waitIn := func(lane string) {
		go func() { left <- b.wait(ctx, lane) }()
	}
	waitFor := func(total int) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			b.mu.Lock()
			n := b.total
			b.mu.Unlock()
			if n == total {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d waiting, want %d", n, total)
			}
		}
	}
	for range 5 {
		waitIn("hosts/flood")
		waitFor(len(b.waiting["hosts/flood"]))
	}
	waitFor(5)
	displaced := func(lane string) {
		t.Helper()
		waitIn(lane)
		if err := <-left; !errors.Is(err, errNoTurn) || !errors.Is(err, errDisplaced) {
			t.Fatalf("a waiting review left with %v, want displaced", err)
		}
	}
	displaced("hosts/a") // flood 4, a 1
	displaced("hosts/a") // flood 3, a 2
	if err := b.wait(ctx, "hosts/a"); !errors.Is(err, errNoTurn) || errors.Is(err, errDisplaced) {
		t.Errorf("a third of a's, with flood's 3 and a's 2 waiting: %v, want refused", err)
	}
	displaced("hosts/b") // flood 2, a 2, b 1
	b.mu.Lock()
	defer b.mu.Unlock()
	if got := [3]int{len(b.waiting["hosts/flood"]), len(b.waiting["hosts/a"]), len(b.waiting["hosts/b"])}; got != [3]int{2, 2, 1} || b.total != 5 {
		t.Errorf("waiting flood, a, b = %v (total %d), want [2 2 1] (5)", got, b.total)
	}
}

// A host is a suspect once suspectAfter of its tokens were refused, and its
// reviews wait in a suspect's lane; other hosts are not.
func TestAHostRefusedOftenIsASuspect(t *testing.T) {
	b := NewReviewBudget(50, 100)
	defer b.Stop()
	for range suspectAfter - 1 {
		b.refusedFrom("10.0.0.1")
	}
	if got := b.hostLane("10.0.0.1"); got != "hosts/10.0.0.1" {
		t.Errorf("after %d refusals: %s, want a host's lane", suspectAfter-1, got)
	}
	b.refusedFrom("10.0.0.1")
	if got := b.hostLane("10.0.0.1"); got != "suspects/10.0.0.1" {
		t.Errorf("after %d refusals: %s, want a suspect's lane", suspectAfter, got)
	}
	if got := b.hostLane("10.0.0.2"); got != "hosts/10.0.0.2" {
		t.Errorf("another host: %s, want a host's lane", got)
	}
}
