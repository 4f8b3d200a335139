package auth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"golang.org/x/sync/singleflight"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/jobplane/jobplane/lib/apierr"
	"github.com/jobplane/jobplane/lib/fairlimit"
)

// ReviewBudget paces the reviews no cache answers (TokenReviews and
// SubjectAccessReviews), shared fairly rather than first come, first
// served: a token's review waits in the lane of the host the call comes
// from, for its caller is not known yet; an access review in the lane of
// the caller's tenant. Hosts and tenants take turns, so a flood of made-up
// tokens from one host, or of questions no cache holds from one tenant,
// waits for its own turns: another host's or tenant's review waits at most
// about one turn of each lane with reviews waiting, and unidentified callers
// together take at most half the budget while access reviews wait.
type ReviewBudget struct {
	limiter *fairlimit.Limiter
}

// NewReviewBudget returns a budget of qps reviews a second, bursts of burst.
func NewReviewBudget(qps float32, burst int) *ReviewBudget {
	return &ReviewBudget{limiter: fairlimit.New(qps, burst, nil)}
}

// Stop ends the budget's dispatcher.
func (b *ReviewBudget) Stop() { b.limiter.Stop() }

// waitForHost waits for a turn of the host's lane; a nil budget never waits.
func (b *ReviewBudget) waitForHost(ctx context.Context, host string) error {
	if b == nil {
		return nil
	}
	return b.limiter.Wait(fairlimit.WithLane(ctx, "hosts/"+host))
}

// waitForTenant waits for a turn of the tenant's lane; a nil budget never
// waits.
func (b *ReviewBudget) waitForTenant(ctx context.Context, tenant string) error {
	if b == nil {
		return nil
	}
	return b.limiter.Wait(fairlimit.WithLane(ctx, "tenants/"+tenant))
}

// reviewTimeout bounds a review, its wait for a turn included.
const reviewTimeout = 10 * time.Second

var (
	// errCallerLeft: the call whose review waited for its turn ended first.
	errCallerLeft = errors.New("the call ended while its review waited for its turn")
	// errNoTurn: the review's lane had no turn within reviewTimeout.
	errNoTurn = errors.New("no turn of the review budget")
)

// budgetStatus is the status of a review that never went, or nil when err
// is another failure: the call's own end (CANCELED, DEADLINE_EXCEEDED), or
// RESOURCE_EXHAUSTED with RetryInfo when no turn came.
func budgetStatus(ctx context.Context, err error, review string) error {
	switch {
	case errors.Is(err, errCallerLeft):
		return status.FromContextError(ctx.Err()).Err()
	case errors.Is(err, errNoTurn):
		return apierr.Exhausted("REVIEW_BUDGET_EXHAUSTED", nil, reviewTimeout,
			"the %s this call needs had no turn within %s: this server's reviews are shared by the hosts and tenants asking; retry later", review, reviewTimeout)
	}
	return nil
}

// shareReview runs review once for the calls asking the same question (key)
// at once, after wait has given it a turn. The wait ends with the call that
// began it, so that calls given up cost no turn; a call that shared it and
// is still there asks again. Once sent, the review outlives the calls, for
// its answer is cached for the next.
func shareReview(ctx context.Context, inflight *singleflight.Group, key string, wait func(context.Context) error, review func(context.Context) (any, error)) (any, error) {
	for {
		v, err, _ := inflight.Do(key, func() (any, error) {
			deadline := time.Now().Add(reviewTimeout)
			waitCtx, cancel := context.WithDeadline(ctx, deadline)
			err := wait(waitCtx)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return nil, errCallerLeft
				}
				return nil, fmt.Errorf("%w: %w", errNoTurn, err)
			}
			reviewCtx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
			defer cancel()
			return review(reviewCtx)
		})
		if errors.Is(err, errCallerLeft) && ctx.Err() == nil {
			continue
		}
		return v, err
	}
}

// HostOf names the host an address belongs to, for the fair shares of
// callers not yet identified: its IPv4 address, or its IPv6 address's /64
// prefix (one network's hosts pick their addresses in it at will).
func HostOf(ip net.IP) string {
	if ip.To4() != nil {
		return ip.String()
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// hostOfCall is the host the gRPC call of ctx comes from ("" when its
// transport has no IP address).
func hostOfCall(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}
	if tcp, ok := p.Addr.(*net.TCPAddr); ok {
		return HostOf(tcp.IP)
	}
	return ""
}

// hostOfRequest is the host an HTTP request comes from ("" when its
// remote address is not an IP address).
func hostOfRequest(r *http.Request) string {
	addr, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(addr); ip != nil {
		return HostOf(ip)
	}
	return ""
}
