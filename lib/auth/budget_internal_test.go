package auth

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/sync/singleflight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/jobplane/jobplane/lib/retryinfo"
)

// A review waiting for its turn ends with the call that began it: no turn
// is spent on a call given up, and the call is answered CANCELED.
func TestAReviewsWaitEndsWithItsCall(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	wait := func(ctx context.Context) error { cancel(); <-ctx.Done(); return ctx.Err() }
	_, err := shareReview(ctx, &singleflight.Group{}, "q", wait, func(context.Context) (any, error) {
		t.Error("the review was sent for a call that had ended")
		return nil, nil
	})
	if got := status.Code(budgetStatus(ctx, err, "TokenReview")); got != codes.Canceled {
		t.Errorf("got %v (%v), want Canceled", got, err)
	}
}

// A call that shared the wait of a call that ended asks again, and is
// answered.
func TestACallSharingAWaitGivenUpAsksAgain(t *testing.T) {
	var group singleflight.Group
	leader, leave := context.WithCancel(context.Background())
	waiting, turn := make(chan struct{}), make(chan struct{})
	waits := 0
	wait := func(ctx context.Context) error {
		waits++
		if waits == 1 {
			close(waiting)
			<-ctx.Done() // the leader's wait, until it leaves
			return ctx.Err()
		}
		<-turn
		return nil
	}
	review := func(context.Context) (any, error) { return "answer", nil }
	leaderDone := make(chan error)
	go func() {
		_, err := shareReview(leader, &group, "q", wait, review)
		leaderDone <- err
	}()
	<-waiting
	followerDone := make(chan any)
	go func() {
		v, err := shareReview(context.Background(), &group, "q", wait, review)
		if err != nil {
			t.Error(err)
		}
		followerDone <- v
	}()
	time.Sleep(10 * time.Millisecond) // the follower joins the leader's wait
	leave()
	if err := <-leaderDone; !errors.Is(err, errCallerLeft) {
		t.Errorf("leader: %v, want errCallerLeft", err)
	}
	close(turn)
	if v := <-followerDone; v != "answer" {
		t.Errorf("follower: %v, want the answer", v)
	}
}

// A review that had no turn in time is RESOURCE_EXHAUSTED with a RetryInfo,
// for a client to come back later; other failures are left to the caller.
func TestAReviewWithNoTurnIsExhausted(t *testing.T) {
	noTurn := func(context.Context) error { return context.DeadlineExceeded }
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
