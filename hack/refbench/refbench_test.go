package refbench

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"unsafe"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/kubernetes/pkg/controller/job"

	"github.com/jobplane/jobplane/services/planner/scalestate"
)

// syncHandlerOf is the controller's syncHandler, which NewController sets to
// its unexported syncJob: the one sync the planner's plan stands for.
func syncHandlerOf(jm *job.Controller) func(context.Context, string) error {
	return fieldOf[func(context.Context, string) error](jm, "syncHandler")
}

// fieldAt is the unexported field name of the controller jm points to,
// settable.
func fieldAt(jm any, name string) reflect.Value {
	f := reflect.ValueOf(jm).Elem().FieldByName(name)
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
}

// fieldOf is the unexported field name of the controller jm points to.
func fieldOf[T any](jm any, name string) T { return fieldAt(jm, name).Interface().(T) }

// setField sets the unexported field name of the controller jm points to
// to v.
func setField(jm any, name string, v any) {
	f := fieldAt(jm, name)
	f.Set(reflect.ValueOf(v).Convert(f.Type()))
}

// apiAnswersEverything makes every API call of the sync succeed at once and
// change nothing: creations, finalizer patches, the status update. The sync
// is timed without the API server.
func apiAnswersEverything(client *fake.Clientset) {
	client.PrependReactor("*", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if a, ok := action.(k8stesting.CreateAction); ok { // creations and updates alike
			return true, a.GetObject(), nil
		}
		if action.GetResource().Resource == "pods" {
			return true, &corev1.Pod{}, nil
		}
		return true, &batchv1.Job{}, nil
	})
}

// BenchmarkReferenceSyncJob times the reference's syncJob on scalestate's
// Job of 1,000 to 100,000 pods, before and after 1% or 10% of them
// succeeded: the Job and pods are in the informers' stores already (objects
// decoded), every API call the sync makes answers at once. Each iteration
// gets a new controller (new expectations, backoff and consistency stores)
// and new stores, untimed, so every sync sees the same state.
func BenchmarkReferenceSyncJob(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1000, 10_000, 100_000} {
		base := scalestate.New(n)
		for _, state := range []struct {
			name    string
			percent int
		}{{"steady", 0}, {"changed-1%", 1}, {"changed-10%", 10}} {
			s, _ := scalestate.Changed(base, n*state.percent/100)
			b.Run(fmt.Sprintf("pods=%d/state=%s", n, state.name), func(b *testing.B) {
				b.ReportAllocs()
				b.StopTimer()
				for range b.N {
					client := fake.NewClientset()
					apiAnswersEverything(client)
					factory := informers.NewSharedInformerFactory(client, 0)
					pods, jobs := factory.Core().V1().Pods(), factory.Batch().V1().Jobs()
					jm, err := job.NewController(ctx, client, pods, jobs, nil, nil)
					if err != nil {
						b.Fatal(err)
					}
					if err := jobs.Informer().GetIndexer().Add(s.Job); err != nil {
						b.Fatal(err)
					}
					for _, p := range s.Pods {
						if err := pods.Informer().GetIndexer().Add(p); err != nil {
							b.Fatal(err)
						}
					}
					sync := syncHandlerOf(jm)
					b.StartTimer()
					err = sync(ctx, s.Job.Namespace+"/"+s.Job.Name)
					b.StopTimer()
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
