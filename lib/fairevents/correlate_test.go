package fairevents

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
)

// newEvent is an event as client-go's recorder makes it.
func newEvent(now time.Time, obj corev1.ObjectReference, eventType, reason, message string) *corev1.Event {
	t := metav1.NewTime(now)
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%v.%x", obj.Name, now.UnixNano()), Namespace: obj.Namespace},
		InvolvedObject: obj, Reason: reason, Message: message, Type: eventType,
		FirstTimestamp: t, LastTimestamp: t, Count: 1,
		Source: corev1.EventSource{Component: "jobplane-executor"},
	}
}

// The same stream of events through client-go's correlator and this one:
// the same events skipped, the same events written with the same patches,
// byte for byte. Streams mix repeats (patches), messages that vary by pod
// (aggregated past the 10th), bursts past the spam filter's 25, pauses past
// its refill (300 s) and the aggregation window (600 s), and caches small
// enough to evict.
func TestCorrelationIsClientGos(t *testing.T) {
	var skipped, aggregated, patched int
	defer func() {
		if skipped == 0 || aggregated == 0 || patched == 0 {
			t.Errorf("the streams skipped %d events, wrote %d aggregates and %d patches: one path untested", skipped, aggregated, patched)
		}
	}()
	for seed := range uint64(20) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0))
			clk := testingclock.NewFakeClock(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
			opts := record.CorrelatorOptions{Clock: clk, LRUCacheSize: 4 + rng.IntN(64)}
			theirs := record.NewEventCorrelatorWithOptions(opts)
			ours := newCorrelator(opts)
			var objects []corev1.ObjectReference
			for i := range 1 + rng.IntN(6) {
				objects = append(objects, corev1.ObjectReference{Kind: "Job", APIVersion: "batch/v1", Namespace: fmt.Sprint("ns-", i%2),
					Name: fmt.Sprint("job-", i), UID: types.UID(fmt.Sprint("uid-", i))})
			}
			// client-go's aggregator forgets a random one of an object's
			// messages once it has seen 10 (sets.PopAny), so two of them
			// agree only on streams where that cannot matter: a reason's
			// messages are either all new (aggregated past the 10th) or
			// fewer than 10 (repeats, patched).
			reasons := []string{"SuccessfulCreate", "SuccessfulDelete", "Completed"}
			messages := map[string]func(int, *rand.Rand) string{
				"SuccessfulCreate": func(step int, _ *rand.Rand) string { return fmt.Sprint("Created pod: pod-", step) },
				"SuccessfulDelete": func(_ int, rng *rand.Rand) string { return fmt.Sprint("Deleted pod: pod-", rng.IntN(3)) },
				"Completed":        func(int, *rand.Rand) string { return "Job completed" },
			}
			written := 0
			for step := range 600 {
				switch r := rng.IntN(100); {
				case r < 3:
					clk.Step(time.Duration(100+rng.IntN(600)) * time.Second)
				case r < 30:
					clk.Step(time.Duration(rng.IntN(2000)) * time.Millisecond)
				}
				eventType := corev1.EventTypeNormal
				if rng.IntN(10) == 0 {
					eventType = corev1.EventTypeWarning
				}
				reason := reasons[rng.IntN(len(reasons))]
				e := newEvent(clk.Now(), objects[rng.IntN(len(objects))], eventType, reason, messages[reason](step, rng))

				want, wantErr := theirs.EventCorrelate(e.DeepCopy())
				event, patch, skip, err := ours.correlate(e.DeepCopy())
				if skip != want.Skip || (err == nil) != (wantErr == nil) {
					t.Fatalf("step %d: skip %v, err %v; client-go: skip %v, err %v", step, skip, err, want.Skip, wantErr)
				}
				if skip {
					skipped++
					continue
				}
				if strings.HasPrefix(event.Message, "(combined from similar events)") {
					aggregated++
				}
				if patch != nil {
					patched++
				}
				if !reflect.DeepEqual(event, want.Event) {
					t.Fatalf("step %d: event\n%+v\nclient-go's\n%+v", step, event, want.Event)
				}
				if !bytes.Equal(patch, want.Patch) {
					t.Fatalf("step %d: patch %s, client-go's %s", step, patch, want.Patch)
				}
				// As the API server answers the write.
				answered := event.DeepCopy()
				answered.ResourceVersion = fmt.Sprint(step)
				theirs.UpdateState(answered)
				ours.updateState(answered)
				written++
			}
			if written == 0 {
				t.Fatal("no event written: the stream tests nothing")
			}
		})
	}
}

// Through Start, a Job's burst of pod creations is written as client-go's
// broadcaster writes it: the first events created, then the aggregate
// created and patched, until the spam filter stops them.
func TestStartWritesWhatClientGosBroadcasterWrites(t *testing.T) {
	writesOf := func(start func(record.EventBroadcaster, record.EventSink) (stop func())) []string {
		api := newRecordingSink()
		broadcaster := record.NewBroadcaster()
		stop := start(broadcaster, api)
		defer stop()
		recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "test"})
		job := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job", UID: "u"}}
		for i := range 60 {
			recorder.Eventf(job, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: job-%d", i)
		}
		waitFor(t, "25 writes", func() bool { return len(api.writes()) >= 25 })
		time.Sleep(50 * time.Millisecond) // and no more
		api.mu.Lock()
		defer api.mu.Unlock()
		var shapes []string
		for i, w := range api.written {
			verb := w[:strings.IndexByte(w, ' ')]
			shapes = append(shapes, fmt.Sprintf("%d %s %s", i, verb, api.messages[i]))
		}
		return shapes
	}
	want := writesOf(func(b record.EventBroadcaster, api record.EventSink) func() {
		b.StartRecordingToSink(api)
		return b.Shutdown
	})
	got := writesOf(func(b record.EventBroadcaster, api record.EventSink) func() {
		return Start(context.Background(), b, api, clock.RealClock{}, quietLog(), prometheus.NewCounter(prometheus.CounterOpts{Name: "dropped"}))
	})
	if !reflect.DeepEqual(got, want) {
		t.Errorf("written through Start:\n%s\nby client-go's broadcaster:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// BenchmarkCorrelateABurst: one op is a 2,000-pod Job's creation events,
// correlated (client-go's correlator; this one), each answered as written.
// Past the spam filter's 25 writes, client-go still builds each repeat's
// patch.
//
//	go test -run '^$' -bench BenchmarkCorrelateABurst -count 5 ./lib/fairevents/
func BenchmarkCorrelateABurst(b *testing.B) {
	job := corev1.ObjectReference{Kind: "Job", APIVersion: "batch/v1", Namespace: "ns", Name: "job", UID: "uid"}
	now := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	events := make([]*corev1.Event, 2000)
	for i := range events {
		events[i] = newEvent(now.Add(time.Duration(i)*time.Millisecond), job, corev1.EventTypeNormal, "SuccessfulCreate", fmt.Sprint("Created pod: job-", i))
	}
	b.Run("client-go", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			c := record.NewEventCorrelator(clock.RealClock{})
			for _, e := range events {
				if r, _ := c.EventCorrelate(e); !r.Skip {
					c.UpdateState(r.Event)
				}
			}
		}
	})
	b.Run("fairevents", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			c := newCorrelator(record.CorrelatorOptions{})
			for _, e := range events {
				if event, _, skip, _ := c.correlate(e); !skip {
					c.updateState(event)
				}
			}
		}
	})
}
