package svc

import (
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
