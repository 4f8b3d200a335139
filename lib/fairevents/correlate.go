package fairevents

import (
	"encoding/json"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/tools/record/util"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"
)

// correlator is client-go's EventCorrelator but for when a repeated event's
// patch is built. client-go builds it (two JSON encodings and a two-way
// merge patch) for every repeat, then asks its spam filter whether to write
// the event at all: a Job's pod creations past the filter's burst of 25 are
// dropped, each after its patch was built (profiled: the events' whole cost
// in the executor for a 2,000-pod Job, as in kube-controller-manager). Here
// the patch is built after the filter, for the events written only. The
// aggregator and the spam filter are client-go's own; the observation is
// client-go's, in the same order, so the same events are written with the
// same patches, byte for byte (TestCorrelationIsClientGos).
type correlator struct {
	aggregator *record.EventAggregator
	spam       *record.EventSourceObjectSpamFilter

	mu sync.Mutex
	// observed is each event's last observation, by its key: what
	// client-go's event logger keeps.
	observed *lru.Cache
}

// observation is what client-go keeps of an event seen or written.
type observation struct {
	count           uint
	firstTimestamp  metav1.Time
	name            string
	resourceVersion string
}

// client-go's defaults (record.CorrelatorOptions).
const (
	defaultCacheSize          = 4096
	defaultSpamBurst          = 25
	defaultSpamQPS            = 1. / 300.
	defaultAggregateMaxEvents = 10
	defaultAggregateInterval  = 600
)

// newCorrelator is record.NewEventCorrelatorWithOptions's, with the same
// defaults.
func newCorrelator(o record.CorrelatorOptions) *correlator {
	if o.LRUCacheSize == 0 {
		o.LRUCacheSize = defaultCacheSize
	}
	if o.BurstSize == 0 {
		o.BurstSize = defaultSpamBurst
	}
	if o.QPS == 0 {
		o.QPS = defaultSpamQPS
	}
	if o.KeyFunc == nil {
		o.KeyFunc = record.EventAggregatorByReasonFunc
	}
	if o.MessageFunc == nil {
		o.MessageFunc = record.EventAggregatorByReasonMessageFunc
	}
	if o.MaxEvents == 0 {
		o.MaxEvents = defaultAggregateMaxEvents
	}
	if o.MaxIntervalInSeconds == 0 {
		o.MaxIntervalInSeconds = defaultAggregateInterval
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.SpamKeyFunc == nil {
		o.SpamKeyFunc = spamKey
	}
	return &correlator{
		aggregator: record.NewEventAggregator(o.LRUCacheSize, o.KeyFunc, o.MessageFunc, o.MaxEvents, o.MaxIntervalInSeconds, o.Clock),
		spam:       record.NewEventSourceObjectSpamFilter(o.LRUCacheSize, o.BurstSize, o.QPS, o.Clock, o.SpamKeyFunc),
		observed:   lru.New(o.LRUCacheSize),
	}
}

// correlate is EventCorrelate: the event to write and, for a repeat, its
// patch, or skip.
func (c *correlator) correlate(e *corev1.Event) (event *corev1.Event, patch []byte, skip bool, err error) {
	aggregated, key := c.aggregator.EventAggregate(e)
	event = c.observe(aggregated, key)
	if c.spam.Filter(event) {
		return nil, nil, true, nil
	}
	if event.Count > 1 {
		patch, err = repeatPatch(event)
	}
	return event, patch, false, err
}

// observe is client-go's eventObserve without the patch: the event as a
// repeat of its last observation, if any, which it becomes.
func (c *correlator) observe(e *corev1.Event, key string) *corev1.Event {
	event := *e
	c.mu.Lock()
	defer c.mu.Unlock()
	if last, ok := c.last(key); ok && last.count > 0 {
		event.Name = last.name
		event.ResourceVersion = last.resourceVersion
		event.FirstTimestamp = last.firstTimestamp
		event.Count = int32(last.count) + 1
	}
	c.observed.Add(key, observationOf(&event))
	return &event
}

func (c *correlator) last(key string) (observation, bool) {
	v, ok := c.observed.Get(key)
	if !ok {
		return observation{}, false
	}
	o, ok := v.(observation)
	return o, ok
}

// updateState is UpdateState: the event as written becomes its last
// observation.
func (c *correlator) updateState(e *corev1.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observed.Add(eventKey(e), observationOf(e))
}

func observationOf(e *corev1.Event) observation {
	return observation{count: uint(e.Count), firstTimestamp: e.FirstTimestamp, name: e.Name, resourceVersion: e.ResourceVersion}
}

// repeatPatch is the patch client-go writes for a repeated event: its count,
// time and message, as a two-way merge patch from the event without them.
func repeatPatch(event *corev1.Event) ([]byte, error) {
	without := *event
	without.Count = 0
	without.LastTimestamp = metav1.NewTime(time.Unix(0, 0))
	without.Message = ""
	newData, _ := json.Marshal(event)
	oldData, _ := json.Marshal(without)
	return strategicpatch.CreateTwoWayMergePatch(oldData, newData, event)
}

// recordTo is client-go's recordToSink for a sink that only queues (Sink):
// it never fails, so there is nothing to retry here; Sink's writer retries
// a write failing in transport, and creates an event whose patch finds it
// gone, as client-go's recordEvent does.
func (c *correlator) recordTo(sink record.EventSink, onError func(error)) func(*corev1.Event) {
	return func(e *corev1.Event) {
		copied := *e // the broadcaster's other watchers share e
		event, patch, skip, err := c.correlate(&copied)
		if err != nil {
			onError(err)
		}
		if skip {
			return
		}
		var written *corev1.Event
		if event.Count > 1 {
			written, err = sink.Patch(event, patch)
		}
		if event.Count <= 1 || util.IsKeyNotFoundError(err) {
			event.ResourceVersion = ""
			written, err = sink.Create(event)
		}
		if err != nil {
			onError(err)
			return
		}
		c.updateState(written)
	}
}

// eventKey is client-go's getEventKey: source, object, reason and message.
func eventKey(e *corev1.Event) string {
	return strings.Join([]string{
		e.Source.Component, e.Source.Host,
		e.InvolvedObject.Kind, e.InvolvedObject.Namespace, e.InvolvedObject.Name, e.InvolvedObject.FieldPath,
		string(e.InvolvedObject.UID), e.InvolvedObject.APIVersion,
		e.Type, e.Reason, e.Message,
	}, "")
}

// spamKey is client-go's getSpamKey: source and object.
func spamKey(e *corev1.Event) string {
	return strings.Join([]string{
		e.Source.Component, e.Source.Host,
		e.InvolvedObject.Kind, e.InvolvedObject.Namespace, e.InvolvedObject.Name,
		string(e.InvolvedObject.UID), e.InvolvedObject.APIVersion,
		e.Type,
	}, "")
}
