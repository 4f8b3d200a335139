// Package fairorder is the order in which keys "namespace/name" are served
// fairly: between namespaces (tenants) first, then first in first out within
// a namespace. The executor's and cron's work queues (fairqueue) and their
// fair API budgets (fairlimit) take their turns from it.
//
// The order is start-time fair queuing (Goyal, Vin and Cheng, SIGCOMM 1996)
// with every turn the same size, as stride scheduling: each namespace with
// queued keys has a pass, the virtual time of its next turn; Get serves the
// namespace of the lowest pass (at equal passes, the one whose pass was set
// first), hands out its oldest key and advances its pass by 1/weight. The
// virtual time is the pass of the last turn served; a namespace that had
// nothing queued comes back at that time, or at its own pass if that is
// later, so idling banks no turns and costs none. Every namespace with queued
// keys then has a pass within [virtual time, virtual time + 1/weight].
// Namespaces at one pass wait in one bucket, first come first served: with
// equal weights there are at most two buckets and a turn does no heap work.
//
// Fairness bound: while namespace x has keys queued, another namespace y gets
// at most floor(w_y/w_x) + 1 turns before x's next one: from x's last turn
// (or from when x had keys again) to its next, x's pass moves by at most
// 1/w_x, and every turn y gets in between is at a pass of y inside that
// window, 1/w_y apart. The bound is reached (weights 1 and 6: seven turns).
// With equal weights it is one turn, round robin: at equal passes the
// namespace whose pass was set first goes first.
package fairorder

import (
	"container/heap"
	"slices"
	"strings"
	"sync/atomic"

	"k8s.io/client-go/util/workqueue"
)

// turn is the virtual time one turn costs a namespace of weight 1; one of
// weight w pays turn/w, rounded down. turn/MaxWeight is far above MaxWeight,
// so the rounding never changes floor(w_y/w_x): the bound of the package
// comment holds as stated.
const turn = 1 << 32

// Order is the order in which keys "namespace/name" are served: namespaces by
// start-time fair queuing, first in first out within a namespace (see the
// package comment). It is client-go's workqueue.Queue, and is not safe for
// concurrent use: its user serialises calls (client-go's queue calls it under
// its lock).
type Order struct {
	weights Shares
	// version is the weights' version the strides were computed at.
	version uint64
	// tenants holds the namespaces with queued keys, and idle ones whose pass
	// is still ahead of the virtual time (dropped once it is not: coming back
	// at the virtual time is the same as coming back at their pass).
	tenants map[string]*tenant
	// The namespaces with queued keys wait in buckets, one per pass, in the
	// order their pass was set (ties go to the longest waiting); passes is
	// the buckets, lowest pass first. With equal weights there are at most
	// two buckets, so a turn costs no heap work.
	passes  bucketHeap
	buckets map[uint64]*bucket
	// last is the bucket last appended to: the next namespace served most
	// often goes to the same one.
	last *bucket
	free []*bucket
	// vtime is the pass of the last turn served.
	vtime  uint64
	queued int
	idle   int
	// sinceSweep counts the turns since idle tenants were last swept.
	sinceSweep int
	// waitingCount is how many namespaces have keys queued, and sole the
	// namespace when there is one: published for other goroutines
	// (WaitingBesides); published is the count last published.
	waitingCount atomic.Int32
	sole         atomic.Pointer[string]
	published    int
	// next is the namespace whose turn is next, nil when none waits:
	// published for other goroutines (Next).
	next atomic.Pointer[string]
}

// tenant is one namespace's place in the order.
type tenant struct {
	namespace string
	// keys are the namespace's queued keys, oldest first.
	keys []string
	// pass is the virtual time of the namespace's next turn; stride what
	// a turn costs it.
	pass   uint64
	stride uint64
	// waiting says the tenant is in the bucket of its pass.
	waiting bool
}

// bucket holds the namespaces waiting at one pass, first come first served.
type bucket struct {
	pass    uint64
	tenants []*tenant
	head    int
	// index is the bucket's place in Order.passes.
	index int
}

var _ workqueue.Queue[string] = (*Order)(nil)

// NewOrder returns an empty order with the namespaces' weights (nil: all
// equal).
func NewOrder(weights Shares) *Order {
	if weights == nil {
		weights = Weights(nil)
	}
	return &Order{weights: weights, version: weights.Version(), tenants: map[string]*tenant{}, buckets: map[uint64]*bucket{}}
}

// NamespaceOf is the namespace of a key "namespace/name": what is before the
// first slash, or "" for a key with none.
func NamespaceOf(key string) string {
	ns, _, ok := strings.Cut(key, "/")
	if !ok {
		return ""
	}
	return ns
}

// Push queues key behind its namespace's other keys.
func (o *Order) Push(key string) {
	ns := NamespaceOf(key)
	t := o.tenants[ns]
	if t == nil {
		t = &tenant{namespace: ns, pass: o.vtime, stride: o.strideOf(ns)}
		o.tenants[ns] = t
		o.idle++
	}
	t.keys = append(t.keys, key)
	o.queued++
	if t.waiting {
		return
	}
	// Back from idle: no earlier than the virtual time, so that idling
	// banks no turns.
	if before(t.pass, o.vtime) {
		t.pass = o.vtime
	}
	o.idle--
	o.wait(t)
	o.publish()
}

// Pop takes the next key: the oldest of the namespace whose turn it is. The
// order must not be empty.
func (o *Order) Pop() string {
	b := o.passes[0]
	t := b.tenants[b.head]
	b.tenants[b.head] = nil
	b.head++
	if b.head == len(b.tenants) {
		o.drop(b)
	}
	key := t.keys[0]
	t.keys[0] = ""
	t.keys = t.keys[1:]
	o.queued--
	o.vtime = t.pass
	o.followWeights()
	t.pass += t.stride
	if len(t.keys) > 0 {
		o.wait(t)
	} else {
		t.waiting = false
		o.idle++
	}
	o.sweep()
	o.publish()
	return key
}

// Remove takes key out of the order without serving it (its namespace keeps
// its pass); false if key is not queued.
func (o *Order) Remove(key string) bool {
	t := o.tenants[NamespaceOf(key)]
	if t == nil {
		return false
	}
	i := slices.Index(t.keys, key)
	if i < 0 {
		return false
	}
	t.keys = slices.Delete(t.keys, i, i+1)
	o.queued--
	if len(t.keys) > 0 {
		return true
	}
	b := o.buckets[t.pass]
	j := b.head + slices.Index(b.tenants[b.head:], t)
	b.tenants = slices.Delete(b.tenants, j, j+1)
	if b.head == len(b.tenants) {
		o.drop(b)
	}
	t.waiting = false
	o.idle++
	o.publish()
	return true
}

// WaitingBesides says whether a namespace other than ns has keys queued. Any
// goroutine may ask; the answer is the last published, a moment old.
func (o *Order) WaitingBesides(ns string) bool {
	switch n := o.waitingCount.Load(); {
	case n == 0:
		return false
	case n > 1:
		return true
	}
	sole := o.sole.Load()
	return sole != nil && *sole != ns
}

// Next is the namespace whose turn is next, "" when no key is queued. Any
// goroutine may ask; the answer is the last published, a moment old.
func (o *Order) Next() string {
	if next := o.next.Load(); next != nil {
		return *next
	}
	return ""
}

// publish makes the namespace whose turn is next readable by Next, and how
// many namespaces have keys queued, and which when one does, readable by
// WaitingBesides. The count changes by one at most per call, so the
// namespace left alone is the one whose turn is next.
func (o *Order) publish() {
	if len(o.passes) == 0 {
		o.next.Store(nil)
	} else {
		// The tenant's own field: a tenant outlives its last read.
		b := o.passes[0]
		o.next.Store(&b.tenants[b.head].namespace)
	}
	n := len(o.tenants) - o.idle
	if n == o.published {
		return
	}
	o.published = n
	if n == 1 {
		o.sole.Store(o.next.Load())
	}
	o.waitingCount.Store(int32(n))
}

// Len is the number of queued keys.
func (o *Order) Len() int { return o.queued }

// Touch keeps a key added again while queued where it is, as client-go's
// queue does.
func (o *Order) Touch(string) {}

// strideOf is what a turn costs namespace ns.
func (o *Order) strideOf(ns string) uint64 { return turn / uint64(o.weights.Of(ns)) }

// followWeights computes the strides again when the weights changed (an
// annotation on a namespace): a change applies from the next turn.
func (o *Order) followWeights() {
	v := o.weights.Version()
	if v == o.version {
		return
	}
	o.version = v
	for ns, t := range o.tenants {
		t.stride = o.strideOf(ns)
	}
}

// wait puts t at the back of the bucket of its pass.
func (o *Order) wait(t *tenant) {
	t.waiting = true
	b := o.last
	if b == nil || b.pass != t.pass {
		if b = o.buckets[t.pass]; b == nil {
			b = o.newBucket(t.pass)
		}
		o.last = b
	}
	b.tenants = append(b.tenants, t)
}

func (o *Order) newBucket(pass uint64) *bucket {
	var b *bucket
	if n := len(o.free); n > 0 {
		b, o.free = o.free[n-1], o.free[:n-1]
	} else {
		b = &bucket{}
	}
	b.pass = pass
	o.buckets[pass] = b
	heap.Push(&o.passes, b)
	return b
}

// drop retires an emptied bucket for reuse.
func (o *Order) drop(b *bucket) {
	heap.Remove(&o.passes, b.index)
	delete(o.buckets, b.pass)
	if o.last == b {
		o.last = nil
	}
	clear(b.tenants)
	b.tenants, b.head = b.tenants[:0], 0
	o.free = append(o.free, b)
}

// sweep drops, every len(tenants) turns, the idle tenants the virtual time
// has caught up with: the amortised cost of a turn stays constant, and the
// map holds no namespace that has gone quiet for long.
func (o *Order) sweep() {
	o.sinceSweep++
	if o.idle == 0 || o.sinceSweep < len(o.tenants) {
		return
	}
	o.sinceSweep = 0
	for ns, t := range o.tenants {
		if !t.waiting && !before(o.vtime, t.pass) {
			delete(o.tenants, ns)
			o.idle--
		}
	}
}

// before compares virtual times across wraparound: every pass the order
// holds is within a few turns of the virtual time.
func before(a, b uint64) bool { return int64(a-b) < 0 }

// bucketHeap is the buckets, lowest pass first.
type bucketHeap []*bucket

func (h bucketHeap) Len() int           { return len(h) }
func (h bucketHeap) Less(i, j int) bool { return before(h[i].pass, h[j].pass) }

func (h bucketHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *bucketHeap) Push(x any) {
	b := x.(*bucket)
	b.index = len(*h)
	*h = append(*h, b)
}

func (h *bucketHeap) Pop() any {
	old := *h
	b := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return b
}
