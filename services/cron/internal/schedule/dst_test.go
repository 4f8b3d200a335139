package schedule

import (
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

func mustParse(t *testing.T, spec, zone string) Schedule {
	t.Helper()
	s, v := Parse(spec, ptr(zone), fields)
	if len(v) > 0 {
		t.Fatalf("%s in %s: %+v", spec, zone, v)
	}
	return s
}

var dstZones = []string{"America/New_York", "Europe/London", "Australia/Sydney", "Asia/Kolkata"}
var dstSpecs = []string{"30 2 * * *", "30 1 * * *", "*/30 * * * *", "0 * * * *"}

// The wall-clock model with the default policies reproduces robfig around
// every change of the year in each zone: robfig's own behaviour is the
// default, and the model only departs from it where a policy says so.
func TestWallClockModelWithDefaultPoliciesIsRobfig(t *testing.T) {
	starts := []string{"2026-03-05T00:00:00Z", "2026-03-26T00:00:00Z", "2026-04-02T00:00:00Z", "2026-09-30T00:00:00Z", "2026-10-22T00:00:00Z", "2026-10-29T00:00:00Z"}
	for _, zone := range dstZones {
		for _, spec := range dstSpecs {
			s := mustParse(t, spec, zone)
			naive := *s.cron.(*cron.SpecSchedule)
			naive.Location = time.UTC
			model := &wallClock{naive: &naive, loc: s.loc}
			for _, start := range starts {
				robfigTime, modelTime := utc(start), utc(start)
				for i := 0; i < 400; i++ {
					robfigTime, modelTime = s.Next(robfigTime), model.next(modelTime)
					if !robfigTime.Equal(modelTime) {
						t.Fatalf("%s in %s from %s: robfig %s, model %s", spec, zone, start, robfigTime.UTC(), modelTime.UTC())
					}
				}
			}
		}
	}
}

func TestDefaultDaylightSavingPoliciesKeepRobfig(t *testing.T) {
	s := mustParse(t, "30 2 * * *", "America/New_York")
	for _, policy := range [][2]string{{"", ""}, {"Skip", "Twice"}, {"Skip", ""}, {"", "Twice"}} {
		if got := s.WithDaylightSaving(policy[0], policy[1]); got.wall != nil {
			t.Errorf("%v: not robfig", policy)
		}
	}
}

func TestDaylightSavingPolicies(t *testing.T) {
	cases := []struct {
		name, spec, zone, skipped, repeated, from string
		want                                      []string
	}{
		// New York springs forward 2026-03-08 02:00 EST -> 03:00 EDT (07:00Z).
		{"NY gap runs at the change", "30 2 * * *", "America/New_York", "RunAtNextValidTime", "", "2026-03-07T00:00:00Z",
			[]string{"2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}},
		{"NY gap: several wall times and the change's own time fire once", "*/30 * * * *", "America/New_York", "RunAtNextValidTime", "", "2026-03-08T06:00:00Z",
			[]string{"2026-03-08T06:30:00Z", "2026-03-08T07:00:00Z", "2026-03-08T07:30:00Z"}},
		{"NY hourly gap", "0 * * * *", "America/New_York", "RunAtNextValidTime", "", "2026-03-08T05:30:00Z",
			[]string{"2026-03-08T06:00:00Z", "2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z"}},
		// New York falls back 2026-11-01 02:00 EDT -> 01:00 EST (06:00Z).
		{"NY repeated hour once", "30 1 * * *", "America/New_York", "", "Once", "2026-10-31T00:00:00Z",
			[]string{"2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
		{"NY repeated hour twice by default", "30 1 * * *", "America/New_York", "RunAtNextValidTime", "Twice", "2026-10-31T00:00:00Z",
			[]string{"2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z", "2026-11-02T06:30:00Z"}},
		{"NY half-hourly once", "*/30 * * * *", "America/New_York", "", "Once", "2026-11-01T04:45:00Z",
			[]string{"2026-11-01T05:00:00Z", "2026-11-01T05:30:00Z", "2026-11-01T07:00:00Z"}},
		{"NY hourly once", "0 * * * *", "America/New_York", "", "Once", "2026-11-01T04:30:00Z",
			[]string{"2026-11-01T05:00:00Z", "2026-11-01T07:00:00Z"}},
		{"NY once, asked from inside the repeat", "*/30 * * * *", "America/New_York", "", "Once", "2026-11-01T06:10:00Z",
			[]string{"2026-11-01T07:00:00Z"}},
		{"NY twice, asked before the change", "*/30 * * * *", "America/New_York", "RunAtNextValidTime", "", "2026-11-01T05:50:00Z",
			[]string{"2026-11-01T06:00:00Z", "2026-11-01T06:30:00Z", "2026-11-01T07:00:00Z"}},
		// London: 2026-03-29 01:00 GMT -> 02:00 BST; 2026-10-25 02:00 BST -> 01:00 GMT.
		{"London gap", "30 1 * * *", "Europe/London", "RunAtNextValidTime", "", "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"London repeat once", "30 1 * * *", "Europe/London", "", "Once", "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
		// Sydney (southern hemisphere): 2026-04-05 03:00 AEDT -> 02:00 AEST;
		// 2026-10-04 02:00 AEST -> 03:00 AEDT.
		{"Sydney repeat once", "30 2 * * *", "Australia/Sydney", "", "Once", "2026-04-04T00:00:00Z",
			[]string{"2026-04-04T15:30:00Z", "2026-04-05T16:30:00Z"}},
		{"Sydney gap", "30 2 * * *", "Australia/Sydney", "RunAtNextValidTime", "", "2026-10-02T12:00:00Z",
			[]string{"2026-10-02T16:30:00Z", "2026-10-03T16:00:00Z", "2026-10-04T15:30:00Z"}},
		// Kolkata has no change: the policies change nothing.
		{"Kolkata", "30 2 * * *", "Asia/Kolkata", "RunAtNextValidTime", "Once", "2026-03-07T00:00:00Z",
			[]string{"2026-03-07T21:00:00Z", "2026-03-08T21:00:00Z"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := mustParse(t, tc.spec, tc.zone).WithDaylightSaving(tc.skipped, tc.repeated)
			var want []time.Time
			for _, w := range tc.want {
				want = append(want, utc(w))
			}
			assertTimes(t, tc.name, s.NextN(utc(tc.from), len(want)), want)
		})
	}
}

// The default policies in the same places, for contrast: robfig skips the
// gap and repeats the hour.
func TestDefaultDaylightSavingInTheSouthernHemisphere(t *testing.T) {
	s := mustParse(t, "30 2 * * *", "Australia/Sydney")
	assertTimes(t, "repeat", s.NextN(utc("2026-04-04T00:00:00Z"), 3),
		[]time.Time{utc("2026-04-04T15:30:00Z"), utc("2026-04-04T16:30:00Z"), utc("2026-04-05T16:30:00Z")})
	assertTimes(t, "gap", s.NextN(utc("2026-10-02T12:00:00Z"), 2),
		[]time.Time{utc("2026-10-02T16:30:00Z"), utc("2026-10-04T15:30:00Z")})
}

func TestEveryIgnoresDaylightSaving(t *testing.T) {
	s := mustParse(t, "@every 30m", "America/New_York")
	if !s.IsEvery() {
		t.Fatal("not @every")
	}
	withPolicy := s.WithDaylightSaving("RunAtNextValidTime", "Once")
	from := utc("2026-11-01T04:50:00Z")
	assertTimes(t, "every", withPolicy.NextN(from, 4), s.NextN(from, 4))
	assertTimes(t, "every", s.NextN(from, 2), []time.Time{utc("2026-11-01T05:20:00Z"), utc("2026-11-01T05:50:00Z")})
}

func TestParseReference(t *testing.T) {
	ny, _ := time.LoadLocation("America/New_York")
	s, err := ParseReference("0 * * * *", ny)
	if err != nil || s.Location() != ny {
		t.Fatalf("%v %v", s.Location(), err)
	}
	// A TZ= prefix wins, as robfig reads it.
	s, err = ParseReference("TZ=UTC 0 9 * * *", ny)
	if err != nil || s.Location().String() != "UTC" {
		t.Fatalf("%v %v", s.Location(), err)
	}
	if _, err := ParseReference("obvious error schedule", ny); err == nil || err.Error() != "expected exactly 5 fields, found 3: [obvious error schedule]" {
		t.Errorf("error %v", err)
	}
	if _, err := ParseReference("0 0 1 1/0 *", ny); err == nil {
		t.Error("accepted a zero step")
	}
}

func TestParseInUsesTheGivenLocalZone(t *testing.T) {
	kolkata, _ := time.LoadLocation("Asia/Kolkata")
	s, v := ParseIn("0 9 * * *", nil, kolkata, fields)
	if len(v) > 0 {
		t.Fatal(v)
	}
	if got := s.Next(utc("2026-01-15T00:00:00Z")); !got.Equal(utc("2026-01-15T03:30:00Z")) {
		t.Errorf("next %s", got)
	}
}

func TestLoadZone(t *testing.T) {
	kolkata, _ := time.LoadLocation("Asia/Kolkata")
	if loc, err := LoadZone("Local", kolkata); err != nil || loc != kolkata {
		t.Errorf("Local: %v %v", loc, err)
	}
	if loc, err := LoadZone("", kolkata); err != nil || loc != time.UTC {
		t.Errorf("empty: %v %v", loc, err)
	}
	if _, err := LoadZone("bad timezone", kolkata); err == nil {
		t.Error("accepted a bad zone")
	}
}
