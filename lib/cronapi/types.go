// Package cronapi is jobplane's CronJob resource (cronjobs.jobplane.dev/v1)
// as Go types: batch/v1 CronJob with the extensions of cronjob.proto. The
// custom resource's JSON is batch/v1's plus the extension fields, so a
// batch/v1 CronJob's JSON with apiVersion and kind changed is a valid one.
package cronapi

import (
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The resource's coordinates.
const (
	Group      = "jobplane.dev"
	Version    = "v1"
	Kind       = "CronJob"
	Resource   = "cronjobs"
	APIVersion = Group + "/" + Version
)

// GroupVersionResource is the CronJob resource, for dynamic clients.
var GroupVersionResource = schema.GroupVersionResource{Group: Group, Version: Version, Resource: Resource}

// GroupVersionKind is the CronJob kind, for owner references.
var GroupVersionKind = schema.GroupVersionKind{Group: Group, Version: Version, Kind: Kind}

// Concurrency policies beyond batch/v1's Allow, Forbid and Replace.
const (
	// BufferOne keeps the latest due run and starts it when no Job is active.
	BufferOne batchv1.ConcurrencyPolicy = "BufferOne"
	// BufferAll queues every due run and starts them one at a time.
	BufferAll batchv1.ConcurrencyPolicy = "BufferAll"
)

// Catch-up policies.
const (
	CatchUpLatest = "Latest"
	CatchUpSkip   = "Skip"
	CatchUpAll    = "All"
)

// Daylight-saving policies.
const (
	SkippedHourSkip               = "Skip"
	SkippedHourRunAtNextValidTime = "RunAtNextValidTime"
	RepeatedHourTwice             = "Twice"
	RepeatedHourOnce              = "Once"
)

// Triggers of a run: why a Job instance was emitted.
const (
	TriggerSchedule = "Schedule"
	TriggerCatchUp  = "CatchUp"
	TriggerManual   = "Manual"
	TriggerBackfill = "Backfill"
)

// Annotations jobplane adds to the Jobs it emits, beside the reference's
// batch.kubernetes.io/cronjob-scheduled-timestamp.
const (
	// TriggerAnnotation holds the run's trigger.
	TriggerAnnotation = "cron.jobplane.dev/trigger"
)

// Defaults of the extensions.
const (
	DefaultMaxRuns = 100
	MaxMaxRuns     = 1000
)

// CronJob is a jobplane CronJob.
type CronJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CronJobSpec   `json:"spec,omitempty"`
	Status CronJobStatus `json:"status,omitempty"`
}

// CronJobSpec is batch/v1 CronJobSpec plus the extensions.
type CronJobSpec struct {
	batchv1.CronJobSpec `json:",inline"`

	CatchUp        *CatchUpPolicy        `json:"catchUp,omitempty"`
	JitterSeconds  *int32                `json:"jitterSeconds,omitempty"`
	DaylightSaving *DaylightSavingPolicy `json:"daylightSaving,omitempty"`
}

// CatchUpPolicy says which missed runs still run.
type CatchUpPolicy struct {
	Policy        string `json:"policy,omitempty"`
	WindowSeconds *int64 `json:"windowSeconds,omitempty"`
	MaxRuns       *int32 `json:"maxRuns,omitempty"`
}

// DaylightSavingPolicy says what happens to runs in skipped or repeated hours.
type DaylightSavingPolicy struct {
	SkippedHour  string `json:"skippedHour,omitempty"`
	RepeatedHour string `json:"repeatedHour,omitempty"`
}

// CronJobStatus is batch/v1 CronJobStatus plus the extensions' state.
type CronJobStatus struct {
	batchv1.CronJobStatus `json:",inline"`

	PendingRuns      []PendingRun `json:"pendingRuns,omitempty"`
	NextScheduleTime *metav1.Time `json:"nextScheduleTime,omitempty"`
	// ObservedSchedule and ObservedScheduleSince detect schedule changes.
	ObservedSchedule      string       `json:"observedSchedule,omitempty"`
	ObservedScheduleSince *metav1.Time `json:"observedScheduleSince,omitempty"`
}

// PendingRun is a run waiting for no Job to be active.
type PendingRun struct {
	ScheduledTime metav1.Time `json:"scheduledTime"`
	Trigger       string      `json:"trigger"`
}

// CronJobList is a page of CronJobs.
type CronJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []CronJob `json:"items"`
}

// DeepCopy copies a CronJob.
func (c *CronJob) DeepCopy() *CronJob {
	if c == nil {
		return nil
	}
	out := &CronJob{TypeMeta: c.TypeMeta}
	c.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	c.Spec.DeepCopyInto(&out.Spec)
	c.Status.DeepCopyInto(&out.Status)
	return out
}

// DeepCopyInto copies a spec.
func (s *CronJobSpec) DeepCopyInto(out *CronJobSpec) {
	s.CronJobSpec.DeepCopyInto(&out.CronJobSpec)
	if s.CatchUp != nil {
		c := *s.CatchUp
		if c.WindowSeconds != nil {
			w := *c.WindowSeconds
			c.WindowSeconds = &w
		}
		if c.MaxRuns != nil {
			m := *c.MaxRuns
			c.MaxRuns = &m
		}
		out.CatchUp = &c
	} else {
		out.CatchUp = nil
	}
	if s.JitterSeconds != nil {
		j := *s.JitterSeconds
		out.JitterSeconds = &j
	} else {
		out.JitterSeconds = nil
	}
	if s.DaylightSaving != nil {
		d := *s.DaylightSaving
		out.DaylightSaving = &d
	} else {
		out.DaylightSaving = nil
	}
}

// DeepCopyInto copies a status.
func (s *CronJobStatus) DeepCopyInto(out *CronJobStatus) {
	s.CronJobStatus.DeepCopyInto(&out.CronJobStatus)
	out.PendingRuns = nil
	for _, p := range s.PendingRuns {
		out.PendingRuns = append(out.PendingRuns, PendingRun{ScheduledTime: *p.ScheduledTime.DeepCopy(), Trigger: p.Trigger})
	}
	out.NextScheduleTime = s.NextScheduleTime.DeepCopy()
	out.ObservedSchedule = s.ObservedSchedule
	out.ObservedScheduleSince = s.ObservedScheduleSince.DeepCopy()
}

// IsBuffered says whether the policy queues runs in status.pendingRuns.
func IsBuffered(p batchv1.ConcurrencyPolicy) bool { return p == BufferOne || p == BufferAll }

// CatchUpPolicyOf is the CronJob's catch-up policy, Latest when unset.
func (c *CronJob) CatchUpPolicyOf() string {
	if c.Spec.CatchUp == nil || c.Spec.CatchUp.Policy == "" {
		return CatchUpLatest
	}
	return c.Spec.CatchUp.Policy
}

// MaxRuns is catch_up.max_runs, DefaultMaxRuns when unset.
func (c *CronJob) MaxRuns() int {
	if c.Spec.CatchUp == nil || c.Spec.CatchUp.MaxRuns == nil {
		return DefaultMaxRuns
	}
	return int(*c.Spec.CatchUp.MaxRuns)
}

// DeepCopy copies a spec (without it, batch/v1's would be promoted and drop
// the extensions).
func (s *CronJobSpec) DeepCopy() *CronJobSpec {
	if s == nil {
		return nil
	}
	out := &CronJobSpec{}
	s.DeepCopyInto(out)
	return out
}

// DeepCopy copies a status (without it, batch/v1's would be promoted and
// drop the extensions).
func (s *CronJobStatus) DeepCopy() *CronJobStatus {
	if s == nil {
		return nil
	}
	out := &CronJobStatus{}
	s.DeepCopyInto(out)
	return out
}
