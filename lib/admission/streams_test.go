package admission

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func streamsController(perFlow, streams int) *Controller {
	return New(Config{
		Levels:       map[string]LevelConfig{Workload: {Seats: 1, StreamsPerFlow: perFlow, Streams: streams}},
		MaxQueueWait: time.Second,
	}, nil)
}

// A level's streams, filled by one caller within its own bound, are
// shared with the next: it takes the newest stream of the caller holding
// the most until the two hold as many, or one more; the stream taken is
// told once, and ends RESOURCE_EXHAUSTED with RetryInfo.
func TestALevelsStreamsAreSharedWithACallerThatHasNone(t *testing.T) {
	c := streamsController(4, 4)
	preempted := map[int]int{}
	var full []*Ticket
	for i := range 4 {
		s, err := c.OpenStream(Workload, "a", func() { preempted[i]++ })
		if err != nil {
			t.Fatalf("a's stream %d: %v", i, err)
		}
		full = append(full, s)
	}
	for i := range 2 {
		if _, err := c.OpenStream(Workload, "b", nil); err != nil {
			t.Fatalf("b's stream %d beside a's four: %v", i, err)
		}
	}
	if want := map[int]int{3: 1, 2: 1}; fmt.Sprint(preempted) != fmt.Sprint(want) {
		t.Fatalf("a's streams told %v, want its two newest once each: %v", preempted, want)
	}
	err := full[3].Preempted()
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "fewer") {
		t.Fatalf("the stream taken ends with %v, want RESOURCE_EXHAUSTED saying why", err)
	}
	if _, ok := retryDelay(err); !ok {
		t.Errorf("no RetryInfo in %v", err)
	}
	if full[0].Preempted() != nil {
		t.Error("a stream not taken says it was")
	}
	// Two each: neither may take one more from the other.
	for _, flow := range []string{"a", "b"} {
		if _, err := c.OpenStream(Workload, flow, nil); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("%s's third stream, two each: %v, want RESOURCE_EXHAUSTED", flow, err)
		}
	}
	// A stream taken gives nothing back when it ends: its place is b's.
	full[3].Release()
	if _, err := c.OpenStream(Workload, "a", nil); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a stream after a taken one ended: %v, want RESOURCE_EXHAUSTED", err)
	}
	full[0].Release()
	if _, err := c.OpenStream(Workload, "c", nil); err != nil {
		t.Fatalf("a third caller once a stream ended: %v", err)
	}
}

// Property: whatever callers open and close, a level holds at most its
// streams and each caller at most its own; a caller is refused a stream
// only at its own bound or while no caller holds two more than it.
func TestPropertyStreamsAreSharedMaxMinFairly(t *testing.T) {
	for seed := range uint64(50) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 2))
			perFlow, streams := 1+r.IntN(8), 1+r.IntN(16)
			c := streamsController(perFlow, streams)
			l := c.levels[Workload]
			open := map[string][]*Ticket{}
			held := func(flow string) int {
				n := 0
				for _, s := range open[flow] {
					if s.Preempted() == nil {
						n++
					}
				}
				return n
			}
			for range 300 {
				flow := fmt.Sprint("f", r.IntN(2+r.IntN(6)))
				if r.IntN(4) == 0 && len(open[flow]) > 0 {
					i := r.IntN(len(open[flow]))
					open[flow][i].Release()
					open[flow] = append(open[flow][:i], open[flow][i+1:]...)
					continue
				}
				mine := held(flow)
				most := 0
				for other := range open {
					most = max(most, held(other))
				}
				total := 0
				for other := range open {
					total += held(other)
				}
				s, err := c.OpenStream(Workload, flow, nil)
				switch {
				case err == nil:
					open[flow] = append(open[flow], s)
				case mine < perFlow && total < streams:
					t.Fatalf("%s refused with %d of %d open: %v", flow, total, streams, err)
				case mine < perFlow && most >= mine+2:
					t.Fatalf("%s refused holding %d while another holds %d: %v", flow, mine, most, err)
				}
				total = 0
				for other := range open {
					if n := held(other); n > perFlow {
						t.Fatalf("%s holds %d, more than its %d", other, n, perFlow)
					}
					total += held(other)
				}
				if total > streams || total != l.openStreams {
					t.Fatalf("%d streams held, the level counts %d, at most %d", total, l.openStreams, streams)
				}
			}
		})
	}
}
