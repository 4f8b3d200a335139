package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/lib/kubeconv"
)

// Pod fates (hack/kwok/stages/pod-fate.yaml): template annotations telling
// kwok how the Jobs' pods end.
const (
	fateAfter    = "fate.jobplane.dev/after"
	fateRun      = "fate.jobplane.dev/run"
	fateExitCode = "fate.jobplane.dev/exit-code"
)

// everyMinute is the schedule of every CronJob here: schedules are minutes
// (a denser one would collide on the minute-resolution Job names, as in the
// reference).
const everyMinute = "* * * * *"

// jobTemplate is a Job template whose pods end as the fate annotations
// given as key, value pairs say, with backoffLimit 0 so a failing pod fails
// its Job at once.
func jobTemplate(fate ...string) batchv1.JobTemplateSpec {
	annotations := map[string]string{}
	for i := 0; i+1 < len(fate); i += 2 {
		annotations[fate[i]] = fate[i+1]
	}
	return batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
		BackoffLimit: ptr.To[int32](0),
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: annotations},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
			},
		},
	}}
}

// succeeding is the template of pods succeeding after about a second.
func succeeding() batchv1.JobTemplateSpec { return jobTemplate(fateAfter, "1s") }

// createByRPC creates a jobplane CronJob with the CreateCronJob RPC and
// returns it as stored.
func createByRPC(t *testing.T, client jobplanev1.CronServiceClient, c *cronapi.CronJob) *cronapi.CronJob {
	t.Helper()
	req, err := kubeconv.CronJobFromKube(c)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.CreateCronJob(context.Background(), &jobplanev1.CreateCronJobRequest{CronJob: req})
	if err != nil {
		t.Fatalf("CreateCronJob %s/%s: %v", c.Namespace, c.Name, err)
	}
	out, err := kubeconv.CronJobToKube(resp.GetCronJob())
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// cronJob is a jobplane CronJob of the schedule every minute.
func cronJob(namespace, name string, spec batchv1.CronJobSpec) *cronapi.CronJob {
	if spec.Schedule == "" {
		spec.Schedule = everyMinute
	}
	return &cronapi.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       cronapi.CronJobSpec{CronJobSpec: spec},
	}
}

// getCronJob reads a jobplane CronJob directly.
func getCronJob(ctx context.Context, e *Env, namespace, name string) (*cronapi.CronJob, error) {
	u, err := e.CronJobs.Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return cronapi.FromUnstructured(u)
}

// firstRun is the first scheduled time of a CronJob of the schedule every
// minute created at created.
func firstRun(created time.Time) time.Time {
	return created.Truncate(time.Minute).Add(time.Minute)
}

// jobName is the name of the run of cronJob scheduled at t.
func jobName(cronJob string, t time.Time) string {
	return fmt.Sprintf("%s-%d", cronJob, t.Unix()/60)
}

// awayFromBoundary waits, if needed, until the time is at least lead after a
// minute boundary and at least lead before the next one, so that objects
// created next, at about the same time, share their first scheduled time
// and that time is not too close.
func awayFromBoundary(t *testing.T, lead time.Duration) {
	t.Helper()
	now := time.Now()
	sinceBoundary := now.Sub(now.Truncate(time.Minute))
	switch {
	case sinceBoundary < lead:
		time.Sleep(lead - sinceBoundary)
	case sinceBoundary > time.Minute-lead:
		time.Sleep(time.Minute - sinceBoundary + lead)
	}
}

// sleepUntil sleeps until at, or until ctx ends.
func sleepUntil(ctx context.Context, at time.Time) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(at)):
	}
}

// poll polls cond every half second until it holds or timeout passes.
func poll(ctx context.Context, timeout time.Duration, cond func(context.Context) bool) error {
	return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		return cond(ctx), nil
	})
}

// terminal is a Job's Complete or Failed condition as "Type/Reason", or
// "Running".
func terminal(j *batchv1.Job) string {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return string(c.Type) + "/" + c.Reason
		}
	}
	return "Running"
}

// jobsOf lists the Jobs of a namespace that are not being deleted, by name.
func jobsOf(ctx context.Context, e *Env, namespace string) (map[string]*batchv1.Job, error) {
	list, err := e.Cluster.Client.BatchV1().Jobs(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]*batchv1.Job{}
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp == nil {
			out[list.Items[i].Name] = &list.Items[i]
		}
	}
	return out, nil
}

// scheduledTime is a Job's batch.kubernetes.io/cronjob-scheduled-timestamp.
func scheduledTime(j *batchv1.Job) (time.Time, error) {
	return time.Parse(time.RFC3339, j.Annotations[batchv1.CronJobScheduledTimestampAnnotation])
}

// cronJobEvents are the events recorded on the CronJob name of namespace,
// any API group.
func cronJobEvents(ctx context.Context, e *Env, namespace, name string) ([]corev1.Event, error) {
	list, err := e.Cluster.Client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []corev1.Event
	for _, ev := range list.Items {
		if ev.InvolvedObject.Kind == "CronJob" && ev.InvolvedObject.Name == name {
			out = append(out, ev)
		}
	}
	return out, nil
}

// findEvent is the first event of that reason whose message contains
// substring, or nil.
func findEvent(events []corev1.Event, reason, substring string) *corev1.Event {
	for i := range events {
		if events[i].Reason == reason && strings.Contains(events[i].Message, substring) {
			return &events[i]
		}
	}
	return nil
}

// rfc1123 is how the reference's events write a scheduled time.
func rfc1123(t time.Time) string { return t.UTC().Format(time.RFC1123Z) }

// metric reads a counter or gauge without labels from a process's /metrics.
func metric(ctx context.Context, metricsAddr, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+metricsAddr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if value, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(value), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no metric %s", name)
}

// jobAppearance is one Job as a watch of its namespace first saw it.
type jobAppearance struct {
	Name      string
	UID       string
	CronJob   string // the controller's name
	Scheduled string // the scheduled-timestamp annotation
	Trigger   string // the trigger annotation, "" for Schedule
}

// jobWatch records, in order, every Job that appears in a namespace while
// the test runs, from an informer started before the test's CronJobs: the
// order of the additions is the order of the creations.
type jobWatch struct {
	mu   sync.Mutex
	seen []jobAppearance
}

// watchJobs starts a jobWatch of namespace until t ends, and waits until it
// has listed the namespace.
func watchJobs(t *testing.T, e *Env, namespace string) *jobWatch {
	t.Helper()
	w := &jobWatch{}
	factory := informers.NewSharedInformerFactoryWithOptions(e.Cluster.Client, 0, informers.WithNamespace(namespace))
	informer := factory.Batch().V1().Jobs().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		j, ok := obj.(*batchv1.Job)
		if !ok {
			return
		}
		a := jobAppearance{Name: j.Name, UID: string(j.UID), Scheduled: j.Annotations[batchv1.CronJobScheduledTimestampAnnotation], Trigger: j.Annotations[cronapi.TriggerAnnotation]}
		if ref := metav1.GetControllerOf(j); ref != nil {
			a.CronJob = ref.Name
		}
		w.mu.Lock()
		w.seen = append(w.seen, a)
		w.mu.Unlock()
	}}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() {
		close(stop)
		factory.Shutdown()
	})
	if !cache.WaitForCacheSync(stop, informer.HasSynced) {
		t.Fatal("the Job watch did not sync")
	}
	// Before the watch stops (cleanups run last registered first).
	t.Cleanup(func() { w.checkNoDuplicates(t) })
	return w
}

// appearances are the Jobs seen so far, in order.
func (w *jobWatch) appearances() []jobAppearance {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.seen)
}

// of are the Jobs of one CronJob seen so far, in order.
func (w *jobWatch) of(cronJob string) []jobAppearance {
	var out []jobAppearance
	for _, a := range w.appearances() {
		if a.CronJob == cronJob {
			out = append(out, a)
		}
	}
	return out
}

// duplicates lists every scheduled time (of a run not triggered by hand)
// for which two Jobs of one CronJob appeared.
func (w *jobWatch) duplicates() []string {
	byTime := map[string][]string{}
	var keys []string
	for _, a := range w.appearances() {
		if a.CronJob == "" || a.Trigger == cronapi.TriggerManual {
			continue
		}
		key := a.CronJob + " at " + a.Scheduled
		if _, ok := byTime[key]; !ok {
			keys = append(keys, key)
		}
		byTime[key] = append(byTime[key], a.Name+"("+a.UID+")")
	}
	var out []string
	for _, key := range keys {
		if len(byTime[key]) > 1 {
			out = append(out, fmt.Sprintf("%s: %v", key, byTime[key]))
		}
	}
	return out
}

// checkNoDuplicates fails the test for every scheduled time
// two Jobs appeared for.
func (w *jobWatch) checkNoDuplicates(t *testing.T) {
	t.Helper()
	for _, d := range w.duplicates() {
		t.Errorf("two Jobs for one scheduled time: %s", d)
	}
}
