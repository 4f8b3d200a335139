package schedule

import (
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var fields = Fields{Schedule: field.NewPath("spec", "schedule"), TimeZone: field.NewPath("spec", "timeZone")}

func ptr(s string) *string { return &s }

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestParseRejectsWhatTheAPIServerRejects(t *testing.T) {
	cases := []struct {
		name     string
		schedule string
		timeZone *string
		field    string
		message  string
	}{
		{"empty schedule", "", nil, "spec.schedule", "Required value"},
		{"too few fields", "* * *", nil, "spec.schedule", "expected exactly 5 fields"},
		{"out of range minute", "61 * * * *", nil, "spec.schedule", "above maximum"},
		{"unknown descriptor", "@fortnightly", nil, "spec.schedule", "unrecognized descriptor"},
		{"TZ in schedule", "TZ=UTC 0 * * * *", nil, "spec.schedule", "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"},
		{"CRON_TZ in schedule", "CRON_TZ=UTC 0 * * * *", nil, "spec.schedule", "cannot use TZ or CRON_TZ in schedule"},
		{"empty zone", "0 * * * *", ptr(""), "spec.timeZone", "timeZone must be nil or non-empty string"},
		{"Local zone", "0 * * * *", ptr("Local"), "spec.timeZone", "timeZone must be an explicit time zone"},
		{"local zone in lower case", "0 * * * *", ptr("local"), "spec.timeZone", "timeZone must be an explicit time zone"},
		{"unknown zone", "0 * * * *", ptr("Mars/Olympus"), "spec.timeZone", "unknown time zone Mars/Olympus"},
		{"path traversal zone", "0 * * * *", ptr("../etc/passwd"), "spec.timeZone", "unknown time zone"},
		{"zone component too long", "0 * * * *", ptr("America/Argentina_Buenos_Aires_X"), "spec.timeZone", "unknown time zone"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, v := Parse(tc.schedule, tc.timeZone, fields)
			if len(v) == 0 {
				t.Fatal("accepted")
			}
			found := false
			for _, violation := range v {
				if violation.Field == tc.field && strings.Contains(violation.ErrorBody(), tc.message) {
					found = true
				}
			}
			if !found {
				t.Errorf("violations %+v lack %s: %q", v, tc.field, tc.message)
			}
		})
	}
}

func TestParseAcceptsWhatRobfigStandardAccepts(t *testing.T) {
	for _, spec := range []string{"0 * * * *", "*/5 * * * *", "0 9 * * MON-FRI", "0 0 1 ? *", "@hourly", "@daily", "@midnight", "@every 90m", "0 0 29 2 *"} {
		if _, v := Parse(spec, nil, fields); len(v) > 0 {
			t.Errorf("%q rejected: %+v", spec, v)
		}
		if _, v := Parse(spec, ptr("Asia/Kolkata"), fields); len(v) > 0 {
			t.Errorf("%q in Asia/Kolkata rejected: %+v", spec, v)
		}
	}
}

func TestNextNMatchesRobfigInTheZone(t *testing.T) {
	from := utc("2026-01-15T10:17:00Z")
	for _, tc := range []struct{ spec, zone string }{
		{"0 * * * *", "UTC"},
		{"*/7 3-5 * * *", "Europe/Paris"},
		{"30 9 * * 1-5", "America/New_York"},
		{"0 0 1 * *", "Asia/Kolkata"},
		{"15 2 * * *", "Australia/Lord_Howe"},
		{"@weekly", "Pacific/Auckland"},
		{"@every 45m", "Europe/London"},
	} {
		s, v := Parse(tc.spec, ptr(tc.zone), fields)
		if len(v) > 0 {
			t.Fatalf("%s: %+v", tc.spec, v)
		}
		ref, err := cron.ParseStandard("TZ=" + tc.zone + " " + tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		got := s.NextN(from, 50)
		next := from
		for i := range got {
			next = ref.Next(next)
			if !got[i].Equal(next) {
				t.Fatalf("%s in %s: run %d is %s, robfig says %s", tc.spec, tc.zone, i, got[i], next)
			}
		}
		if len(got) != 50 {
			t.Errorf("%s: %d runs, want 50", tc.spec, len(got))
		}
	}
}

// robfig, hence the reference, skips a run whose local time falls in the hour
// a spring-forward change removes, and runs twice in the hour a fall-back
// change repeats.
func TestDaylightSavingChangesFollowTheReference(t *testing.T) {
	s, _ := Parse("30 2 * * *", ptr("America/New_York"), fields)
	got := s.NextN(utc("2026-03-07T00:00:00Z"), 3)
	want := []time.Time{utc("2026-03-07T07:30:00Z"), utc("2026-03-09T06:30:00Z"), utc("2026-03-10T06:30:00Z")}
	assertTimes(t, "spring forward", got, want)

	s, _ = Parse("30 1 * * *", ptr("America/New_York"), fields)
	got = s.NextN(utc("2026-10-31T00:00:00Z"), 4)
	want = []time.Time{utc("2026-10-31T05:30:00Z"), utc("2026-11-01T05:30:00Z"), utc("2026-11-01T06:30:00Z"), utc("2026-11-02T06:30:00Z")}
	assertTimes(t, "fall back", got, want)
}

func TestScheduleThatNeverFiresYieldsNoRuns(t *testing.T) {
	s, v := Parse("0 0 30 2 *", ptr("UTC"), fields)
	if len(v) > 0 {
		t.Fatal(v)
	}
	if got := s.NextN(utc("2026-01-01T00:00:00Z"), 3); len(got) != 0 {
		t.Errorf("got %v", got)
	}
}

func TestNoZoneReadsTheScheduleInTheLocalZone(t *testing.T) {
	s, _ := Parse("0 9 * * *", nil, fields)
	if s.Location() != time.Local {
		t.Errorf("location %v", s.Location())
	}
	next := s.Next(utc("2026-01-15T00:00:00Z")).In(time.Local)
	if next.Hour() != 9 || next.Minute() != 0 {
		t.Errorf("next %v", next)
	}
}

func assertTimes(t *testing.T, name string, got, want []time.Time) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %v, want %v", name, got, want)
	}
	for i := range got {
		if !got[i].Equal(want[i]) {
			t.Errorf("%s: run %d is %s, want %s", name, i, got[i].UTC(), want[i])
		}
	}
}

// robfig reads "TZ=Local" as the zone of the times it is given, which for
// the reference is the controller's: the loc given, never the process's.
func TestParseReferenceReadsTZLocalInTheGivenZone(t *testing.T) {
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	if err != nil {
		t.Fatal(err)
	}
	for spec, want := range map[string]string{
		"TZ=Local 30 9 * * *":        "2026-01-01T04:00:00Z",
		"CRON_TZ=Local 30 9 * * *":   "2026-01-01T04:00:00Z",
		"TZ=Europe/Paris 30 9 * * *": "2026-01-01T08:30:00Z",
		"TZ= 30 9 * * *":             "2026-01-01T09:30:00Z",
		"TZ=Europe/Paris @every 1h":  "2026-01-01T01:00:00Z",
		"30 9 * * *":                 "2026-01-01T04:00:00Z",
	} {
		s, err := ParseReference(spec, kolkata)
		if err != nil {
			t.Fatalf("%q: %v", spec, err)
		}
		if got := s.Next(utc("2026-01-01T00:00:00Z")); !got.Equal(utc(want)) {
			t.Errorf("%q: next %s, want %s", spec, got.UTC().Format(time.RFC3339), want)
		}
	}
}
