package admission

import (
	"fmt"
	"maps"
	"sync"

	"google.golang.org/grpc/codes"

	"github.com/jobplane/jobplane/lib/apierr"
)

// answers bounds the memory of a priority level's answers encoded and not
// yet read by their callers, so that the services' own calls keep a budget
// outside callers cannot take. A server hands a unary answer to its transport whole; the
// transport writes it as the client's flow-control window allows, so a
// client that never reads would have the server hold every answer it asked
// for. Each answer is held against its caller's bound and the bound of all
// callers until it is written, its call is reset, or its connection closes;
// an answer beyond either bound is refused (RESOURCE_EXHAUSTED), the caller
// having that much unread already. The bound of all callers is shared
// max-min fairly: when it is full, a caller holding less takes the room of
// the caller holding the most, whose connection holding the most is closed
// (an answer handed to the transport cannot be taken back otherwise), so
// that callers each within their own bound cannot together lock another
// out.
type answers struct {
	max, maxPerCaller int64
	// closeConn closes a connection, false if it cannot.
	closeConn func(conn string) bool

	mu       sync.Mutex
	held     int64
	byCaller map[string]int64
	// byConn are the answers held on each connection, given back when it
	// closes (its transport drops what it did not write).
	byConn map[string]map[*HeldAnswer]struct{}
}

// HeldAnswer is one answer's hold.
type HeldAnswer struct {
	a            *answers
	caller, conn string
	n            int64
	released     bool
}

func newAnswers(max, maxPerCaller int64) *answers {
	return &answers{max: max, maxPerCaller: maxPerCaller, byCaller: map[string]int64{}, byConn: map[string]map[*HeldAnswer]struct{}{}}
}

// HoldAnswer holds n bytes of an answer to caller flow, on priority level
// levelName, on connection conn, until the HeldAnswer is released; or
// refuses them, with RetryInfo.
func (c *Controller) HoldAnswer(levelName, flow, conn string, n int64) (*HeldAnswer, error) {
	l := c.level(levelName)
	a := l.answers
	a.mu.Lock()
	defer a.mu.Unlock()
	if n > a.max {
		c.metrics.rejected.WithLabelValues(l.name, "ANSWER_TOO_LARGE").Inc()
		return nil, apierr.New(codes.ResourceExhausted, "ANSWER_TOO_LARGE", map[string]string{"priorityLevel": l.name, "budget": "unread answers", "limit": fmt.Sprint(a.max)},
			"the answer is %d bytes, more than the whole budget of unread answers of priority level %q (%d): it can never be sent; ask for less (a smaller page)", n, l.name, a.max)
	}
	var refusal string
	// A caller holding nothing may have one answer of any size the
	// level's budget holds.
	switch mine := a.byCaller[flow]; {
	case mine > 0 && mine+n > a.maxPerCaller:
		refusal = fmt.Sprintf("the caller has %d bytes of answers it has not read, and this one is %d (at most %d a caller)", mine, n, a.maxPerCaller)
	case a.held+n > a.max && !a.reclaim(flow, n):
		refusal = fmt.Sprintf("%d bytes of answers are held for callers that have not read them, and this one is %d (at most %d)", a.held, n, a.max)
	}
	if refusal != "" {
		c.metrics.rejected.WithLabelValues(l.name, "UNREAD_ANSWERS").Inc()
		return nil, Exhausted(refusal+"; read the answers", "UNREAD_ANSWERS", l.name, c.cfg.MaxQueueWait)
	}
	h := &HeldAnswer{a: a, caller: flow, conn: conn, n: n}
	a.held += n
	a.byCaller[flow] += n
	onConn := a.byConn[conn]
	if onConn == nil {
		onConn = map[*HeldAnswer]struct{}{}
		a.byConn[conn] = onConn
	}
	onConn[h] = struct{}{}
	return h, nil
}

// reclaim makes room for n more bytes of caller flow's in the full
// level by closing connections of the caller holding the most, while it
// holds more than flow would with n; false, closing none, if that would
// not be enough.
func (a *answers) reclaim(flow string, n int64) bool {
	if a.closeConn == nil {
		return false
	}
	var closing []string
	byCaller, byConn := maps.Clone(a.byCaller), a.heldByConn()
	for held := a.held; held+n > a.max; {
		victim, most := "", byCaller[flow]+n
		for caller, h := range byCaller {
			if h > most {
				victim, most = caller, h
			}
		}
		if victim == "" {
			return false
		}
		conn := fullestConn(byConn[victim])
		closing = append(closing, conn)
		held -= byConn[victim][conn]
		byCaller[victim] -= byConn[victim][conn]
		delete(byConn[victim], conn)
	}
	for _, conn := range closing {
		if !a.closeConn(conn) {
			continue // its answers stay held: it cannot be closed
		}
		for h := range a.byConn[conn] {
			a.releaseLocked(h)
		}
	}
	return a.held+n <= a.max
}

// heldByConn is the bytes each caller holds on each of its connections.
func (a *answers) heldByConn() map[string]map[string]int64 {
	out := map[string]map[string]int64{}
	for conn, held := range a.byConn {
		for h := range held {
			if out[h.caller] == nil {
				out[h.caller] = map[string]int64{}
			}
			out[h.caller][conn] += h.n
		}
	}
	return out
}

// fullestConn is the connection holding the most of held.
func fullestConn(held map[string]int64) string {
	var fullest string
	for conn, n := range held {
		if fullest == "" || n > held[fullest] {
			fullest = conn
		}
	}
	return fullest
}

// Release gives the answer's bytes back: it was written or dropped. Once
// only; later calls do nothing.
func (h *HeldAnswer) Release() {
	h.a.mu.Lock()
	defer h.a.mu.Unlock()
	h.a.releaseLocked(h)
}

func (a *answers) releaseLocked(h *HeldAnswer) {
	if h.released {
		return
	}
	h.released = true
	a.held -= h.n
	if a.byCaller[h.caller] -= h.n; a.byCaller[h.caller] == 0 {
		delete(a.byCaller, h.caller)
	}
	onConn := a.byConn[h.conn]
	delete(onConn, h)
	if len(onConn) == 0 {
		delete(a.byConn, h.conn)
	}
}

// SetConnCloser gives the controller the means to close a connection,
// false when it cannot: it makes room of the unread answers of the caller
// holding the most with it. It is called with a lock held, and must not
// call the controller.
func (c *Controller) SetConnCloser(closeConn func(conn string) bool) {
	for _, l := range c.levels {
		l.answers.mu.Lock()
		l.answers.closeConn = closeConn
		l.answers.mu.Unlock()
	}
}

// ConnClosed gives back every answer held on conn.
func (c *Controller) ConnClosed(conn string) {
	for _, l := range c.levels {
		l.answers.connClosed(conn)
	}
}

func (a *answers) connClosed(conn string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for h := range a.byConn[conn] {
		a.releaseLocked(h)
	}
}

// AnswersHeld is the bytes of answers held, of all callers of every level
// and of flow.
func (c *Controller) AnswersHeld(flow string) (all, flows int64) {
	for _, l := range c.levels {
		a := l.answers
		a.mu.Lock()
		all += a.held
		flows += a.byCaller[flow]
		a.mu.Unlock()
	}
	return all, flows
}
