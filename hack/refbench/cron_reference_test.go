package refbench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	_ "unsafe" // go:linkname

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/kubernetes/pkg/controller/cronjob"
)

// referenceCronJobSync is the reference CronJob controller's sync of one key:
// its history cleanup, then syncCronJob, then the status write. It is
// unexported and reached by no field, as the Job controller's syncJob is.
//
//go:linkname referenceCronJobSync k8s.io/kubernetes/pkg/controller/cronjob.(*ControllerV2).sync
func referenceCronJobSync(jm *cronjob.ControllerV2, ctx context.Context, key string) (*time.Duration, error)

// cronDecided is what one sync of a CronJob decided, as both sides can say
// it: the steps in order, the Jobs created, the status after the sync and
// when to sync again.
type cronDecided struct {
	// Steps are "create <Job>", "delete <Job>" and "event <type> <reason>:
	// <message>", in the order taken. The events a performer records about
	// its own creations and deletions (SuccessfulCreate, SuccessfulDelete)
	// are left out: the steps say them.
	Steps []string
	// Created are the Jobs created, as sent.
	Created []*batchv1.Job
	// Status is the CronJob's status at the end of the sync.
	Status batchv1.CronJobStatus
	// WroteStatus says the status was written.
	WroteStatus  bool
	RequeueAfter *time.Duration
}

// stepsRecorder records the reference's events as steps.
type stepsRecorder struct{ d *cronDecided }

func (r stepsRecorder) Event(_ runtime.Object, eventType, reason, message string) {
	if reason != "SuccessfulCreate" && reason != "SuccessfulDelete" {
		r.d.Steps = append(r.d.Steps, fmt.Sprintf("event %s %s: %s", eventType, reason, message))
	}
}

func (r stepsRecorder) Eventf(o runtime.Object, eventType, reason, format string, args ...any) {
	r.Event(o, eventType, reason, fmt.Sprintf(format, args...))
}

func (r stepsRecorder) AnnotatedEventf(o runtime.Object, _ map[string]string, eventType, reason, format string, args ...any) {
	r.Eventf(o, eventType, reason, format, args...)
}

var _ record.EventRecorder = stepsRecorder{}

// referenceCronSync runs the reference's sync once on cj and jobs at now:
// both in its informers' stores and in the API, whose calls all succeed.
func referenceCronSync(t *testing.T, cj *batchv1.CronJob, jobs []*batchv1.Job, now time.Time) cronDecided {
	t.Helper()
	return referenceCronSyncListing(t, cj, jobs, jobs, now)
}

// referenceCronSyncListing is referenceCronSync with only listed of the
// Jobs in the reference's informer (all of them in the API).
func referenceCronSyncListing(t *testing.T, cj *batchv1.CronJob, jobs, listed []*batchv1.Job, now time.Time) cronDecided {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	objects := []runtime.Object{cj.DeepCopy()}
	for _, j := range jobs {
		objects = append(objects, j.DeepCopy())
	}
	client := fake.NewClientset(objects...)
	var d cronDecided
	client.PrependReactor("create", "jobs", func(action k8stesting.Action) (bool, runtime.Object, error) {
		j := action.(k8stesting.CreateAction).GetObject().(*batchv1.Job).DeepCopy()
		j.Namespace = action.GetNamespace() // sent in the path, not the object
		d.Steps = append(d.Steps, "create "+j.Name)
		d.Created = append(d.Created, j)
		return false, nil, nil
	})
	client.PrependReactor("delete", "jobs", func(action k8stesting.Action) (bool, runtime.Object, error) {
		d.Steps = append(d.Steps, "delete "+action.(k8stesting.DeleteAction).GetName())
		return false, nil, nil
	})
	client.PrependReactor("update", "cronjobs", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() == "status" {
			d.WroteStatus = true
			d.Status = *action.(k8stesting.UpdateAction).GetObject().(*batchv1.CronJob).Status.DeepCopy()
		}
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	jm, err := cronjob.NewControllerV2(ctx, factory.Batch().V1().Jobs(), factory.Batch().V1().CronJobs(), client)
	if err != nil {
		t.Fatal(err)
	}
	defer fieldOf[workqueue.TypedRateLimitingInterface[string]](jm, "queue").ShutDown()
	defer fieldOf[record.EventBroadcaster](jm, "broadcaster").Shutdown()
	setField(jm, "recorder", stepsRecorder{&d})
	setField(jm, "now", func() time.Time { return now })
	if err := factory.Batch().V1().CronJobs().Informer().GetIndexer().Add(cj.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	for _, j := range listed {
		if err := factory.Batch().V1().Jobs().Informer().GetIndexer().Add(j.DeepCopy()); err != nil {
			t.Fatal(err)
		}
	}
	d.RequeueAfter, _ = referenceCronJobSync(jm, ctx, cj.Namespace+"/"+cj.Name)
	if !d.WroteStatus {
		d.Status = *cj.Status.DeepCopy()
	}
	return d
}

// emptyAPIServer is a Kubernetes API with nothing in it, enough for the
// cron service's caches to sync: every list is empty, every watch ends
// its initial events at once and then stays open, anything else is not
// found. It returns a kubeconfig for it.
func emptyAPIServer(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method != http.MethodGet:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
		case r.URL.Query().Get("watch") == "true":
			w.WriteHeader(http.StatusOK)
			if r.URL.Query().Get("sendInitialEvents") == "true" {
				fmt.Fprint(w, `{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"1","annotations":{"k8s.io/initial-events-end":"true"}}}}`+"\n")
			}
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case strings.Count(strings.Trim(r.URL.Path, "/"), "/")%2 == 1: // a collection: /api/v1/x, /apis/g/v/x, .../namespaces/n/x
			fmt.Fprint(w, `{"metadata":{"resourceVersion":"1"},"items":[]}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
		}
	}))
	t.Cleanup(srv.CloseClientConnections)
	t.Cleanup(srv.Close)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: empty, cluster: {server: %q}}]
contexts: [{name: empty, context: {cluster: empty, user: nobody}}]
users: [{name: nobody, user: {}}]
current-context: empty
`, srv.URL)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}
