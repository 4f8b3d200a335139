package engine

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
)

func addEvent(p *Plan, eventType, reason, message string) {
	p.Add(RecordEvent{
		Because: because(reason, fmt.Sprintf("Record a %s event %s on the Job.", eventType, reason)),
		Type:    eventType,
		Message: message,
	})
}

func addRequeue(p *Plan, after time.Duration, reason, explanation string) {
	p.Add(Requeue{Because: because(reason, explanation), After: after})
}

// describeStatusChange lists, for a person, what differs between two
// statuses. It runs on every sync that writes a status, hence the builder.
func describeStatusChange(old, cur *batchv1.JobStatus) string {
	var b strings.Builder
	part := func(s ...string) {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		for _, x := range s {
			b.WriteString(x)
		}
	}
	counter := func(name string, x, y int32) {
		if x != y {
			part(name, " ", strconv.Itoa(int(x)), "→", strconv.Itoa(int(y)))
		}
	}
	counter("active", old.Active, cur.Active)
	counter("ready", deref(old.Ready), deref(cur.Ready))
	counter("terminating", deref(old.Terminating), deref(cur.Terminating))
	counter("succeeded", old.Succeeded, cur.Succeeded)
	counter("failed", old.Failed, cur.Failed)
	if old.CompletedIndexes != cur.CompletedIndexes {
		part("completedIndexes ", strconv.Quote(cur.CompletedIndexes))
	}
	if !stringPtrEqual(old.FailedIndexes, cur.FailedIndexes) && cur.FailedIndexes != nil {
		part("failedIndexes ", strconv.Quote(*cur.FailedIndexes))
	}
	counter("uncounted pods", int32(uncountedLen(old)), int32(uncountedLen(cur)))
	switch {
	case old.StartTime != nil && cur.StartTime == nil:
		part("startTime cleared")
	case cur.StartTime != nil && (old.StartTime == nil || !old.StartTime.Equal(cur.StartTime)):
		part("startTime set")
	}
	if cur.CompletionTime != nil && old.CompletionTime == nil {
		part("completionTime set")
	}
	for _, c := range cur.Conditions {
		if prev := findCondition(old.Conditions, c.Type); prev == nil || prev.Status != c.Status || prev.Reason != c.Reason {
			part("condition ", string(c.Type), "=", string(c.Status), " (", c.Reason, ")")
		}
	}
	if b.Len() == 0 {
		return "no visible change"
	}
	return b.String()
}

func uncountedLen(s *batchv1.JobStatus) int {
	if s.UncountedTerminatedPods == nil {
		return 0
	}
	return len(s.UncountedTerminatedPods.Succeeded) + len(s.UncountedTerminatedPods.Failed)
}

func deref(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// summarize writes the plan's one-sentence summary.
func (c *syncCtx) summarize() {
	var parts []string
	for _, a := range c.plan.Actions {
		switch a := a.(type) {
		case CreatePods:
			parts = append(parts, fmt.Sprintf("create %d pods", len(a.Pods)))
		case DeletePods:
			parts = append(parts, fmt.Sprintf("delete %d pods", len(a.Pods)))
		case RemoveFinalizers:
			parts = append(parts, fmt.Sprintf("remove %d finalizers", len(a.Pods)))
		case WriteStatus:
			parts = append(parts, "write status")
		case RecordEvent:
			parts = append(parts, "record "+a.Reason)
		case Requeue:
			parts = append(parts, fmt.Sprintf("sync again in %s", a.After))
		}
	}
	state := "The Job is running"
	switch {
	case c.plan.Metrics.FinishedResult != "":
		state = fmt.Sprintf("The Job finishes (%s, %s)", c.finishedCondition.Type, c.finishedCondition.Reason)
	case c.finishedCondition != nil:
		state = fmt.Sprintf("The Job is finishing (%s)", c.finishedCondition.Reason)
	case jobSuspended(c.job):
		state = "The Job is suspended"
	}
	if len(parts) == 0 {
		c.plan.Summary = state + "; nothing to do."
		return
	}
	c.plan.Summary = state + ": " + strings.Join(parts, ", ") + "."
}
