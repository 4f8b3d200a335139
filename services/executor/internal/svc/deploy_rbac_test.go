package svc_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/kubetest"
	"github.com/jobplane/jobplane/lib/plan"
)

// The executor's roles in deploy/ are exactly what it uses: running as its
// ServiceAccount, every RPC and every API request of the controller works,
// and without any one permission of its roles something it does fails.
// The controller's own requests are made here directly (server-side dry
// runs where they would change something), as the controller makes them.
func TestTheExecutorsRolesAreExactlyWhatItUses(t *testing.T) {
	apiserver := kubetest.StartAPIServer(t)
	deploy := filepath.Join("..", "..", "..", "..", "deploy", "kubernetes")
	apiserver.Apply(t, filepath.Join(deploy, "00-namespace.yaml"), filepath.Join(deploy, "20-rbac.yaml"),
		filepath.Join(deploy, "..", "drop-in", "rbac.yaml"))
	identity := apiserver.ServiceAccountConfig(t, "jobplane-system", "jobplane-executor")
	executor, err := kubernetes.NewForConfig(identity)
	if err != nil {
		t.Fatal(err)
	}
	s := startSecuredAPI(t, apiserver, identity)
	kube, ctx := s.kube, context.Background()

	// Callers: a ServiceAccount with a token, a user with a client
	// certificate, both with a group, both allowed to run Jobs in team-a.
	createNamespace(t, kube, "team-a", nil)
	alice := serviceAccount(t, kube, "team-a", "alice")
	grant(t, kube, "team-a", "alice-jobs", alice, jobWriter...)
	aliceToken := token(t, kube, alice)
	grant(t, kube, "team-a", "team-c-jobs", rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "team-c"}, jobWriter...)
	carol := s.withCert(t, s.ca.ClientCert(t, "carol", "team-c").Certificate)

	// What the controller works on: a Job, one of its pods, an event, the Lease.
	j := job("team-a", "running")
	j.UID, j.ResourceVersion = "", ""
	j, err = kube.BatchV1().Jobs("team-a").Create(ctx, j, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := plan.NewPod(j, plan.PodToCreate{GenerateName: j.Name + "-", Finalizers: []string{plan.DefaultTrackingFinalizer}})
	existingPod, err := kube.CoreV1().Pods("team-a").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	event := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: j.Name + ".", Namespace: "team-a"},
		InvolvedObject: corev1.ObjectReference{Kind: "Job", Namespace: "team-a", Name: j.Name, UID: j.UID, APIVersion: "batch/v1"},
		Reason:         "SuccessfulCreate", Message: "Created pod", Type: corev1.EventTypeNormal, Count: 1,
	}
	existingEvent, err := kube.CoreV1().Events("team-a").Create(ctx, event, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "jobplane-executor", Namespace: "jobplane-system"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("replica-1"), LeaseDurationSeconds: ptr.To[int32](15)}}
	if _, err := kube.CoordinationV1().Leases("jobplane-system").Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	dryRun := []string{metav1.DryRunAll}
	steps := []kubetest.Step{
		// The gRPC API.
		{What: "SubmitJob by a ServiceAccount (token)", Do: func(ctx context.Context) error {
			_, err := s.api.SubmitJob(as(aliceToken), &jobplanev1.SubmitJobRequest{Job: contractJob(t, "team-a", "alices")})
			return err
		}},
		{What: "SubmitJob by a user (client certificate)", Do: func(ctx context.Context) error {
			_, err := carol.SubmitJob(ctx, &jobplanev1.SubmitJobRequest{Job: contractJob(t, "team-a", "carols")})
			return err
		}},
		{What: "WatchJobs", Do: func(context.Context) error {
			// Closed once it answered: a caller keeps at most so many
			// streams open (-max-streams-per-caller).
			ctx, cancel := context.WithCancel(as(aliceToken))
			defer cancel()
			stream, err := s.api.WatchJobs(ctx, &jobplanev1.WatchJobsRequest{Namespace: "team-a"})
			if err == nil {
				_, err = stream.Recv()
			}
			return err
		}},
		{What: "DeleteJob's read", Do: func(ctx context.Context) error {
			_, err := executor.BatchV1().Jobs("team-a").Get(ctx, j.Name, metav1.GetOptions{})
			return err
		}},
		{What: "DeleteJob's delete", Do: func(ctx context.Context) error {
			return executor.BatchV1().Jobs("team-a").Delete(ctx, j.Name, metav1.DeleteOptions{DryRun: dryRun, Preconditions: &metav1.Preconditions{UID: &j.UID}})
		}},
		// The informers: Jobs and pods of every namespace.
		{What: "list and watch Jobs", Do: func(ctx context.Context) error { return listAndWatch(ctx, executor, "jobs") }},
		{What: "list and watch pods", Do: func(ctx context.Context) error { return listAndWatch(ctx, executor, "pods") }},
		// The namespaces' weights (-namespace-weight-annotations).
		{What: "list and watch namespaces", Do: func(ctx context.Context) error { return listAndWatch(ctx, executor, "namespaces") }},
		// The plan's actions.
		{What: "create a pod", Do: func(ctx context.Context) error {
			_, err := executor.CoreV1().Pods("team-a").Create(ctx, pod, metav1.CreateOptions{DryRun: dryRun})
			return err
		}},
		{What: "remove a pod's finalizer", Do: func(ctx context.Context) error {
			_, err := executor.CoreV1().Pods("team-a").Patch(ctx, existingPod.Name, types.StrategicMergePatchType,
				[]byte(`{"metadata":{"$deleteFromPrimitiveList/finalizers":["`+plan.DefaultTrackingFinalizer+`"]}}`), metav1.PatchOptions{DryRun: dryRun})
			return err
		}},
		{What: "delete a pod", Do: func(ctx context.Context) error {
			return executor.CoreV1().Pods("team-a").Delete(ctx, existingPod.Name, metav1.DeleteOptions{DryRun: dryRun, Preconditions: &metav1.Preconditions{UID: &existingPod.UID}})
		}},
		{What: "write the Job's status", Do: func(ctx context.Context) error {
			fresh, err := kube.BatchV1().Jobs("team-a").Get(ctx, j.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			fresh.Status.Active = 1
			_, err = executor.BatchV1().Jobs("team-a").UpdateStatus(ctx, fresh, metav1.UpdateOptions{DryRun: dryRun})
			return err
		}},
		{What: "record an event", Do: func(ctx context.Context) error {
			_, err := executor.CoreV1().Events("team-a").Create(ctx, event, metav1.CreateOptions{DryRun: dryRun})
			return err
		}},
		{What: "count a repeated event", Do: func(ctx context.Context) error {
			_, err := executor.CoreV1().Events("team-a").Patch(ctx, existingEvent.Name, types.StrategicMergePatchType,
				[]byte(`{"count":2}`), metav1.PatchOptions{DryRun: dryRun})
			return err
		}},
		// Drop-in mode's probe for the built-in Job controller.
		{What: "create the drop-in probe Job", Do: func(ctx context.Context) error {
			_, err := executor.BatchV1().Jobs("jobplane-system").Create(ctx, dropInProbe(), metav1.CreateOptions{DryRun: dryRun})
			return err
		}},
		// Leader election.
		{What: "hold the Lease", Do: func(ctx context.Context) error {
			leases := executor.CoordinationV1().Leases("jobplane-system")
			held, err := leases.Get(ctx, "jobplane-executor", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if _, err := leases.Update(ctx, held, metav1.UpdateOptions{DryRun: dryRun}); err != nil {
				return err
			}
			fresh := lease.DeepCopy()
			fresh.Name = "jobplane-executor-new"
			_, err = leases.Create(ctx, fresh, metav1.CreateOptions{DryRun: dryRun})
			return err
		}},
	}
	probe := kubetest.ProbeSteps(steps, 5*time.Second)

	// Within the caches' TTL plus the API server's own RBAC propagation.
	within := authTTL + 3*time.Second
	for _, role := range []struct{ namespace, name string }{{"", "jobplane-executor"}, {"jobplane-system", "jobplane-executor-leader"}, {"jobplane-system", "jobplane-executor-drop-in-probe"}} {
		if unneeded := apiserver.EachPermissionIsNeeded(t, role.namespace, role.name, within, probe); len(unneeded) > 0 {
			t.Errorf("%s grants what the executor does not use: %v", role.name, unneeded)
		}
	}
}

// dropInProbe is a Job as drop-in mode's probe creates it.
func dropInProbe() *batchv1.Job {
	j := job("jobplane-system", "jobplane-drop-in-probe")
	j.UID, j.ResourceVersion, j.Spec.ManagedBy, j.Spec.Suspend = "", "", nil, ptr.To(true)
	return j
}

// listAndWatch lists resource in every namespace and watches from there,
// as an informer does.
func listAndWatch(ctx context.Context, client kubernetes.Interface, resource string) error {
	switch resource {
	case "jobs":
		return listThenWatch(ctx, client.BatchV1().Jobs("").List, client.BatchV1().Jobs("").Watch)
	case "pods":
		return listThenWatch(ctx, client.CoreV1().Pods("").List, client.CoreV1().Pods("").Watch)
	case "namespaces":
		return listThenWatch(ctx, client.CoreV1().Namespaces().List, client.CoreV1().Namespaces().Watch)
	case "workloads":
		return listThenWatch(ctx, client.SchedulingV1alpha2().Workloads("").List, client.SchedulingV1alpha2().Workloads("").Watch)
	case "podgroups":
		return listThenWatch(ctx, client.SchedulingV1alpha2().PodGroups("").List, client.SchedulingV1alpha2().PodGroups("").Watch)
	}
	return fmt.Errorf("no list and watch of %s", resource)
}

// listThenWatch lists one object and watches from the list's
// resourceVersion for a second at most.
func listThenWatch[L interface{ GetResourceVersion() string }](ctx context.Context,
	list func(context.Context, metav1.ListOptions) (L, error), watch func(context.Context, metav1.ListOptions) (watch.Interface, error)) error {
	l, err := list(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return err
	}
	w, err := watch(ctx, metav1.ListOptions{ResourceVersion: l.GetResourceVersion(), TimeoutSeconds: ptr.To[int64](1)})
	if err != nil {
		return err
	}
	w.Stop()
	return nil
}
