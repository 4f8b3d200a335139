package fairlimit

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// EventSink writes a recorder's events in the lane of events (EventsLane):
// they trail a burst of other writes rather than take turns with it, and
// never hold a sync.
type EventSink struct {
	Events typedcorev1.EventInterface
	// Context ends the requests, waiting or sent; nil: they never end.
	Context context.Context
}

var _ record.EventSink = EventSink{}

func (s EventSink) eventsLane() context.Context {
	ctx := s.Context
	if ctx == nil {
		ctx = context.Background()
	}
	return WithLane(ctx, EventsLane)
}

func (s EventSink) Create(e *corev1.Event) (*corev1.Event, error) {
	return s.Events.CreateWithEventNamespaceWithContext(s.eventsLane(), e)
}

func (s EventSink) Update(e *corev1.Event) (*corev1.Event, error) {
	return s.Events.UpdateWithEventNamespaceWithContext(s.eventsLane(), e)
}

func (s EventSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	return s.Events.PatchWithEventNamespaceWithContext(s.eventsLane(), e, data)
}
