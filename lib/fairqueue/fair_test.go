package fairqueue

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"k8s.io/client-go/util/workqueue"

	"github.com/jobplane/jobplane/lib/fairorder"
)

// keys are n keys of namespace ns: ns/job-0 … ns/job-(n-1).
func keys(ns string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s/job-%d", ns, i)
	}
	return out
}

// takeTurns takes n keys from q, each Done at once, and returns them.
func takeTurns(t *testing.T, q workqueue.TypedInterface[string], n int) []string {
	t.Helper()
	var got []string
	for range n {
		if q.Len() == 0 {
			t.Fatalf("queue empty after %v", got)
		}
		key, _ := q.Get()
		q.Done(key)
		got = append(got, key)
	}
	return got
}

// turnsOf counts the namespaces of keys.
func turnsOf(keys []string) map[string]int {
	n := map[string]int{}
	for _, k := range keys {
		n[fairorder.NamespaceOf(k)]++
	}
	return n
}

func TestFairnessBetweenNamespaces(t *testing.T) {
	cases := []struct {
		name    string
		weights fairorder.Weights
		run     func(t *testing.T, q workqueue.TypedRateLimitingInterface[string])
	}{
		{name: "QuietNamespaceWaitsOneTurnBehindABurst", run: func(t *testing.T, q workqueue.TypedRateLimitingInterface[string]) {
			for _, k := range keys("a", 200) {
				q.Add(k)
			}
			q.Add("b/job-0")
			got := takeTurns(t, q, 3)
			if want := []string{"a/job-0", "b/job-0", "a/job-1"}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("turns %v, want %v", got, want)
			}
		}},
		{name: "QuietNamespaceArrivingLaterWaitsAtMostTwoTurns", run: func(t *testing.T, q workqueue.TypedRateLimitingInterface[string]) {
			for _, k := range keys("a", 200) {
				q.Add(k)
			}
			takeTurns(t, q, 57)
			q.Add("b/job-0")
			got := takeTurns(t, q, 2)
			if got[0] != "b/job-0" && got[1] != "b/job-0" {
				t.Errorf("turns after b queued: %v; want b/job-0 among the next two", got)
			}
		}},
		{name: "JobsRequeuedByTheirEventsDoNotPushBackAnotherNamespace", run: func(t *testing.T, q workqueue.TypedRateLimitingInterface[string]) {
			for _, k := range keys("a", 50) {
				q.Add(k)
			}
			var turns []string
			for i := range 6 {
				key, _ := q.Get()
				if i == 0 {
					q.Add("b/job-0")
				}
				if fairorder.NamespaceOf(key) == "a" {
					q.Add(key) // its pods' events requeue it while it syncs
				}
				q.Done(key)
				turns = append(turns, key)
			}
			if got := turnsOf(turns[:3]); got["b"] != 1 {
				t.Errorf("turns %v: want b's Job among the first three", turns)
			}
		}},
		{name: "JobsOfANamespaceTakeTurnsInOrder", run: func(t *testing.T, q workqueue.TypedRateLimitingInterface[string]) {
			for _, k := range keys("a", 3) {
				q.Add(k)
			}
			first, _ := q.Get()
			q.Add(first)
			q.Done(first)
			got := takeTurns(t, q, 3)
			if want := []string{"a/job-1", "a/job-2", "a/job-0"}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("turns %v, want %v", got, want)
			}
		}},
		{name: "EqualWeightsAlternate", run: func(t *testing.T, q workqueue.TypedRateLimitingInterface[string]) {
			for i := range 10 {
				for _, ns := range []string{"a", "b", "c"} {
					q.Add(fmt.Sprintf("%s/job-%d", ns, i))
				}
			}
			got := takeTurns(t, q, 30)
			for i, k := range got {
				if want := []string{"a", "b", "c"}[i%3]; fairorder.NamespaceOf(k) != want {
					t.Fatalf("turns %v: turn %d is %s's, want %s's", got, i, fairorder.NamespaceOf(k), want)
				}
			}
		}},
		{name: "WeightsShareTheTurns", weights: fairorder.Weights{"a": 3, "c": 2}, run: func(t *testing.T, q workqueue.TypedRateLimitingInterface[string]) {
			for _, ns := range []string{"a", "b", "c"} {
				for _, k := range keys(ns, 600) {
					q.Add(k)
				}
			}
			got := turnsOf(takeTurns(t, q, 600))
			for ns, want := range map[string]int{"a": 300, "b": 100, "c": 200} {
				if d := got[ns] - want; d < -1 || d > 1 {
					t.Errorf("%s got %d of 600 turns, want %d±1 (weights 3:1:2); all %v", ns, got[ns], want, got)
				}
			}
		}},
		{name: "IdleNamespaceBanksNoTurns", run: func(t *testing.T, q workqueue.TypedRateLimitingInterface[string]) {
			for _, k := range keys("a", 100) {
				q.Add(k)
			}
			takeTurns(t, q, 50) // b has nothing queued meanwhile
			for _, k := range keys("b", 10) {
				q.Add(k)
			}
			got := turnsOf(takeTurns(t, q, 10))
			if got["a"] != 5 || got["b"] != 5 {
				t.Errorf("after b's 50 idle turns, 10 turns went %v; want 5 each", got)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := New(newRateLimiter(), Config{Weights: tc.weights})
			defer q.ShutDown()
			tc.run(t, q)
		})
	}
}

// TestNoNamespaceWaitsMoreThanItsShareOfTurns is the fairness bound as a
// property: random Adds, Gets and Dones across namespaces of random weights,
// checked against a model of client-go's queue. While namespace x has keys
// queued, every other namespace y gets at most floor(w_y/w_x)+1 turns before
// x's next turn (counted from x's last turn, or from when x had keys queued
// again), and at most one with equal weights. Each Get also returns the oldest queued key of its namespace, never
// a key being processed, and Len is the number of keys queued.
func TestNoNamespaceWaitsMoreThanItsShareOfTurns(t *testing.T) {
	runs, ops := 300, 3000
	if testing.Short() {
		runs = 60
	}
	for run := range runs {
		seed := uint64(run)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0))
			namespaces := make([]string, 2+rng.IntN(6))
			jobs := map[string]int{}
			weights := fairorder.Weights{}
			for i := range namespaces {
				ns := fmt.Sprintf("ns%d", i)
				namespaces[i], jobs[ns] = ns, 1+rng.IntN(8)
				if w := 1 + rng.IntN(8); w > 1 || rng.IntN(2) == 0 {
					weights[ns] = w
				}
			}
			q := New(newRateLimiter(), Config{Weights: weights})
			defer q.ShutDown()
			m := newModel(namespaces, weights)
			for range ops {
				switch r := rng.IntN(10); {
				case r < 5:
					ns := namespaces[rng.IntN(len(namespaces))]
					key := fmt.Sprintf("%s/job-%d", ns, rng.IntN(jobs[ns]))
					q.Add(key)
					m.add(key)
				case r < 8 && q.Len() > 0:
					key, _ := q.Get()
					if err := m.get(key); err != nil {
						t.Fatalf("weights %v: %v", weights, err)
					}
				case len(m.processing) > 0:
					key := m.anyProcessing(rng)
					q.Done(key)
					m.done(key)
				}
				if got, want := q.Len(), m.queued(); got != want {
					t.Fatalf("Len = %d, want %d", got, want)
				}
			}
		})
	}
}

// model is client-go's queue (dirty and processing sets, FIFO of queued
// keys) with the turns each namespace waited.
type model struct {
	weights    fairorder.Weights
	dirty      map[string]bool
	processing map[string]bool
	fifo       map[string][]string
	// waited[x][y]: y's turns since x's last turn or since x had keys
	// queued again.
	waited map[string]map[string]int
}

func newModel(namespaces []string, weights fairorder.Weights) *model {
	m := &model{weights: weights, dirty: map[string]bool{}, processing: map[string]bool{},
		fifo: map[string][]string{}, waited: map[string]map[string]int{}}
	for _, ns := range namespaces {
		m.waited[ns] = map[string]int{}
	}
	return m
}

func (m *model) push(key string) {
	ns := fairorder.NamespaceOf(key)
	if len(m.fifo[ns]) == 0 {
		clear(m.waited[ns])
	}
	m.fifo[ns] = append(m.fifo[ns], key)
}

func (m *model) add(key string) {
	if m.dirty[key] {
		return
	}
	m.dirty[key] = true
	if !m.processing[key] {
		m.push(key)
	}
}

func (m *model) get(key string) error {
	y := fairorder.NamespaceOf(key)
	if m.processing[key] {
		return fmt.Errorf("Get = %s, which is being processed", key)
	}
	if len(m.fifo[y]) == 0 || m.fifo[y][0] != key {
		return fmt.Errorf("Get = %s; %s's queued keys are %v", key, y, m.fifo[y])
	}
	for x, queued := range m.fifo {
		if x == y || len(queued) == 0 {
			continue
		}
		m.waited[x][y]++
		wx, wy := m.weights.Of(x), m.weights.Of(y)
		bound := wy/wx + 1
		if wx == wy {
			bound = 1 // round robin: ties go to the namespace whose pass was set first
		}
		if m.waited[x][y] > bound {
			return fmt.Errorf("%s (weight %d) has keys queued and waited %d turns of %s (weight %d); the bound is %d",
				x, wx, m.waited[x][y], y, wy, bound)
		}
	}
	clear(m.waited[y])
	m.fifo[y] = m.fifo[y][1:]
	delete(m.dirty, key)
	m.processing[key] = true
	return nil
}

func (m *model) done(key string) {
	delete(m.processing, key)
	if m.dirty[key] {
		m.push(key)
	}
}

func (m *model) queued() int {
	n := 0
	for _, f := range m.fifo {
		n += len(f)
	}
	return n
}

// anyProcessing picks a key being processed, reproducibly.
func (m *model) anyProcessing(rng *rand.Rand) string {
	var keys []string
	for k := range m.processing {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys[rng.IntN(len(keys))]
}
