package grpcserver

import (
	"cmp"
	"container/list"
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/jobplane/jobplane/lib/admission"
	"github.com/jobplane/jobplane/lib/auth"
)

// The connections a server keeps open are bounded, so that neither their
// number nor the transport's buffers of each grow without bound:
//   - a connection is unidentified until one of its calls is authenticated;
//     unidentified connections are at most so many, shared fairly by the
//     hosts they come from: to make room for a new one, the gate closes a
//     connection of the host holding the most, its oldest with no call
//     open, else one with no call being authenticated (toEvict), so that a
//     flood from one host closes only its own connections, and a flood of
//     connections that never call, or keep only calls that need no
//     credentials open (health watches), cannot close a client's while its
//     first call is being authenticated, even from the same host (a flood
//     whose calls are all being authenticated, as slowly as the client's,
//     can: its oldest is closed for a newcomer, as any); each is
//     closed if no call is identified within the first-call timeout and
//     none is open or began within it (health checks need no credentials);
//   - an identified connection belongs to its first call's caller (a
//     tenant); a caller keeps at most so many, and a call on one more is
//     refused and its connection closed. The services' own identities (the
//     system level) are not bounded.
//
// The gate sees the net.Conn as the listener accepts it, and grpc-go's
// stats handler names it by its addresses (connTracker): the conn handed to
// grpc-go stays the *net.TCPConn it sets TCP_USER_TIMEOUT on.

// connGate bounds a server's connections.
type connGate struct {
	maxUnidentified, perCaller   int
	firstCall, closeAfterRefusal time.Duration
	// preemptedStreamGrace is how long a stream another caller took the
	// place of may take to end before its connection is closed.
	preemptedStreamGrace time.Duration
	// retryAfter is the delay a refused caller is asked to wait.
	retryAfter time.Duration
	metrics    *connMetrics

	mu sync.Mutex
	// byAddrs are the TCP connections accepted and not yet ended, by
	// their addresses; byID those the transport has named (connTracker).
	byAddrs map[string]*gatedConn
	byID    map[string]*gatedConn
	// unidentified are the unidentified connections, oldest first, and
	// how many of them each remote host holds.
	unidentified list.List
	hosts        map[string]int
	callers      map[string]int
}

// gatedConn is one connection accepted.
type gatedConn struct {
	conn      net.Conn
	addrs, id string
	host      string // auth.HostOf its remote address
	// waiting is its element of the gate's unidentified list until it is
	// identified or closed.
	waiting *list.Element
	timer   *time.Timer
	// identified is set once a call's caller is known: the calls after it
	// pass without the gate's lock.
	identified atomic.Bool
	// calls are the calls open on it, identified or not (health checks,
	// reflection), and when the last began (Unix nanoseconds): the
	// first-call timeout spares a connection with one open or begun
	// within it.
	calls    atomic.Int32
	lastCall atomic.Int64
	// authenticating are its calls whose caller is being identified (a
	// TokenReview under way): a flood's connections whose calls need no
	// credentials are closed before one of them.
	authenticating atomic.Int32
	caller         string
	refused        error
	closed         bool
}

func newConnGate(cfg Config, reg prometheus.Registerer) *connGate {
	return &connGate{
		maxUnidentified: cfg.MaxUnidentifiedConns, perCaller: cfg.MaxConnsPerCaller,
		firstCall: cfg.FirstCallTimeout, closeAfterRefusal: time.Second, preemptedStreamGrace: 5 * time.Second, retryAfter: cfg.Admission.MaxQueueWait,
		metrics: newConnMetrics(reg), byAddrs: map[string]*gatedConn{}, byID: map[string]*gatedConn{}, hosts: map[string]int{}, callers: map[string]int{},
	}
}

// listener is lis with each connection it accepts gated.
func (g *connGate) listener(lis net.Listener) net.Listener { return gatedListener{lis, g} }

type gatedListener struct {
	net.Listener
	gate *connGate
}

func (l gatedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.gate.accepted(c)
	}
	return c, err
}

// addrsOf names a TCP connection by its addresses, unique while it is
// open; other connections (in memory, Unix sockets) may share theirs, and
// are not gated ("").
func addrsOf(local, remote net.Addr) string {
	if _, ok := remote.(*net.TCPAddr); !ok || local == nil {
		return ""
	}
	return local.String() + " " + remote.String()
}

// accepted enters c as unidentified, closing the oldest unidentified
// connection when there are too many.
func (g *connGate) accepted(c net.Conn) {
	addrs := addrsOf(c.LocalAddr(), c.RemoteAddr())
	if addrs == "" {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if stale := g.byAddrs[addrs]; stale != nil {
		// Its addresses are c's now: it is dead (a failed handshake gives
		// no end to follow).
		g.closeLocked(stale, "stale")
		delete(g.byAddrs, addrs)
		if g.byID[stale.id] == stale {
			delete(g.byID, stale.id)
		}
	}
	gc := &gatedConn{conn: c, addrs: addrs, host: auth.HostOf(c.RemoteAddr().(*net.TCPAddr).IP)}
	g.byAddrs[addrs] = gc
	gc.waiting = g.unidentified.PushBack(gc)
	g.hosts[gc.host]++
	gc.timer = time.AfterFunc(g.firstCall, func() { g.closeUnidentified(gc, "first_call_timeout") })
	g.metrics.open.WithLabelValues("unidentified").Inc()
	if g.unidentified.Len() > g.maxUnidentified {
		g.closeLocked(g.toEvict(), "unidentified_evicted")
	}
}

// toEvict is the unidentified connection to close for a new one: one of
// the host holding the most (of those, the host whose oldest is oldest),
// so that a flood from one host closes only its own. Of its connections:
//   - the oldest with no call open among the older half, so that a flood
//     of connections that never call closes its own (a connection of the
//     newer half may still be in its handshake, with no call yet: it is
//     spared until a flood of calling connections has aged it that far);
//   - else the oldest with no call being authenticated (calls that need no
//     credentials, health watches), so that a flood keeping them open
//     closes its own before a client whose first call is being
//     authenticated;
//   - else its oldest (never the newest in its handshake: a host whose
//     connections all wait on their reviews must not close every newcomer
//     while keeping its own).
func (g *connGate) toEvict() *gatedConn {
	most := 0
	for _, n := range g.hosts {
		most = max(most, n)
	}
	var oldest, unauthenticated *gatedConn
	looked := 0
	for e := g.unidentified.Front(); e != nil; e = e.Next() {
		gc := e.Value.(*gatedConn)
		if oldest == nil && g.hosts[gc.host] == most {
			oldest = gc
		}
		if oldest == nil || gc.host != oldest.host {
			continue
		}
		looked++
		switch calls := gc.calls.Load(); {
		case calls == 0 && looked <= max(1, most/2):
			return gc
		case calls > 0 && gc.authenticating.Load() == 0 && unauthenticated == nil:
			unauthenticated = gc
		}
		if unauthenticated != nil && looked >= max(1, most/2) {
			break // nothing after it comes first
		}
	}
	return cmp.Or(unauthenticated, oldest)
}

// tracked is the gate's connection of the transport's addresses, if any,
// known from now on by the transport's name for it, id.
func (g *connGate) tracked(local, remote net.Addr, id string) *gatedConn {
	addrs := addrsOf(local, remote)
	if addrs == "" {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	gc := g.byAddrs[addrs]
	if gc != nil {
		gc.id = id
		g.byID[id] = gc
	}
	return gc
}

// closeByID closes the connection the transport names id; false if the
// gate does not follow it.
func (g *connGate) closeByID(id, reason string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	gc := g.byID[id]
	if gc == nil {
		return false
	}
	g.closeLocked(gc, reason)
	return true
}

// identify gives gc to its call's caller at level, unless the caller has
// its connections already: the call is then refused, and gc closed soon
// after (once the refusal has had time to reach the client).
func (g *connGate) identify(gc *gatedConn, level, caller string) error {
	if gc == nil || gc.identified.Load() {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case gc.identified.Load():
		return nil
	case gc.refused != nil:
		return gc.refused
	case gc.closed:
		return nil // its end is on the way
	case level != admission.System && g.callers[caller] >= g.perCaller:
		gc.refused = admission.Exhausted(fmt.Sprintf("the caller has %d connections open, the most allowed: this one is closed", g.perCaller),
			"TOO_MANY_CONNECTIONS", level, g.retryAfter)
		g.leaveUnidentified(gc)
		gc.timer = time.AfterFunc(g.closeAfterRefusal, func() { g.close(gc, "too_many_connections") })
		return gc.refused
	}
	g.leaveUnidentified(gc)
	if level != admission.System {
		gc.caller = caller
		g.callers[caller]++
	}
	gc.identified.Store(true)
	g.metrics.open.WithLabelValues("identified").Inc()
	return nil
}

// leaveUnidentified takes gc off the unidentified list and its timer.
func (g *connGate) leaveUnidentified(gc *gatedConn) {
	if gc.waiting == nil {
		return
	}
	g.unidentified.Remove(gc.waiting)
	gc.waiting = nil
	if g.hosts[gc.host]--; g.hosts[gc.host] == 0 {
		delete(g.hosts, gc.host)
	}
	gc.timer.Stop()
	g.metrics.open.WithLabelValues("unidentified").Dec()
}

// closeUnidentified closes gc if no call has identified it yet, unless a
// call is open on it (a health check's watch) or began within the timeout
// (a client checking a server's health every second): its time then starts
// again from that call.
func (g *connGate) closeUnidentified(gc *gatedConn, reason string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if gc.waiting == nil {
		return
	}
	if gc.calls.Load() > 0 {
		gc.timer.Reset(g.firstCall)
		return
	}
	if idle := time.Since(time.Unix(0, gc.lastCall.Load())); idle < g.firstCall {
		gc.timer.Reset(g.firstCall - idle)
		return
	}
	g.closeLocked(gc, reason)
}

// callBegan and callEnded count the calls open on gc while it is
// unidentified, the only time the count is read: an identified
// connection's calls pay one atomic load. (A call begun before its
// connection was identified and ended after leaves a count no one reads.)
func (g *connGate) callBegan(gc *gatedConn) {
	if gc != nil && !gc.identified.Load() {
		gc.calls.Add(1)
		gc.lastCall.Store(time.Now().UnixNano())
	}
}

func (g *connGate) callEnded(gc *gatedConn) {
	if gc != nil && !gc.identified.Load() {
		gc.calls.Add(-1)
	}
}

// authenticating counts the call of ctx as being authenticated until the
// returned func is called (once its connection is identified, or the call
// refused). A stream's count began before its authentication, in
// countAuthentication; a unary call's begins here.
func (g *connGate) authenticating(ctx context.Context) (done func()) {
	if done, ok := ctx.Value(authenticatingKey{}).(func()); ok {
		return done
	}
	return g.countOn(gateOf(ctx))
}

func (g *connGate) countOn(gc *gatedConn) (done func()) {
	if gc == nil || gc.identified.Load() {
		return func() {}
	}
	gc.authenticating.Add(1)
	return sync.OnceFunc(func() { gc.authenticating.Add(-1) })
}

type authenticatingKey struct{}

// countAuthentication counts a stream as being authenticated from before
// the auth interceptor reviews its credentials (grpc-go runs a stream's
// interceptors before its handler, where admission identifies it) until
// admission has identified its connection, or it ends.
func (g *connGate) countAuthentication(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	done := g.countOn(gateOf(ss.Context()))
	defer done()
	return handler(srv, &contextStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), authenticatingKey{}, done)})
}

// contextStream is a stream with another context.
type contextStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *contextStream) Context() context.Context { return s.ctx }

func (g *connGate) close(gc *gatedConn, reason string) {
	if gc == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closeLocked(gc, reason)
}

// closeLocked closes gc's connection: grpc-go ends its transport (ended
// follows) and fails its calls.
func (g *connGate) closeLocked(gc *gatedConn, reason string) {
	if gc.closed {
		return
	}
	gc.closed = true
	g.leaveUnidentified(gc)
	g.metrics.closed.WithLabelValues(reason).Inc()
	// A connection that never reached the transport (a failed handshake)
	// has no end to follow.
	if g.byAddrs[gc.addrs] == gc && !gc.identified.Load() {
		delete(g.byAddrs, gc.addrs)
	}
	go gc.conn.Close() // outside the lock: a TLS close may write
}

// ended forgets gc, whose transport has ended.
func (g *connGate) ended(gc *gatedConn) {
	if gc == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.leaveUnidentified(gc)
	if gc.timer != nil {
		gc.timer.Stop()
	}
	if g.byAddrs[gc.addrs] == gc {
		delete(g.byAddrs, gc.addrs)
	}
	if g.byID[gc.id] == gc {
		delete(g.byID, gc.id)
	}
	if gc.identified.Swap(false) {
		g.metrics.open.WithLabelValues("identified").Dec()
	}
	if gc.caller != "" {
		if g.callers[gc.caller]--; g.callers[gc.caller] <= 0 {
			delete(g.callers, gc.caller)
		}
		gc.caller = ""
	}
	gc.closed = true
}

// connMetrics are the gate's.
type connMetrics struct {
	open   *prometheus.GaugeVec
	closed *prometheus.CounterVec
}

func newConnMetrics(reg prometheus.Registerer) *connMetrics {
	m := &connMetrics{
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "jobplane_connections_open", Help: "gRPC connections open, by state: unidentified (no call authenticated yet) or identified.",
		}, []string{"state"}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobplane_connections_closed_total", Help: "gRPC connections the server closed to bound them, by reason.",
		}, []string{"reason"}),
	}
	if reg != nil {
		reg.MustRegister(m.open, m.closed)
	}
	return m
}

// gateOf is the gated connection of the call ctx belongs to, if any.
func gateOf(ctx context.Context) *gatedConn {
	ref, _ := ctx.Value(connKey{}).(connRef)
	return ref.gated
}

// httpConns bounds the metrics port's connections: at most max, a new one
// beyond closing the oldest that is not serving a request, so that a flood
// of connections cannot lock out the kubelet's probes or a scrape (each
// connects, asks and is answered at once). A connection that sends no
// request is closed by the server's header timeout anyway.
type httpConns struct {
	max int

	mu     sync.Mutex
	order  list.List // of net.Conn, oldest first
	byConn map[net.Conn]*list.Element
	active map[net.Conn]bool
}

func newHTTPConns(max int) *httpConns {
	return &httpConns{max: max, byConn: map[net.Conn]*list.Element{}, active: map[net.Conn]bool{}}
}

// track is the server's ConnState hook.
func (h *httpConns) track(c net.Conn, state http.ConnState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch state {
	case http.StateNew:
		h.byConn[c] = h.order.PushBack(c)
		if h.order.Len() > h.max {
			h.closeOldestIdle()
		}
	case http.StateActive:
		h.active[c] = true
	case http.StateIdle:
		delete(h.active, c)
	case http.StateClosed, http.StateHijacked:
		h.forget(c)
	}
}

// closeOldestIdle closes the oldest connection not serving a request, if
// any: the newest is never among them (it has not asked yet, but it is the
// one room is made for).
func (h *httpConns) closeOldestIdle() {
	for e := h.order.Front(); e != nil && e != h.order.Back(); e = e.Next() {
		c := e.Value.(net.Conn)
		if !h.active[c] {
			h.forget(c)
			go c.Close()
			return
		}
	}
}

func (h *httpConns) forget(c net.Conn) {
	if e, ok := h.byConn[c]; ok {
		h.order.Remove(e)
		delete(h.byConn, c)
	}
	delete(h.active, c)
}
