package gang

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha2 "k8s.io/api/scheduling/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

func indexedJob(parallelism, completions int32) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job", UID: "0b7c1f3e-5d2a-4c55-9f0e-2f6d8c1a9b77"},
		Spec: batchv1.JobSpec{Parallelism: ptr.To(parallelism), Completions: ptr.To(completions),
			CompletionMode: ptr.To(batchv1.IndexedCompletion)},
	}
}

func TestEligible(t *testing.T) {
	grouped := indexedJob(4, 4)
	grouped.Spec.Template.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("external")}
	nonIndexed := indexedJob(4, 4)
	nonIndexed.Spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
	for name, tc := range map[string]struct {
		job  *batchv1.Job
		want bool
	}{
		"indexed, parallelism = completions > 1": {indexedJob(4, 4), true},
		"parallelism 1":                          {indexedJob(1, 1), false},
		"completions != parallelism":             {indexedJob(2, 5), false},
		"non-indexed":                            {nonIndexed, false},
		"a scheduling group already set":         {grouped, false},
		"no completions":                         {&batchv1.Job{Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](3), CompletionMode: ptr.To(batchv1.IndexedCompletion)}}, false},
	} {
		if got := Eligible(tc.job); got != tc.want {
			t.Errorf("%s: Eligible = %t, want %t", name, got, tc.want)
		}
	}
}

// The reference's names: the hash of the Job's UID (hack/refbench computed
// it with the reference's DeepHashObject), truncation that keeps the names
// within a DNS subdomain.
func TestNamesAreTheReferences(t *testing.T) {
	if got := WorkloadName(indexedJob(2, 2)); got != "job-74fdcd475f" {
		t.Errorf("WorkloadName = %q, want job-74fdcd475f", got)
	}
	long := indexedJob(2, 2)
	long.Name = strings.Repeat("j", 253)
	if got := WorkloadName(long); len(got) > validation.DNS1123SubdomainMaxLength || !strings.HasSuffix(got, "-74fdcd475f") {
		t.Errorf("WorkloadName of a long Job = %q (%d)", got, len(got))
	}
	for _, tc := range []struct{ workload, template string }{
		{"w", "t"}, {strings.Repeat("w", 240), "t"}, {"w", strings.Repeat("t", 240)}, {strings.Repeat("w", 200), strings.Repeat("t", 200)},
	} {
		got := PodGroupName(tc.workload, tc.template)
		if len(got) > validation.DNS1123SubdomainMaxLength || !strings.HasPrefix(got, tc.workload[:min(len(tc.workload), 100)]) {
			t.Errorf("PodGroupName(%d, %d chars) = %q (%d)", len(tc.workload), len(tc.template), got, len(got))
		}
	}
}

// objects is Objects over a fake clientset whose caches hold objs.
func objects(t *testing.T, objs ...*schedulingv1alpha2.Workload) (*Objects, *fake.Clientset, *record.FakeRecorder) {
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	recorder := record.NewFakeRecorder(10)
	o, err := New(client, factory, recorder, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for _, wl := range objs {
		if err := o.workloads.Add(wl); err != nil {
			t.Fatal(err)
		}
	}
	return o, client, recorder
}

func TestEnsureCreatesForANewJobOnly(t *testing.T) {
	ctx := context.Background()
	o, client, recorder := objects(t)
	job := indexedJob(3, 3)
	pg, err := o.Ensure(ctx, job, nil)
	if err != nil || pg == nil {
		t.Fatalf("Ensure = %v, %v", pg, err)
	}
	wl, err := client.SchedulingV1alpha2().Workloads("ns").Get(ctx, WorkloadName(job), metav1.GetOptions{})
	if err != nil || !metav1.IsControlledBy(wl, job) || wl.Spec.ControllerRef.Name != "job" || wl.Spec.PodGroupTemplates[0].Name != "job-pgt-0" {
		t.Fatalf("Workload %+v, %v", wl, err)
	}
	if pg.Name != PodGroupName(wl.Name, "job-pgt-0") || pg.Spec.SchedulingPolicy.Gang.MinCount != 3 {
		t.Errorf("PodGroup %+v", pg)
	}
	if e := <-recorder.Events; e != "Normal WorkloadCreated Created Workload "+wl.Name+" for Job job" {
		t.Errorf("event %q", e)
	}

	started := map[string]func(*batchv1.Job){
		"start time":     func(j *batchv1.Job) { j.Status.StartTime = &metav1.Time{} },
		"pods succeeded": func(j *batchv1.Job) { j.Status.Succeeded = 1 },
		"pods failed":    func(j *batchv1.Job) { j.Status.Failed = 1 },
		"suspended once": func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionFalse}}
		},
	}
	for name, change := range started {
		o, client, _ := objects(t)
		job := indexedJob(3, 3)
		change(job)
		if pg, err := o.Ensure(ctx, job, nil); pg != nil || err != nil {
			t.Errorf("%s: Ensure = %v, %v; want none", name, pg, err)
		}
		if len(client.Actions()) != 0 {
			t.Errorf("%s: %v", name, client.Actions())
		}
	}
	if pg, err := o.Ensure(ctx, indexedJob(3, 3), []*corev1.Pod{{}}); pg != nil || err != nil {
		t.Errorf("with pods: Ensure = %v, %v; want none", pg, err)
	}
}

// A Workload that names the Job but is not controlled by it (another
// tenant's, or a leftover of a Job of the same name) is never used nor
// changed; neither are several.
func TestEnsureLeavesWorkloadsNotTheJobs(t *testing.T) {
	job := indexedJob(3, 3)
	naming := func(name string, owners ...metav1.OwnerReference) *schedulingv1alpha2.Workload {
		return &schedulingv1alpha2.Workload{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, OwnerReferences: owners},
			Spec: schedulingv1alpha2.WorkloadSpec{ControllerRef: &schedulingv1alpha2.TypedLocalObjectReference{APIGroup: "batch", Kind: "Job", Name: "job"},
				PodGroupTemplates: []schedulingv1alpha2.PodGroupTemplate{{Name: "t"}}},
		}
	}
	ours := *metav1.NewControllerRef(job, jobKind)
	inOtherNamespace := naming("elsewhere", ours)
	inOtherNamespace.Namespace = "other"
	for name, existing := range map[string][]*schedulingv1alpha2.Workload{
		"not owned":      {naming("foreign")},
		"an older Job's": {naming("old", metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "job", UID: "older", Controller: ptr.To(true)})},
		"two of them":    {naming("a", ours), naming("b", ours)},
		"two templates": {func() *schedulingv1alpha2.Workload {
			w := naming("a", ours)
			w.Spec.PodGroupTemplates = append(w.Spec.PodGroupTemplates, w.Spec.PodGroupTemplates[0])
			return w
		}()},
	} {
		o, client, _ := objects(t, existing...)
		if pg, err := o.Ensure(context.Background(), job, nil); pg != nil || err != nil {
			t.Errorf("%s: Ensure = %v, %v; want none", name, pg, err)
		}
		if len(client.Actions()) != 0 {
			t.Errorf("%s: wrote %v", name, client.Actions())
		}
	}
	// Another namespace's Workload naming a Job of the same name is not
	// this Job's: this one gets its own.
	o, _, _ := objects(t, inOtherNamespace)
	if pg, err := o.Ensure(context.Background(), job, nil); pg == nil || err != nil {
		t.Errorf("beside another namespace's Workload: Ensure = %v, %v", pg, err)
	}
}

func TestJoin(t *testing.T) {
	pod := &corev1.Pod{}
	Join(pod, nil)
	if pod.Spec.SchedulingGroup != nil {
		t.Fatal("joined no PodGroup")
	}
	Join(pod, &schedulingv1alpha2.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "pg"}})
	if ptr.Deref(pod.Spec.SchedulingGroup.PodGroupName, "") != "pg" || len(pod.OwnerReferences) != 0 {
		t.Fatalf("pod after Join: %+v", pod)
	}
}

// Without the alpha API the executor refuses to start, saying what to turn
// on, rather than waiting forever for caches that cannot sync.
func TestServed(t *testing.T) {
	client := fake.NewClientset()
	discovery := client.Discovery().(*fakediscovery.FakeDiscovery)
	if err := Served(discovery); err == nil || !strings.Contains(err.Error(), "GenericWorkload") {
		t.Errorf("without the API: %v", err)
	}
	discovery.Resources = []*metav1.APIResourceList{{GroupVersion: "scheduling.k8s.io/v1alpha2", APIResources: []metav1.APIResource{{Name: "workloads"}}}}
	if err := Served(discovery); err == nil || !strings.Contains(err.Error(), "podgroups") {
		t.Errorf("without podgroups: %v", err)
	}
	discovery.Resources[0].APIResources = append(discovery.Resources[0].APIResources, metav1.APIResource{Name: "podgroups"})
	if err := Served(discovery); err != nil {
		t.Errorf("with both: %v", err)
	}
}
