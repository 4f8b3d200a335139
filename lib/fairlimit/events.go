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
type EventSink struct{ Events typedcorev1.EventInterface }

var _ record.EventSink = EventSink{}

func eventsLane() context.Context { return WithLane(context.Background(), EventsLane) }

func (s EventSink) Create(e *corev1.Event) (*corev1.Event, error) {
	return s.Events.CreateWithEventNamespaceWithContext(eventsLane(), e)
}

func (s EventSink) Update(e *corev1.Event) (*corev1.Event, error) {
	return s.Events.UpdateWithEventNamespaceWithContext(eventsLane(), e)
}

func (s EventSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	return s.Events.PatchWithEventNamespaceWithContext(eventsLane(), e, data)
}
