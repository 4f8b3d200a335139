package cronapi

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func sample() *CronJob {
	now := metav1.NewTime(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	return &CronJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: APIVersion, Kind: Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "default", UID: "u1", CreationTimestamp: now},
		Spec: CronJobSpec{
			CronJobSpec: batchv1.CronJobSpec{
				Schedule:          "*/5 * * * *",
				TimeZone:          ptr.To("Europe/Paris"),
				ConcurrencyPolicy: BufferAll,
				JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
					Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
				}}},
			},
			CatchUp:        &CatchUpPolicy{Policy: CatchUpAll, WindowSeconds: ptr.To[int64](600), MaxRuns: ptr.To[int32](5)},
			JitterSeconds:  ptr.To[int32](30),
			DaylightSaving: &DaylightSavingPolicy{SkippedHour: SkippedHourRunAtNextValidTime, RepeatedHour: RepeatedHourOnce},
		},
		Status: CronJobStatus{
			CronJobStatus:    batchv1.CronJobStatus{Active: []corev1.ObjectReference{{Kind: "Job", Name: "nightly-1"}}, LastScheduleTime: &now},
			PendingRuns:      []PendingRun{{ScheduledTime: now, Trigger: TriggerSchedule}},
			NextScheduleTime: &now,
		},
	}
}

func TestJSONIsBatchV1PlusTheExtensions(t *testing.T) {
	data, err := json.Marshal(sample())
	if err != nil {
		t.Fatal(err)
	}
	var raw struct{ Spec, Status map[string]any }
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"schedule", "timeZone", "concurrencyPolicy", "jobTemplate", "catchUp", "jitterSeconds", "daylightSaving"} {
		if _, ok := raw.Spec[k]; !ok {
			t.Errorf("spec.%s missing from %s", k, data)
		}
	}
	for _, k := range []string{"active", "lastScheduleTime", "pendingRuns", "nextScheduleTime"} {
		if _, ok := raw.Status[k]; !ok {
			t.Errorf("status.%s missing from %s", k, data)
		}
	}
}

func TestUnstructuredRoundTrip(t *testing.T) {
	in := sample()
	u, err := ToUnstructured(in)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructuredString(u.Object, "spec", "catchUp", "policy"); got != CatchUpAll {
		t.Errorf("spec.catchUp.policy = %q in %v", got, u.Object)
	}
	out, err := FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, out); diff != "" {
		t.Errorf("round trip (-in +out):\n%s", diff)
	}
}

func TestDeepCopyIsDeep(t *testing.T) {
	in := sample()
	out := in.DeepCopy()
	*out.Spec.CatchUp.MaxRuns = 9
	out.Status.PendingRuns[0].Trigger = TriggerManual
	out.Status.Active[0].Name = "other"
	if diff := cmp.Diff(sample(), in); diff != "" {
		t.Errorf("changing the copy changed the original:\n%s", diff)
	}
}

func unstructuredString(obj map[string]any, fields ...string) (string, bool, error) {
	var cur any = obj
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false, nil
		}
		cur = m[f]
	}
	s, ok := cur.(string)
	return s, ok, nil
}
