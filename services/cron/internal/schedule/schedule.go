// Package schedule is the cron service's schedule math, as pure functions:
// parsing a CronJob's schedule and time zone with the reference's rules
// (robfig/cron/v3 ParseStandard, IANA zones, no TZ= in the schedule) and
// listing the times a schedule fires.
package schedule

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Schedule is a parsed schedule in its time zone.
type Schedule struct {
	cron cron.Schedule
	loc  *time.Location
	// wall is set when a daylight-saving policy other than robfig's applies
	// (see WithDaylightSaving): the schedule read on a naive wall clock.
	wall *wallClock
}

// Fields are the paths of errors, relative to the message holding the
// schedule (a CronJob's spec, or a PreviewSchedule request).
type Fields struct {
	Schedule *field.Path
	TimeZone *field.Path
}

// TZInScheduleDetail is the apiserver's reason to refuse TZ or CRON_TZ in a
// schedule.
const TZInScheduleDetail = "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"

// Parse parses spec in the IANA zone timeZone; nil timeZone means the local
// zone of the process (the reference uses kube-controller-manager's). Every
// problem is returned as an error of fields, with the apiserver's messages.
func Parse(spec string, timeZone *string, fields Fields) (Schedule, field.ErrorList) {
	return ParseIn(spec, timeZone, time.Local, fields)
}

// ParseIn is Parse with the zone of a schedule without timeZone given, so
// that pure callers never read the process's time.Local.
func ParseIn(spec string, timeZone *string, local *time.Location, fields Fields) (Schedule, field.ErrorList) {
	var errs field.ErrorList
	if spec == "" {
		errs = append(errs, field.Required(fields.Schedule, ""))
	} else {
		if _, err := parseStandard(spec); err != nil {
			errs = append(errs, field.Invalid(fields.Schedule, spec, err.Error()))
		}
		if strings.Contains(spec, "TZ") {
			errs = append(errs, field.Invalid(fields.Schedule, spec, TZInScheduleDetail))
		}
	}
	loc, zoneErr := loadTimeZone(timeZone, local, fields.TimeZone)
	if zoneErr != nil {
		errs = append(errs, zoneErr)
	}
	if len(errs) > 0 {
		return Schedule{}, errs
	}
	// The reference hands the zone to robfig as a TZ= prefix; doing the same
	// keeps every robfig rule (descriptors, @every) identical.
	if timeZone != nil {
		spec = fmt.Sprintf("TZ=%s %s", *timeZone, spec)
	}
	s, err := parseStandard(spec)
	if err != nil {
		return Schedule{}, field.ErrorList{field.Invalid(fields.Schedule, spec, err.Error())}
	}
	return inZone(s, loc), nil
}

// ParseReference parses spec as the reference's sync does
// (ParseCronScheduleWithPanicRecovery of formatSchedule's output, which is
// the caller's to build), without the apiserver's rules: a TZ= or CRON_TZ=
// prefix is honoured as robfig does, and a spec without one, or with the
// zone "Local", is read in loc (robfig reads time.Local as the zone of the
// times it is given: the controller's own). The error is robfig's (or
// "invalid schedule format: ..." for a spec that makes robfig panic), as the
// reference's events quote it.
func ParseReference(spec string, loc *time.Location) (Schedule, error) {
	s, err := parseStandard(spec)
	if err != nil {
		return Schedule{}, err
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		// robfig loaded this name already: it cannot fail here.
		name := spec[strings.Index(spec, "=")+1 : strings.Index(spec, " ")]
		if named, err := time.LoadLocation(name); err == nil && named != time.Local {
			loc = named
		}
	}
	return inZone(s, loc), nil
}

// LoadZone loads the IANA zone name as the reference's sync checks it
// (time.LoadLocation, so "" is UTC), except that "Local" is local: the zone
// of the service, given rather than read from the process.
func LoadZone(name string, local *time.Location) (*time.Location, error) {
	if name == "Local" {
		return local, nil
	}
	return time.LoadLocation(name)
}

// inZone reads a parsed schedule in loc. robfig reads a spec without TZ= in
// time.Local; a copy with loc keeps the caller's zone explicit.
func inZone(s cron.Schedule, loc *time.Location) Schedule {
	if spec, ok := s.(*cron.SpecSchedule); ok {
		inLoc := *spec
		inLoc.Location = loc
		return Schedule{cron: &inLoc, loc: loc}
	}
	return Schedule{cron: s, loc: loc}
}

// parseStandard is robfig's ParseStandard, whose panics on some inputs become
// errors, as in the reference.
func parseStandard(spec string) (s cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("invalid schedule format: %v", r)
		}
	}()
	return cron.ParseStandard(spec)
}

// validTimeZoneCharacters are those of IANA zone name components (with the
// digits and '+' of legacy names), as the apiserver accepts them.
var validTimeZoneCharacters = regexp.MustCompile(`^[A-Za-z\.\-_0-9+]{1,14}$`)

// loadTimeZone applies the apiserver's timeZone validation and loads the
// zone; a non-empty second result is the violation.
func loadTimeZone(timeZone *string, local *time.Location, path *field.Path) (*time.Location, *field.Error) {
	if timeZone == nil {
		return local, nil
	}
	tz := *timeZone
	if tz == "" {
		return nil, field.Invalid(path, tz, "timeZone must be nil or non-empty string")
	}
	for _, part := range strings.Split(tz, "/") {
		if part == "." || part == ".." || strings.HasPrefix(part, "-") || !validTimeZoneCharacters.MatchString(part) {
			return nil, field.Invalid(path, tz, "unknown time zone "+tz)
		}
	}
	if strings.EqualFold(tz, "Local") {
		return nil, field.Invalid(path, tz, "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones")
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, field.Invalid(path, tz, err.Error())
	}
	return loc, nil
}

// Location is the zone the schedule is read in.
func (s Schedule) Location() *time.Location { return s.loc }

// Next is the first time the schedule fires strictly after t, or the zero
// time when it never fires (robfig gives up after five years, for example for
// "0 0 30 2 *").
func (s Schedule) Next(t time.Time) time.Time {
	if s.wall != nil {
		return s.wall.next(t)
	}
	return s.cron.Next(t.In(s.loc))
}

// IsEvery says whether the schedule is an "@every" interval, which counts
// elapsed time rather than reading a wall clock.
func (s Schedule) IsEvery() bool {
	_, ok := s.cron.(cron.ConstantDelaySchedule)
	return ok
}

// NextN lists up to n times the schedule fires strictly after from, earliest
// first; fewer when the schedule stops firing.
func (s Schedule) NextN(from time.Time, n int) []time.Time {
	out := make([]time.Time, 0, n)
	t := from
	for len(out) < n {
		t = s.Next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t)
	}
	return out
}
