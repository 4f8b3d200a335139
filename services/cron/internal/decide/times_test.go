package decide

import (
	"testing"
	"time"
)

// Ranges longer than a time.Duration holds (292 years), which PlanCronJob's
// callers can send: the most recent time is found by counting, not by
// walking from centuries before now (which took forever).
func TestMostRecentScheduleTimeAcrossCenturies(t *testing.T) {
	now := time.Date(9999, 12, 31, 23, 59, 58, 500_000_000, time.UTC)
	for _, tc := range []struct {
		spec       string
		earliest   time.Time
		mostRecent time.Time
	}{
		{"@every 1s", time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 58, 0, time.UTC)},
		{"*/5 * * * *", time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 55, 0, 0, time.UTC)},
		{"0 0 1 1 *", time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		got, missed, err := mostRecentScheduleTime(tc.earliest, now, parseSchedule(t, tc.spec))
		if err != nil || got == nil || !got.Equal(tc.mostRecent) || missed != manyMissed {
			t.Errorf("%s: %v, %v, %v; want %v, many missed", tc.spec, got, missed, err, tc.mostRecent)
		}
	}
}

// The last n times of a range longer than a Duration: the span doubling
// back from the range's end stops at its start instead of overflowing.
func TestLatestTimesAcrossCenturies(t *testing.T) {
	from, to := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 6, 1, 0, 0, 0, 0, time.UTC)
	got := latestTimes(parseSchedule(t, "0 0 1 1 *"), from, to, 1000)
	if len(got) != 1000 || !got[0].Equal(time.Date(9000, 1, 1, 0, 0, 0, 0, time.UTC)) || !got[999].Equal(time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("got %d times, %v to %v; want the 1,000 New Years from 9000 to 9999", len(got), first(got), last(got))
	}
	if got := latestTimes(parseSchedule(t, "0 0 1 1 *"), from, to, 10_000); len(got) != 9998 {
		t.Errorf("got %d times, want all 9,998 of (from, to]", len(got))
	}
}

func first(times []time.Time) time.Time {
	if len(times) == 0 {
		return time.Time{}
	}
	return times[0]
}

func last(times []time.Time) time.Time {
	if len(times) == 0 {
		return time.Time{}
	}
	return times[len(times)-1]
}
