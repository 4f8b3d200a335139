package auth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/cache"

	"github.com/jobplane/jobplane/lib/apierr"
	"github.com/jobplane/jobplane/lib/fairlimit"
	"github.com/jobplane/jobplane/lib/fairorder"
)

// ReviewBudget paces the reviews no cache answers (TokenReviews and
// SubjectAccessReviews), shared fairly rather than first come, first
// served: a token's review waits in the lane of the host the call comes
// from, for its caller is not known yet; an access review in the lane of
// the caller's tenant. Hosts and tenants take turns, so a flood of made-up
// tokens from one host, or of questions no cache holds from one tenant,
// waits for its own turns: another lane's review waits about one turn of
// each lane with reviews waiting, and unidentified callers together take at
// most 9 turns in 17 (the hosts' 8 and the suspects' 1) while access reviews
// wait.
//
// A host whose tokens the API server refused suspectAfter times within
// suspectFor is a suspect: its reviews wait in a lane of the suspects,
// which together get one turn for each laneWeight of the hosts' and of
// the tenants' while those wait. A flood of made-up tokens from many hosts
// (a tenant's many pods) then leaves another host's caller its turn.
//
// At most as many reviews wait as the budget serves within reviewTimeout
// (more could not be served in time): when that many wait, a new one takes
// the place of the newest of the lane with the most, unless its own lane
// would then have as many; the one left out is answered at once.
type ReviewBudget struct {
	qps   float32
	burst int
	// maxWaiting bounds the reviews waiting, all lanes together.
	maxWaiting int

	once    sync.Once
	limiter *fairlimit.Limiter // started by the first wait

	mu      sync.Mutex
	waiting map[string][]*waitingReview // by lane, oldest first
	total   int

	// refusals counts each host's refused tokens (hostRefusals) in the
	// suspectFor from its first.
	refusals *cache.LRUExpireCache
}

// hostRefusals are a host's refused tokens since a moment, until another.
type hostRefusals struct {
	n     int
	until time.Time
}

const (
	suspectAfter = 8
	suspectFor   = time.Minute
	// laneWeight is the hosts' and the tenants' weight against the
	// suspects' 1.
	laneWeight = 8
	// suspectsKept bounds the hosts whose refusals are counted.
	suspectsKept = 4096
)

// waitingReview is a review waiting for its turn; cancel leaves it out.
type waitingReview struct {
	cancel context.CancelCauseFunc
}

// NewReviewBudget returns a budget of qps reviews a second, bursts of burst.
func NewReviewBudget(qps float32, burst int) *ReviewBudget {
	return &ReviewBudget{qps: qps, burst: burst, maxWaiting: max(1, int(float64(qps)*reviewTimeout.Seconds())),
		waiting: map[string][]*waitingReview{}, refusals: cache.NewLRUExpireCache(suspectsKept)}
}

// Stop ends the budget's dispatcher, if a review started it.
func (b *ReviewBudget) Stop() {
	b.once.Do(func() {}) // none starts after
	if b.limiter != nil {
		b.limiter.Stop()
	}
}

// hostLane is the lane of the reviews of calls from host: a suspect's
// while its tokens are refused.
func (b *ReviewBudget) hostLane(host string) string {
	if b != nil {
		if r, ok := b.refusals.Get(host); ok && r.(hostRefusals).n >= suspectAfter {
			return "suspects/" + host
		}
	}
	return "hosts/" + host
}

// refusedFrom counts a token from host that the API server refused.
func (b *ReviewBudget) refusedFrom(host string) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	r := hostRefusals{until: time.Now().Add(suspectFor)}
	if v, ok := b.refusals.Get(host); ok {
		r = v.(hostRefusals)
	}
	r.n++
	b.refusals.Add(host, r, time.Until(r.until))
}

// tenantLane is the lane of the reviews of tenant's calls.
func tenantLane(tenant string) string { return "tenants/" + tenant }

// wait waits for a turn of lane, within ctx, or fails with errNoTurn; a
// nil budget never waits.
func (b *ReviewBudget) wait(ctx context.Context, lane string) error {
	if b == nil {
		return nil
	}
	b.once.Do(func() {
		b.limiter = fairlimit.New(b.qps, b.burst, fairorder.Weights{"hosts": laneWeight, "tenants": laneWeight})
	})
	if b.limiter == nil {
		return fmt.Errorf("%w: the server is stopping", errNoTurn)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	w := &waitingReview{cancel: cancel}
	if !b.enter(lane, w) {
		return fmt.Errorf("%w: %d reviews wait, the most it serves in %s, and this caller's lane has its share of them", errNoTurn, b.maxWaiting, reviewTimeout)
	}
	defer b.leave(lane, w)
	if err := b.limiter.Wait(fairlimit.WithLane(ctx, lane)); err != nil {
		return fmt.Errorf("%w: %w", errNoTurn, context.Cause(ctx))
	}
	return nil
}

// errDisplaced: a review of another lane took this waiting one's place.
var errDisplaced = errors.New("a review of another caller, whose lane had fewer waiting, took this one's place")

// enter counts w as waiting in lane, making room when the budget's waiting
// reviews are at their bound: the newest of the lane with the most leaves,
// if that lane would still have more than lane.
func (b *ReviewBudget) enter(lane string, w *waitingReview) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.total >= b.maxWaiting {
		fullest := ""
		for l, ws := range b.waiting {
			if len(ws) > len(b.waiting[fullest]) || fullest == "" {
				fullest = l
			}
		}
		victims := b.waiting[fullest]
		if len(victims) <= len(b.waiting[lane])+1 {
			return false
		}
		victims[len(victims)-1].cancel(errDisplaced)
		b.remove(fullest, len(victims)-1)
	}
	b.waiting[lane] = append(b.waiting[lane], w)
	b.total++
	return true
}

// leave uncounts w, unless enter already did.
func (b *ReviewBudget) leave(lane string, w *waitingReview) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if i := slices.Index(b.waiting[lane], w); i >= 0 {
		b.remove(lane, i)
	}
}

// remove uncounts the i-th waiting review of lane; b.mu is held.
func (b *ReviewBudget) remove(lane string, i int) {
	ws := slices.Delete(b.waiting[lane], i, i+1)
	if len(ws) == 0 {
		delete(b.waiting, lane)
	} else {
		b.waiting[lane] = ws
	}
	b.total--
}

// reviewTimeout bounds a review's wait for its turn, and then the review.
const reviewTimeout = 10 * time.Second

var (
	// errCallerLeft: the call ended before its review was answered.
	errCallerLeft = errors.New("the call ended before its review was answered")
	// errNoTurn: the review had no turn of the budget.
	errNoTurn = errors.New("no turn of the review budget")
)

// budgetStatus is the status of a review the call did not see through,
// or nil when err is another failure: the call's own end (CANCELED,
// DEADLINE_EXCEEDED), or RESOURCE_EXHAUSTED with RetryInfo when the review
// had no turn.
func budgetStatus(ctx context.Context, err error, review string) error {
	switch {
	case errors.Is(err, errCallerLeft):
		return status.FromContextError(ctx.Err()).Err()
	case errors.Is(err, errNoTurn):
		return apierr.Exhausted("REVIEW_BUDGET_EXHAUSTED", nil, reviewTimeout,
			"the %s this call needs had no turn: this server's reviews are shared by the hosts and tenants asking (%v); retry later", review, err)
	}
	return nil
}

// shareReview runs review once for the calls asking the same question (key)
// at once, after wait has given it a turn. Both outlive the calls, so that
// a caller whose deadline is shorter than the wait finds the answer cached
// when it calls again; a call returns when it ends (errCallerLeft).
func shareReview(ctx context.Context, inflight *singleflight.Group, key string, wait func(context.Context) error, review func(context.Context) (any, error)) (any, error) {
	answer := inflight.DoChan(key, func() (any, error) {
		outliving := context.WithoutCancel(ctx)
		waitCtx, cancel := context.WithTimeout(outliving, reviewTimeout)
		err := wait(waitCtx)
		cancel()
		if err != nil {
			return nil, err
		}
		reviewCtx, cancel := context.WithTimeout(outliving, reviewTimeout)
		defer cancel()
		return review(reviewCtx)
	})
	select {
	case r := <-answer:
		return r.Val, r.Err
	case <-ctx.Done():
		return nil, errCallerLeft
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

// HostOfRequest is the host an HTTP request comes from (HostOf its remote
// address; "" when that is not an IP address).
func HostOfRequest(r *http.Request) string {
	addr, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(addr); ip != nil {
		return HostOf(ip)
	}
	return ""
}
