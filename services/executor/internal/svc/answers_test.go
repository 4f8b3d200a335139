package svc

import (
	"runtime"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
)

// A Job of the informer cache is converted once for all the answers that
// hold it, again once the informer holds a new object for it, and its answer
// goes with its object.
func TestCachedJobsAreConvertedOncePerObject(t *testing.T) {
	var a answers
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

// Calls answering from the same objects at once get one answer each object.
func TestCachedJobsAreSharedBetweenConcurrentCalls(t *testing.T) {
	var a answers
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
