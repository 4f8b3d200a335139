// Package batchcron is how the cron service reads and writes batch/v1
// CronJobs in drop-in mode: the same decision as jobplane's CronJobs, with
// jobplane's extensions taken from annotations under cron.jobplane.dev/
// (checked as strictly as the custom resource's fields, each error naming
// its annotation) and the state batch/v1's status cannot hold (buffered
// runs, the schedule last observed) kept in one annotation, written with the
// status in a single status update.
package batchcron

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/services/cron/internal/validation"
)

// APIVersion is batch/v1 CronJobs' apiVersion.
var APIVersion = batchv1.SchemeGroupVersion.String()

// Prefix starts every annotation of jobplane's on a batch/v1 CronJob.
const Prefix = "cron.jobplane.dev/"

// The extensions' annotations, each standing for a field of jobplane's
// CronJob.
const (
	// ConcurrencyPolicyAnnotation overrides spec.concurrencyPolicy, so that
	// BufferOne and BufferAll, which batch/v1 refuses, can be asked for.
	ConcurrencyPolicyAnnotation = Prefix + "concurrency-policy"
	// CatchUpPolicyAnnotation is spec.catchUp.policy.
	CatchUpPolicyAnnotation = Prefix + "catch-up-policy"
	// CatchUpWindowAnnotation is spec.catchUp.windowSeconds.
	CatchUpWindowAnnotation = Prefix + "catch-up-window-seconds"
	// CatchUpMaxRunsAnnotation is spec.catchUp.maxRuns.
	CatchUpMaxRunsAnnotation = Prefix + "catch-up-max-runs"
	// JitterAnnotation is spec.jitterSeconds.
	JitterAnnotation = Prefix + "jitter-seconds"
	// SkippedHourAnnotation is spec.daylightSaving.skippedHour.
	SkippedHourAnnotation = Prefix + "daylight-saving-skipped-hour"
	// RepeatedHourAnnotation is spec.daylightSaving.repeatedHour.
	RepeatedHourAnnotation = Prefix + "daylight-saving-repeated-hour"
	// NoRetroactiveRunsAnnotation "true": after a schedule edit, no time
	// before the edit runs under the new schedule (jobplane's CronJobs
	// always; batch/v1's as the reference unless asked).
	NoRetroactiveRunsAnnotation = Prefix + "no-retroactive-runs"
	// StateAnnotation holds the State, written by the cron service only.
	StateAnnotation = Prefix + "state"
)

// annotations are the keys under Prefix a CronJob may carry.
var annotations = []string{
	ConcurrencyPolicyAnnotation, CatchUpPolicyAnnotation, CatchUpWindowAnnotation, CatchUpMaxRunsAnnotation,
	JitterAnnotation, SkippedHourAnnotation, RepeatedHourAnnotation, NoRetroactiveRunsAnnotation, StateAnnotation,
}

// State is what jobplane's CronJob status holds beyond batch/v1's, as the
// state annotation keeps it.
type State struct {
	PendingRuns           []cronapi.PendingRun `json:"pendingRuns,omitempty"`
	ObservedSchedule      string               `json:"observedSchedule,omitempty"`
	ObservedScheduleSince *metav1.Time         `json:"observedScheduleSince,omitempty"`
}

// FromBatch is cj as the decision reads it: apiVersion batch/v1, its
// annotations' extensions in the spec and its state in the status. The
// errors name the annotations that are not valid; the CronJob is then not
// to be run.
func FromBatch(cj *batchv1.CronJob) (*cronapi.CronJob, field.ErrorList) {
	c := &cronapi.CronJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: APIVersion, Kind: cronapi.Kind},
		ObjectMeta: *cj.ObjectMeta.DeepCopy(),
		Spec:       cronapi.CronJobSpec{CronJobSpec: *cj.Spec.DeepCopy()},
		Status:     cronapi.CronJobStatus{CronJobStatus: *cj.Status.DeepCopy()},
	}
	return c, Extend(c)
}

// Extend applies the annotations of a batch/v1 CronJob to c in place.
func Extend(c *cronapi.CronJob) field.ErrorList {
	var errs field.ErrorList
	for key := range c.Annotations {
		if strings.HasPrefix(key, Prefix) && !slices.Contains(annotations, key) {
			errs = append(errs, field.NotSupported(path(key), key, annotations))
		}
	}
	spec := &c.Spec
	if v, ok := c.Annotations[ConcurrencyPolicyAnnotation]; ok {
		errs = append(errs, validation.ValidateConcurrencyPolicy(batchv1.ConcurrencyPolicy(v), path(ConcurrencyPolicyAnnotation))...)
		spec.ConcurrencyPolicy = batchv1.ConcurrencyPolicy(v)
	}
	catchUp := cronapi.CatchUpPolicy{Policy: c.Annotations[CatchUpPolicyAnnotation]}
	catchUp.WindowSeconds = parseInt[int64](c.Annotations, CatchUpWindowAnnotation, 64, &errs)
	catchUp.MaxRuns = parseInt[int32](c.Annotations, CatchUpMaxRunsAnnotation, 32, &errs)
	if catchUp != (cronapi.CatchUpPolicy{}) {
		spec.CatchUp = &catchUp
	}
	spec.JitterSeconds = parseInt[int32](c.Annotations, JitterAnnotation, 32, &errs)
	dst := cronapi.DaylightSavingPolicy{SkippedHour: c.Annotations[SkippedHourAnnotation], RepeatedHour: c.Annotations[RepeatedHourAnnotation]}
	if dst != (cronapi.DaylightSavingPolicy{}) {
		spec.DaylightSaving = &dst
	}
	for _, err := range validation.ValidateExtensions(spec, field.NewPath("spec")) {
		err.Field = extensionAnnotations[err.Field].String()
		errs = append(errs, err)
	}
	if v, ok := c.Annotations[NoRetroactiveRunsAnnotation]; ok && v != "true" && v != "false" {
		errs = append(errs, field.NotSupported(path(NoRetroactiveRunsAnnotation), v, []string{"true", "false"}))
	}
	state, err := stateOf(c.Annotations)
	if err != nil {
		errs = append(errs, field.Invalid(path(StateAnnotation), c.Annotations[StateAnnotation], err.Error()))
	}
	c.Status.PendingRuns = state.PendingRuns
	c.Status.ObservedSchedule = state.ObservedSchedule
	c.Status.ObservedScheduleSince = state.ObservedScheduleSince
	return errs
}

// extensionAnnotations maps ValidateExtensions' field paths to the
// annotations that hold them.
var extensionAnnotations = map[string]*field.Path{
	"spec.catchUp.policy":              path(CatchUpPolicyAnnotation),
	"spec.catchUp.windowSeconds":       path(CatchUpWindowAnnotation),
	"spec.catchUp.maxRuns":             path(CatchUpMaxRunsAnnotation),
	"spec.jitterSeconds":               path(JitterAnnotation),
	"spec.daylightSaving.skippedHour":  path(SkippedHourAnnotation),
	"spec.daylightSaving.repeatedHour": path(RepeatedHourAnnotation),
}

func path(annotation string) *field.Path {
	return field.NewPath("metadata", "annotations").Key(annotation)
}

// parseInt reads an integer annotation of T's bits; absent is nil.
func parseInt[T int32 | int64](annotations map[string]string, key string, bits int, errs *field.ErrorList) *T {
	v, ok := annotations[key]
	if !ok {
		return nil
	}
	n, err := strconv.ParseInt(v, 10, bits)
	if err != nil {
		*errs = append(*errs, field.Invalid(path(key), v, fmt.Sprintf("must be a %d-bit integer", bits)))
		return nil
	}
	out := T(n)
	return &out
}

// stateOf decodes the state annotation; absent is the zero State.
func stateOf(annotations map[string]string) (State, error) {
	var s State
	v, ok := annotations[StateAnnotation]
	if !ok {
		return s, nil
	}
	dec := json.NewDecoder(strings.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return State{}, fmt.Errorf("not the cron service's state: %v", err)
	}
	if len(s.PendingRuns) > cronapi.MaxMaxRuns {
		return State{}, fmt.Errorf("more than %d pending runs", cronapi.MaxMaxRuns)
	}
	return s, nil
}

// Stored is st as a batch/v1 CronJob stores it and reads it back: no next
// scheduled time (batch/v1 has no room for it, and nothing reads it), and
// the observed schedule only when the CronJob asks for no retroactive runs:
// without it, a batch/v1 CronJob runs after an edit as the reference does.
// A status whose stored form is unchanged needs no write.
func Stored(c *cronapi.CronJob, st cronapi.CronJobStatus) cronapi.CronJobStatus {
	out := *st.DeepCopy()
	out.NextScheduleTime = nil
	if c.Annotations[NoRetroactiveRunsAnnotation] != "true" {
		out.ObservedSchedule, out.ObservedScheduleSince = "", nil
	}
	return out
}

// Split is what a batch/v1 CronJob stores of st (see Stored): its status,
// and the state annotation's value ("" for none).
func Split(c *cronapi.CronJob, st cronapi.CronJobStatus) (batchv1.CronJobStatus, string) {
	st = Stored(c, st)
	state := State{PendingRuns: st.PendingRuns, ObservedSchedule: st.ObservedSchedule, ObservedScheduleSince: st.ObservedScheduleSince}
	if state.PendingRuns == nil && state.ObservedSchedule == "" && state.ObservedScheduleSince == nil {
		return *st.CronJobStatus.DeepCopy(), ""
	}
	encoded, err := json.Marshal(state)
	if err != nil {
		panic(fmt.Sprintf("encoding a CronJob's state: %v", err)) // plain data: cannot fail
	}
	return *st.CronJobStatus.DeepCopy(), string(encoded)
}

// ToBatch is the batch/v1 CronJob to write back for c with status st: c's
// metadata with the state annotation of st, and st's batch/v1 status. Its
// spec is empty: a status update keeps the stored one (and c's spec holds
// the extensions, which batch/v1 would refuse).
func ToBatch(c *cronapi.CronJob, st cronapi.CronJobStatus) *batchv1.CronJob {
	status, state := Split(c, st)
	out := &batchv1.CronJob{ObjectMeta: *c.ObjectMeta.DeepCopy(), Status: status}
	if state == "" {
		delete(out.Annotations, StateAnnotation)
	} else {
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[StateAnnotation] = state
	}
	return out
}
