package svc

import (
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
)

// A Job of the informer cache is converted once for all the answers that
// hold it, again once the informer holds a new object for it, and its answer
// goes with its object.
func TestCachedJobsAreConvertedOncePerObject(t *testing.T) {
	var a answerCache
	conversions := 0
	convert := func(j *batchv1.Job) (*jobplanev1.Job, error) {
		conversions++
		return &jobplanev1.Job{Metadata: &jobplanev1.ObjectMeta{Name: j.Name, ResourceVersion: j.ResourceVersion}}, nil
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", ResourceVersion: "1"}}
	first, _ := a.job(job, convert)
	again, _ := a.job(job, convert)
	if first != again || conversions != 1 {
		t.Fatalf("the same object converted %d times", conversions)
	}
	updated := job.DeepCopy()
	updated.ResourceVersion = "2"
	if out, _ := a.job(updated, convert); out.GetMetadata().GetResourceVersion() != "2" || conversions != 2 {
		t.Fatalf("the new object answered %v after %d conversions", out, conversions)
	}
	runtime.KeepAlive(job)
	job, updated = nil, nil
	for deadline := time.Now().Add(10 * time.Second); a.size() > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d answers kept after their objects were collected", a.size())
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// The answer of a real Job holds nothing of its object: it goes once the
// object is collected.
func TestTheAnswerOfAJobDoesNotKeepItsObject(t *testing.T) {
	s := &ExecutorService{log: slog.Default()}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns", UID: "uid", ResourceVersion: "1", Labels: map[string]string{"a": "b"}},
		Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](4), ManagedBy: ptr.To(DefaultManagedBy),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}},
		Status: batchv1.JobStatus{Active: 2, Conditions: []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionFalse}}},
	}
	out, err := s.cachedJobToProto(job)
	if err != nil || out.GetMetadata().GetName() != "j" {
		t.Fatalf("answered %v, %v", out, err)
	}
	job = nil
	for deadline := time.Now().Add(10 * time.Second); s.cached.size() > 0; {
		if time.Now().After(deadline) {
			t.Fatal("the answer is kept: it holds a pointer into its Job")
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	runtime.KeepAlive(out)
}

// At most maxCachedAnswers are kept; the Jobs beyond are answered all the
// same.
func TestTheAnswerCacheIsBounded(t *testing.T) {
	var a answerCache
	jobs := make([]*batchv1.Job, maxCachedAnswers+10)
	for i := range jobs {
		jobs[i] = &batchv1.Job{}
		if out, err := a.job(jobs[i], func(*batchv1.Job) (*jobplanev1.Job, error) { return &jobplanev1.Job{}, nil }); out == nil || err != nil {
			t.Fatalf("Job %d answered %v, %v", i, out, err)
		}
	}
	if a.size() != maxCachedAnswers {
		t.Errorf("%d answers kept, want %d", a.size(), maxCachedAnswers)
	}
	runtime.KeepAlive(jobs)
}

// A tenant reading more Jobs than the cache holds cannot keep another's out:
// once the cache is full, a namespace holding less than its share takes
// answers from the namespace holding the most, and the one holding the most
// takes none back.
func TestTheAnswerCacheIsSharedBetweenNamespaces(t *testing.T) {
	var a answerCache
	conversions := map[string]int{}
	convert := func(j *batchv1.Job) (*jobplanev1.Job, error) {
		conversions[j.Namespace]++
		return &jobplanev1.Job{}, nil
	}
	jobsOf := func(ns string, n int) []*batchv1.Job {
		jobs := make([]*batchv1.Job, n)
		for i := range jobs {
			jobs[i] = &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprint(i)}}
		}
		return jobs
	}
	read := func(jobs []*batchv1.Job) {
		for _, j := range jobs {
			if _, err := a.job(j, convert); err != nil {
				t.Fatal(err)
			}
		}
	}
	flood, quiet := jobsOf("flood", maxCachedAnswers+500), jobsOf("quiet", 20)
	read(flood)
	read(quiet)
	read(flood) // the flood again: above its share, it takes nothing back
	clear(conversions)
	read(quiet)
	if conversions["quiet"] != 0 {
		t.Errorf("the quiet namespace's Jobs converted %d times more after the flood read again", conversions["quiet"])
	}
	if a.size() != maxCachedAnswers || len(a.byNamespace["quiet"]) != 20 {
		t.Errorf("%d answers kept, %d of them the quiet namespace's; want %d and 20", a.size(), len(a.byNamespace["quiet"]), maxCachedAnswers)
	}
	// Many namespaces: each holds at least its share of what it read.
	var many [][]*batchv1.Job
	for i := range 8 {
		many = append(many, jobsOf(fmt.Sprint("ns-", i), maxCachedAnswers/4))
		read(many[i])
	}
	share := maxCachedAnswers / len(a.byNamespace)
	for ns, keys := range a.byNamespace {
		if ns != "quiet" && len(keys) < share-1 {
			t.Errorf("namespace %s holds %d answers, under its share %d", ns, len(keys), share)
		}
	}
	runtime.KeepAlive(flood)
	runtime.KeepAlive(quiet)
	runtime.KeepAlive(many)
}

// Calls answering from the same objects at once get one answer each object.
func TestCachedJobsAreSharedBetweenConcurrentCalls(t *testing.T) {
	var a answerCache
	jobs := make([]*batchv1.Job, 50)
	for i := range jobs {
		jobs[i] = &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", ResourceVersion: "1"}}
	}
	got := make([][]*jobplanev1.Job, 8)
	var wg sync.WaitGroup
	for c := range got {
		wg.Go(func() {
			for _, j := range jobs {
				out, err := a.job(j, func(j *batchv1.Job) (*jobplanev1.Job, error) { return &jobplanev1.Job{}, nil })
				if err != nil {
					t.Error(err)
				}
				got[c] = append(got[c], out)
			}
		})
	}
	wg.Wait()
	for c := range got {
		for i := range jobs {
			if got[c][i] != got[0][i] {
				t.Fatalf("call %d got another answer for Job %d than call 0", c, i)
			}
		}
	}
}
