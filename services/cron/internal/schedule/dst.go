package schedule

import (
	"slices"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/jobplane/jobplane/lib/cronapi"
)

// WithDaylightSaving returns the schedule following a CronJob's
// daylightSaving policy. The defaults ("" or "Skip" for the skipped hour, ""
// or "Twice" for the repeated hour) are robfig's own behaviour, so the
// schedule is returned unchanged and robfig keeps computing it. An "@every"
// schedule counts elapsed time, not wall-clock time, so no policy applies to
// it either.
//
// Otherwise the schedule is enumerated on a naive wall clock and each wall
// time is mapped to the instants that show it in the zone: none in a
// spring-forward gap (skipped, or with "RunAtNextValidTime" the instant the
// gap ends, once however many wall times fall in the gap), two in a
// fall-back repeat (both, or with "Once" the first).
func (s Schedule) WithDaylightSaving(skippedHour, repeatedHour string) Schedule {
	runInGap := skippedHour == cronapi.SkippedHourRunAtNextValidTime
	onceInRepeat := repeatedHour == cronapi.RepeatedHourOnce
	spec, ok := s.cron.(*cron.SpecSchedule)
	if !ok || (!runInGap && !onceInRepeat) {
		return s
	}
	naive := *spec
	naive.Location = time.UTC
	s.wall = &wallClock{naive: &naive, loc: s.loc, runInGap: runInGap, onceInRepeat: onceInRepeat}
	return s
}

// wallClock fires a cron schedule on the wall clock of loc with explicit
// rules for the wall times a daylight-saving change skips or repeats.
type wallClock struct {
	// naive is the schedule evaluated in UTC: UTC fields stand for wall
	// fields of loc.
	naive        *cron.SpecSchedule
	loc          *time.Location
	runInGap     bool
	onceInRepeat bool
}

// longestChange bounds the offset change of a daylight-saving transition
// (real zones move by one hour or less; two hours was the historical most).
const longestChange = 4 * time.Hour

// next is the first instant strictly after t at which the schedule fires.
func (w *wallClock) next(t time.Time) time.Time {
	// A wall time earlier than t's can still fire after t when a fall-back
	// change follows t closely: start that far back.
	cursor := wallTime(t, w.loc).Add(-w.foldAfter(t))
	var best time.Time
	for {
		cursor = w.naive.Next(cursor)
		if cursor.IsZero() {
			// robfig gives up after five years of no match.
			break
		}
		instants := w.instantsOf(cursor)
		if len(instants) == 0 {
			continue
		}
		// The earliest instant of a wall time never decreases as the wall
		// time grows, so nothing later can beat best.
		if !best.IsZero() && instants[0].After(best) {
			break
		}
		for _, instant := range instants {
			if instant.After(t) && (best.IsZero() || instant.Before(best)) {
				best = instant
			}
		}
	}
	if best.IsZero() {
		return best
	}
	return best.In(t.Location())
}

// foldAfter is how much the wall clock moves back at a fall-back change
// shortly after t, zero when there is none.
func (w *wallClock) foldAfter(t time.Time) time.Duration {
	fold := offset(t, w.loc) - offset(t.Add(longestChange), w.loc)
	return max(fold, 0)
}

// instantsOf lists, earliest first, the instants at which the wall time
// fires under the policy.
func (w *wallClock) instantsOf(wall time.Time) []time.Time {
	before := offset(wall.Add(-24*time.Hour), w.loc)
	after := offset(wall.Add(24*time.Hour), w.loc)
	var instants []time.Time
	for _, off := range []time.Duration{before, after} {
		instant := wall.Add(-off)
		if offset(instant, w.loc) == off && !slices.ContainsFunc(instants, instant.Equal) {
			instants = append(instants, instant)
		}
	}
	slices.SortFunc(instants, time.Time.Compare)
	switch {
	case len(instants) == 0 && w.runInGap:
		// Read with the old offset the wall time lies past the change; the
		// zone period it falls in starts at the change.
		start, _ := wall.Add(-before).In(w.loc).ZoneBounds()
		return []time.Time{start}
	case len(instants) == 2 && w.onceInRepeat:
		return instants[:1]
	}
	return instants
}

// wallTime is t's wall clock in loc, written as the same fields in UTC.
func wallTime(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC)
}

// offset is loc's offset from UTC at instant t.
func offset(t time.Time, loc *time.Location) time.Duration {
	_, seconds := t.In(loc).Zone()
	return time.Duration(seconds) * time.Second
}
