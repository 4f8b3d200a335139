package decide

import (
	"encoding/binary"
	"errors"
	"hash/fnv"
	"math"
	"time"

	"github.com/jobplane/jobplane/services/cron/internal/schedule"
)

// nextScheduleDelta pads every requeue against clock skew, as the
// reference's.
const nextScheduleDelta = 100 * time.Millisecond

// tooManyMissed is the reference's bound beyond which it warns
// TooManyMissedTimes instead of counting precisely.
const tooManyMissed = 100

// maxListedMissedRuns bounds Plan.MissedRuns.
const maxListedMissedRuns = 1000

// missedSchedules grades how many scheduled times passed unmet, as the
// reference's missedSchedulesType.
type missedSchedules int

const (
	noneMissed missedSchedules = iota
	fewMissed
	manyMissed
)

var errScheduleTooDense = errors.New("time difference between two schedules is less than 1 second")

// maxDurationSeconds is the longest time.Duration in whole seconds.
const maxDurationSeconds = math.MaxInt64 / int64(time.Second)

// mostRecentScheduleTime is the reference's: the latest scheduled time in
// (earliest, now], or nil, with the reference's approximate counting (it
// jumps close to now by the interval between the first two times, then
// walks; an irregular schedule can make it overshoot and find nothing,
// which the reference lives with). Unlike the reference it takes earliest
// ready-made: the caller decides whether the deadline clamps it.
func mostRecentScheduleTime(earliest, now time.Time, sched schedule.Schedule) (*time.Time, missedSchedules, error) {
	t1 := sched.Next(earliest)
	t2 := sched.Next(t1)
	if now.Before(t1) {
		return nil, noneMissed, nil
	}
	if now.Before(t2) {
		return &t1, noneMissed, nil
	}
	// A schedule that never fires (31 February) gives zero times, hence a
	// zero interval.
	interval := int64(t2.Sub(t1).Round(time.Second).Seconds())
	if interval < 1 {
		return nil, noneMissed, errScheduleTooDense
	}
	elapsed := int64(now.Sub(t1).Seconds()) // the reference's float rounding, kept
	if elapsed >= maxDurationSeconds {
		// A Duration saturates at 292 years, after which the walk below
		// would start centuries before now and walk to it a second at a
		// time (a CronJob PlanCronJob is given may date from year 1).
		elapsed = now.Unix() - t1.Unix()
	}
	missedCount := elapsed/interval + 1
	// One interval further back than the count says, so that irregular
	// schedules still land before the most recent time.
	potentialEarliest := time.Unix(t1.Unix()+(missedCount-1-1)*interval, int64(t1.Nanosecond())).In(t1.Location())
	var mostRecent time.Time
	for t := sched.Next(potentialEarliest); !t.After(now); t = sched.Next(t) {
		mostRecent = t
	}
	missed := fewMissed
	if missedCount > tooManyMissed {
		missed = manyMissed
	}
	if mostRecent.IsZero() {
		return nil, missed, nil
	}
	return &mostRecent, missed, nil
}

// nextScheduleAim is the scheduled time the reference's
// nextScheduleTimeDuration requeues for (its duration minus the padding):
// the time after the most recent one due since earliest, or after now when
// times were missed and none was found.
func nextScheduleAim(earliest, now time.Time, sched schedule.Schedule) time.Time {
	mostRecent, missed, err := mostRecentScheduleTime(earliest, now, sched)
	switch {
	case err != nil:
		mostRecent = &now
	case mostRecent == nil && missed == noneMissed:
		mostRecent = &earliest
	case mostRecent == nil:
		mostRecent = &now
	}
	return sched.Next(*mostRecent)
}

// timesBetween lists the scheduled times in (from, to), at most limit of
// them, oldest first.
func timesBetween(sched schedule.Schedule, from, to time.Time, limit int) []time.Time {
	var out []time.Time
	for t := sched.Next(from); !t.IsZero() && t.Before(to) && len(out) < limit; t = sched.Next(t) {
		out = append(out, t)
	}
	return out
}

// latestTimes lists the last n scheduled times in (from, to], oldest first,
// without walking all of a long range: it walks back from to by a doubling
// span until the span holds n times or reaches from.
func latestTimes(sched schedule.Schedule, from, to time.Time, n int) []time.Time {
	if n <= 0 || !from.Before(to) {
		return nil
	}
	first := sched.Next(from)
	interval := max(sched.Next(first).Sub(first), time.Second)
	span := saturatingTimes(interval, n+1)
	for {
		start := from
		if to.Sub(from) > span {
			start = to.Add(-span)
		}
		var found []time.Time
		for t := sched.Next(start); !t.IsZero() && !t.After(to); t = sched.Next(t) {
			found = append(found, t)
			if len(found) > n {
				found = found[1:]
			}
		}
		if len(found) == n || start.Equal(from) {
			return found
		}
		span = saturatingTimes(span, 2)
	}
}

// saturatingTimes is d times k (both positive), or the longest Duration
// when that overflows: a span then reaches back to the range's start
// rather than wrapping around to a negative one and never reaching it.
func saturatingTimes(d time.Duration, k int) time.Duration {
	if d > math.MaxInt64/time.Duration(k) {
		return math.MaxInt64
	}
	return d * time.Duration(k)
}

// jitterDelay is how long after scheduled a run starts when the CronJob
// asks for jitter: FNV-1a of the UID and the scheduled second, modulo
// jitterSeconds+1 seconds, so it is stable across syncs and replicas. It
// stays before the next scheduled time, so runs keep their order.
func jitterDelay(uid string, jitterSeconds int32, scheduled time.Time, sched schedule.Schedule) time.Duration {
	if jitterSeconds <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(uid))
	var unix [8]byte
	binary.BigEndian.PutUint64(unix[:], uint64(scheduled.Unix()))
	h.Write(unix[:])
	delay := time.Duration(h.Sum64()%uint64(jitterSeconds+1)) * time.Second
	if next := sched.Next(scheduled); !next.IsZero() {
		delay = min(delay, max(next.Sub(scheduled)-time.Second, 0))
	}
	return delay
}

// skipGrace is how late a run may start under catchUp.policy Skip: a minute,
// or half the interval of a denser schedule.
func skipGrace(scheduled time.Time, sched schedule.Schedule) time.Duration {
	next := sched.Next(scheduled)
	if next.IsZero() {
		return time.Minute
	}
	return min(time.Minute, next.Sub(scheduled)/2)
}
