package admission

import (
	"fmt"
	"slices"
)

// A level's streams are shared between its callers max-min fairly: each
// caller keeps at most StreamsPerFlow, and when all of the level's
// Streams are open, a caller holding fewer than another takes the place of
// that other's newest stream, which is ended (a stream can be opened
// again; watches resume where they were). So no group of callers, each
// within its own bound, can fill the level and lock another out: a caller
// is refused a stream only while every caller holds as many as it, or one
// more.

// OpenStream admits a long-lived stream of caller flow: no seat, one of
// the caller's StreamsPerFlow and of the level's Streams, refused at once
// when the caller has its own, or the level's are open and no caller holds
// two more than it. preempt is called, once and outside any lock, if another
// caller takes the stream's place; the stream should then end
// (Ticket.Preempted says why).
func (c *Controller) OpenStream(levelName, flow string, preempt func()) (*Ticket, error) {
	l := c.level(levelName)
	t := &Ticket{c: c, level: l, flow: flow, stream: true, preempt: preempt}
	l.mu.Lock()
	var refusal string
	var victim *Ticket
	switch mine := len(l.streams[flow]); {
	case mine >= l.cfg.StreamsPerFlow:
		refusal = fmt.Sprintf("the caller has %d streams open, the most allowed on priority level %q", l.cfg.StreamsPerFlow, l.name)
	case l.openStreams >= l.cfg.Streams:
		if victim = l.streamToPreempt(mine); victim == nil {
			refusal = fmt.Sprintf("%d streams are open on priority level %q, the most allowed, and no caller holds more than one more than this caller's %d", l.cfg.Streams, l.name, mine)
		}
	}
	if refusal != "" {
		l.mu.Unlock()
		c.metrics.rejected.WithLabelValues(l.name, "streams").Inc()
		return nil, Exhausted(refusal, ReasonTooManyStreams, l.name, c.cfg.MaxQueueWait)
	}
	if victim != nil {
		l.forgetStream(victim)
		victim.preempted = true
	}
	l.streams[flow] = append(l.streams[flow], t)
	l.openStreams++
	l.mu.Unlock()
	c.metrics.admitted.WithLabelValues(l.name).Inc()
	c.metrics.inUse.WithLabelValues(l.name, "streams").Inc()
	if victim != nil {
		c.metrics.rejected.WithLabelValues(l.name, ReasonStreamPreempted).Inc()
		c.metrics.inUse.WithLabelValues(l.name, "streams").Dec()
		if victim.preempt != nil {
			victim.preempt()
		}
	}
	return t, nil
}

// streamToPreempt is the newest stream of the caller holding the most
// streams, if it holds at least two more than mine: after the exchange it
// still holds at least as many as the taker, so it cannot take one back.
func (l *level) streamToPreempt(mine int) *Ticket {
	var most []*Ticket
	for _, open := range l.streams {
		if len(open) > len(most) {
			most = open
		}
	}
	if len(most) < mine+2 {
		return nil
	}
	return most[len(most)-1]
}

// forgetStream takes t out of the level's open streams; false if it was
// not there (it was preempted).
func (l *level) forgetStream(t *Ticket) bool {
	open := l.streams[t.flow]
	i := slices.Index(open, t)
	if i < 0 {
		return false
	}
	if open = slices.Delete(open, i, i+1); len(open) == 0 {
		delete(l.streams, t.flow)
	} else {
		l.streams[t.flow] = open
	}
	l.openStreams--
	return true
}

// closeStream gives back the place of t, a stream that ended.
func (l *level) closeStream(t *Ticket) {
	l.mu.Lock()
	forgotten := l.forgetStream(t)
	l.mu.Unlock()
	if forgotten {
		t.c.metrics.inUse.WithLabelValues(l.name, "streams").Dec()
	}
}

// Preempted is, for a stream another caller took the place of, the status
// to end it with (RESOURCE_EXHAUSTED with RetryInfo); nil otherwise.
func (t *Ticket) Preempted() error {
	t.level.mu.Lock()
	preempted := t.preempted
	t.level.mu.Unlock()
	if !preempted {
		return nil
	}
	return Exhausted(fmt.Sprintf("the stream was ended for a caller holding fewer of the %d streams of priority level %q than this caller", t.level.cfg.Streams, t.level.name),
		ReasonStreamPreempted, t.level.name, t.c.cfg.MaxQueueWait)
}
