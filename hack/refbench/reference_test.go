package refbench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller"
	"k8s.io/kubernetes/pkg/controller/job"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/jobplane/jobplane/lib/plan"
)

// recordingQueue records the delays the reference requeues its Job after.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[string]
	after *[]time.Duration
}

func (q recordingQueue) AddAfter(_ string, d time.Duration) { *q.after = append(*q.after, d) }

// referenceSync runs the reference's syncJob once on j and pods.
func referenceSync(t *testing.T, j *batchv1.Job, pods []*corev1.Pod, state plan.State) decided {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	var (
		mu sync.Mutex // the reference writes pods from goroutines
		d  decided
	)
	client.PrependReactor("*", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetResource().Resource != "pods" {
			return true, &batchv1.Job{}, nil
		}
		mu.Lock()
		defer mu.Unlock()
		d.wrote("pods")
		switch a := action.(type) {
		case k8stesting.CreateAction:
			p := a.GetObject().(*corev1.Pod)
			d.Created = append(d.Created, createdPod(p))
			return true, p, nil
		case k8stesting.DeleteAction:
			d.Deleted = append(d.Deleted, a.GetName())
		case k8stesting.PatchAction:
			d.Released = append(d.Released, a.GetName())
		}
		return true, &corev1.Pod{}, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	podInformer, jobInformer := factory.Core().V1().Pods(), factory.Batch().V1().Jobs()
	jm, err := job.NewController(ctx, client, podInformer, jobInformer, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	recorder := record.NewFakeRecorder(1000)
	setField(jm, "clock", clocktesting.NewFakeClock(now))
	setField(jm, "recorder", record.EventRecorder(recorder))
	setField(jm, "podControl", controller.PodControlInterface(controller.RealPodControl{KubeClient: client, Recorder: recorder}))
	setField(jm, "updateStatusHandler", func(_ context.Context, j *batchv1.Job) (*batchv1.Job, error) {
		mu.Lock()
		defer mu.Unlock()
		d.wrote("status")
		d.Statuses = append(d.Statuses, *j.Status.DeepCopy())
		return j, nil
	})
	setField(jm, "patchJobHandler", func(context.Context, *batchv1.Job, []byte) error { return nil })
	real := fieldOf[workqueue.TypedRateLimitingInterface[string]](jm, "queue")
	setField(jm, "queue", workqueue.TypedRateLimitingInterface[string](recordingQueue{real, &d.Requeues}))
	// The controller's goroutines: its queues' and its event broadcaster's.
	defer real.ShutDown()
	defer fieldOf[interface{ ShutDown() }](jm, "orphanQueue").ShutDown()
	defer fieldOf[record.EventBroadcaster](jm, "broadcaster").Shutdown()
	if err := jobInformer.Informer().GetIndexer().Add(j.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if err := podInformer.Informer().GetIndexer().Add(p.DeepCopy()); err != nil {
			t.Fatal(err)
		}
	}
	key := j.Namespace + "/" + j.Name
	backoffs := (*backoffStoreOf)(fieldAt(jm, "podBackoffStore").UnsafePointer())
	if state.Backoff != nil {
		if err := backoffs.store.Add(newBackoffRecord(key, state.Backoff)); err != nil {
			t.Fatal(err)
		}
	}
	if e := state.Expectations; e.PendingCreations > 0 || e.PendingDeletions > 0 {
		expectations := fieldOf[controller.ControllerExpectationsInterface](jm, "expectations")
		if err := expectations.SetExpectations(klog.Background(), key, int(e.PendingCreations), int(e.PendingDeletions)); err != nil {
			t.Fatal(err)
		}
	}
	if len(state.FinalizerRemovalsInFlight) > 0 {
		removals := fieldAt(jm, "finalizerExpectations").UnsafePointer()
		if err := expectFinalizersRemoved(removals, klog.Background(), key, state.FinalizerRemovalsInFlight); err != nil {
			t.Fatal(err)
		}
	}
	// An error is a requeue; what the sync did before it is compared.
	_ = syncHandlerOf(jm)(ctx, key)
	if r, ok, _ := backoffs.store.GetByKey(key); ok {
		d.Backoff = backoffRecordOf(r)
	}
	close(recorder.Events)
	for e := range recorder.Events {
		typ, rest, _ := strings.Cut(e, " ")
		reason, message, _ := strings.Cut(rest, " ")
		if podControlEvent(reason) {
			continue
		}
		d.Events = append(d.Events, typ+" "+reason+": "+message)
	}
	return d.sorted()
}

// expectFinalizersRemoved is the reference's record of finalizer removals
// sent and not yet seen, which its field finalizerExpectations points to:
// unexported, as the type is.
//
//go:linkname expectFinalizersRemoved k8s.io/kubernetes/pkg/controller/job.(*uidTrackingExpectations).expectFinalizersRemoved
func expectFinalizersRemoved(expectations unsafe.Pointer, logger klog.Logger, jobKey string, uids []types.UID) error

// referenceMayDecide: the reference, synced again on j and pods, decides
// d in one of 100 tries. It breaks some ties by its informer's order, which
// is no set order (of failed pods of an index, one with more failures and
// one that finished later; of several pods a FailJob rule matches, the one
// named): any of its decisions is the reference's.
func referenceMayDecide(t *testing.T, j *batchv1.Job, pods []*corev1.Pod, state plan.State, d decided) bool {
	// A small map's order is one of its rotations: the pod the planner
	// names may come first in one try of eight.
	for range 100 {
		if cmp.Equal(referenceSync(t, j, pods, state).finishedForgets(j.Status), d, cmpopts.EquateEmpty()) {
			return true
		}
	}
	return false
}

// podControlEvent: the events of the reference's pod control, which the
// executor records as it writes pods (they are not in a plan).
func podControlEvent(reason string) bool {
	switch reason {
	case "SuccessfulCreate", "FailedCreate", "SuccessfulDelete", "FailedDelete":
		return true
	}
	return false
}

// learnBackoffRecordType syncs a Job with a failed pod in the reference,
// which then records a backoff: its record's type is what
// newBackoffRecord makes.
func learnBackoffRecordType(t *testing.T) {
	if backoffRecordType != nil {
		return
	}
	j, _ := randomJob(1)
	j.Spec.Suspend, j.Spec.PodFailurePolicy, j.Status = ptr.To(false), nil, batchv1.JobStatus{}
	p := randomPod(rand.New(rand.NewPCG(1, 1)), j, 0)
	p.Status.Phase, p.DeletionTimestamp, p.Finalizers = corev1.PodFailed, nil, []string{batchv1.JobTrackingFinalizer}
	referenceSync(t, j, []*corev1.Pod{p}, plan.State{})
	if backoffRecordType == nil {
		t.Fatal("the reference recorded no backoff for a Job with a failed pod")
	}
}

// backoffStoreOf is the reference's backoffStore, whose one field is its
// store of *backoffRecord, keyed by the Job's key.
type backoffStoreOf struct{ store cache.Store }

// referenceBackoffRecord mirrors the reference's backoffRecord, field for
// field (checked by backoffRecordOf).
type referenceBackoffRecord struct {
	key                      string
	failuresAfterLastSuccess int32
	lastFailureTime          *time.Time
}

// backoffRecordType is the reference's *backoffRecord, learnt from a sync
// that records one (pointers to it are what its store takes).
var backoffRecordType reflect.Type

// newBackoffRecord is a reference *backoffRecord of key holding b.
func newBackoffRecord(key string, b *plan.BackoffRecord) any {
	r := reflect.New(backoffRecordType.Elem())
	*(*referenceBackoffRecord)(r.UnsafePointer()) = referenceBackoffRecord{key, b.FailuresAfterLastSuccess, b.LastFailureTime}
	return r.Interface()
}

// backoffRecordOf is a reference *backoffRecord as the planner's.
func backoffRecordOf(r any) *plan.BackoffRecord {
	v := reflect.ValueOf(r)
	if backoffRecordType == nil {
		t := v.Type().Elem()
		mirror := reflect.TypeOf(referenceBackoffRecord{})
		if t.NumField() != mirror.NumField() {
			panic(fmt.Sprintf("the reference's backoffRecord is %v, not %v", t, mirror))
		}
		for i := range t.NumField() {
			if t.Field(i).Name != mirror.Field(i).Name || t.Field(i).Type != mirror.Field(i).Type {
				panic(fmt.Sprintf("the reference's backoffRecord is %v, not %v", t, mirror))
			}
		}
		backoffRecordType = v.Type()
	}
	m := (*referenceBackoffRecord)(v.UnsafePointer())
	return &plan.BackoffRecord{FailuresAfterLastSuccess: m.failuresAfterLastSuccess, LastFailureTime: m.lastFailureTime}
}
