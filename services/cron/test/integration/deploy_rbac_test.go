package integration

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/lib/kubetest"
)

// The cron controller's roles in deploy/ are exactly what it uses: as its
// ServiceAccount every request of the controller and of the CronJob RPCs
// works, and without any one permission of its roles something fails. The
// requests are made here directly, as the service makes them (server-side
// dry runs where they would change something); the Jobs it creates and
// deletes through the executor are created and deleted as it, since the
// executor impersonates its caller. The API server enforces owner
// references' permissions, as production clusters do, so a Job blocking
// its CronJob's deletion needs update on cronjobs/finalizers.
func TestTheCronControllersRolesAreExactlyWhatItUses(t *testing.T) {
	apiserver := kubetest.StartAPIServer(t, kubetest.WithFlags("--enable-admission-plugins=OwnerReferencesPermissionEnforcement"))
	kubetest.InstallCRDs(t, apiserver.Config)
	deploy := filepath.Join("..", "..", "..", "..", "deploy", "kubernetes")
	apiserver.Apply(t, filepath.Join(deploy, "00-namespace.yaml"), filepath.Join(deploy, "20-rbac.yaml"))
	identity := apiserver.ServiceAccountConfig(t, "jobplane-system", "jobplane-cron")
	kube, err := kubernetes.NewForConfig(identity)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(identity)
	if err != nil {
		t.Fatal(err)
	}
	admin := apiserver.Client
	adminDyn, err := dynamic.NewForConfig(apiserver.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// What the controller works on: a CronJob, one of its Jobs, an event, the Lease.
	u, err := cronapi.ToUnstructured(cronJob("nightly"))
	if err != nil {
		t.Fatal(err)
	}
	stored, err := adminDyn.Resource(cronapi.GroupVersionResource).Namespace(namespace).Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner := metav1.OwnerReference{APIVersion: cronapi.APIVersion, Kind: cronapi.Kind, Name: stored.GetName(), UID: stored.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	run := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly-29922375", Namespace: namespace, OwnerReferences: []metav1.OwnerReference{owner}},
		Spec:       *cronJob("nightly").Spec.JobTemplate.Spec.DeepCopy(),
	}
	existingJob, err := admin.BatchV1().Jobs(namespace).Create(ctx, run.DeepCopy(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	event := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: "nightly.", Namespace: namespace},
		InvolvedObject: corev1.ObjectReference{Kind: cronapi.Kind, APIVersion: cronapi.APIVersion, Namespace: namespace, Name: "nightly", UID: stored.GetUID()},
		Reason:         "SuccessfulCreate", Message: "Created job nightly-29922375", Type: corev1.EventTypeNormal, Count: 1,
	}
	existingEvent, err := admin.CoreV1().Events(namespace).Create(ctx, event, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "jobplane-cron", Namespace: "jobplane-system"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("replica-1"), LeaseDurationSeconds: ptr.To[int32](15)}}
	if _, err := admin.CoordinationV1().Leases("jobplane-system").Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	cronJobs := dyn.Resource(cronapi.GroupVersionResource)
	dryRun := []string{metav1.DryRunAll}
	steps := []kubetest.Step{
		// The informers, and the live reads of a sync.
		{What: "list and watch CronJobs", Do: func(ctx context.Context) error {
			list, err := cronJobs.List(ctx, metav1.ListOptions{Limit: 1})
			if err != nil {
				return err
			}
			w, err := cronJobs.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion(), TimeoutSeconds: ptr.To[int64](1)})
			if err == nil {
				w.Stop()
			}
			return err
		}},
		{What: "list and watch Jobs", Do: func(ctx context.Context) error {
			list, err := kube.BatchV1().Jobs("").List(ctx, metav1.ListOptions{Limit: 1})
			if err != nil {
				return err
			}
			w, err := kube.BatchV1().Jobs("").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion, TimeoutSeconds: ptr.To[int64](1)})
			if err == nil {
				w.Stop()
			}
			return err
		}},
		// The namespaces' weights (-namespace-weight-annotations).
		{What: "list and watch namespaces", Do: func(ctx context.Context) error {
			list, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{Limit: 1})
			if err != nil {
				return err
			}
			w, err := kube.CoreV1().Namespaces().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion, TimeoutSeconds: ptr.To[int64](1)})
			if err == nil {
				w.Stop()
			}
			return err
		}},
		{What: "read a CronJob", Do: func(ctx context.Context) error {
			_, err := cronJobs.Namespace(namespace).Get(ctx, "nightly", metav1.GetOptions{})
			return err
		}},
		{What: "read a Job", Do: func(ctx context.Context) error {
			_, err := kube.BatchV1().Jobs(namespace).Get(ctx, existingJob.Name, metav1.GetOptions{})
			return err
		}},
		// The sync's writes.
		{What: "write a CronJob's status", Do: func(ctx context.Context) error {
			fresh, err := adminDyn.Resource(cronapi.GroupVersionResource).Namespace(namespace).Get(ctx, "nightly", metav1.GetOptions{})
			if err != nil {
				return err
			}
			_, err = cronJobs.Namespace(namespace).UpdateStatus(ctx, fresh, metav1.UpdateOptions{DryRun: dryRun})
			return err
		}},
		{What: "create a run's Job, owned by its CronJob (SubmitJob, as cron)", Do: func(ctx context.Context) error {
			job := run.DeepCopy()
			job.Name = "nightly-29922376"
			_, err := kube.BatchV1().Jobs(namespace).Create(ctx, job, metav1.CreateOptions{DryRun: dryRun})
			return err
		}},
		{What: "delete a run's Job (DeleteJob, as cron)", Do: func(ctx context.Context) error {
			return kube.BatchV1().Jobs(namespace).Delete(ctx, existingJob.Name, metav1.DeleteOptions{DryRun: dryRun, Preconditions: &metav1.Preconditions{UID: &existingJob.UID}})
		}},
		{What: "record an event", Do: func(ctx context.Context) error {
			_, err := kube.CoreV1().Events(namespace).Create(ctx, event, metav1.CreateOptions{DryRun: dryRun})
			return err
		}},
		{What: "count a repeated event", Do: func(ctx context.Context) error {
			_, err := kube.CoreV1().Events(namespace).Patch(ctx, existingEvent.Name, types.StrategicMergePatchType,
				[]byte(`{"count":2}`), metav1.PatchOptions{DryRun: dryRun})
			return err
		}},
		// The CronJob RPCs, once their caller is authorized.
		{What: "CreateCronJob", Do: func(ctx context.Context) error {
			u, err := cronapi.ToUnstructured(cronJob("weekly"))
			if err == nil {
				_, err = cronJobs.Namespace(namespace).Create(ctx, u, metav1.CreateOptions{DryRun: dryRun})
			}
			return err
		}},
		{What: "UpdateCronJob", Do: func(ctx context.Context) error {
			fresh, err := cronJobs.Namespace(namespace).Get(ctx, "nightly", metav1.GetOptions{})
			if err == nil {
				_, err = cronJobs.Namespace(namespace).Update(ctx, fresh, metav1.UpdateOptions{DryRun: dryRun})
			}
			return err
		}},
		{What: "DeleteCronJob", Do: func(ctx context.Context) error {
			return cronJobs.Namespace(namespace).Delete(ctx, "nightly", metav1.DeleteOptions{DryRun: dryRun})
		}},
		// Leader election.
		{What: "hold the Lease", Do: func(ctx context.Context) error {
			leases := kube.CoordinationV1().Leases("jobplane-system")
			held, err := leases.Get(ctx, "jobplane-cron", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if _, err := leases.Update(ctx, held, metav1.UpdateOptions{DryRun: dryRun}); err != nil {
				return err
			}
			fresh := lease.DeepCopy()
			fresh.Name = "jobplane-cron-new"
			_, err = leases.Create(ctx, fresh, metav1.CreateOptions{DryRun: dryRun})
			return err
		}},
	}
	probe := kubetest.ProbeSteps(steps, 5*time.Second)
	for _, role := range []struct{ namespace, name string }{{"", "jobplane-cron-controller"}, {"jobplane-system", "jobplane-cron-leader"}} {
		if unneeded := apiserver.EachPermissionIsNeeded(t, role.namespace, role.name, 5*time.Second, probe); len(unneeded) > 0 {
			t.Errorf("%s grants what cron does not use: %v", role.name, unneeded)
		}
	}
}

// deploy/drop-in's role for the cron service is exactly what drop-in mode
// uses of batch/v1 CronJobs, beside 20-rbac.yaml's roles: read and watch
// them, write their status with the state annotation (and the CronJob
// itself, should a status update drop it), and own their Jobs blocking
// their deletion.
func TestTheCronDropInRoleIsExactlyWhatItUses(t *testing.T) {
	apiserver := kubetest.StartAPIServer(t, kubetest.WithFlags("--enable-admission-plugins=OwnerReferencesPermissionEnforcement"))
	deploy := filepath.Join("..", "..", "..", "..", "deploy")
	apiserver.Apply(t, filepath.Join(deploy, "kubernetes", "00-namespace.yaml"), filepath.Join(deploy, "kubernetes", "20-rbac.yaml"),
		filepath.Join(deploy, "drop-in", "cron-rbac.yaml"))
	kube, err := kubernetes.NewForConfig(apiserver.ServiceAccountConfig(t, "jobplane-system", "jobplane-cron"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := apiserver.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stored, err := apiserver.Client.BatchV1().CronJobs(namespace).Create(ctx, batchCronJob("nightly", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cronJobs := kube.BatchV1().CronJobs(namespace)
	dryRun := []string{metav1.DryRunAll}
	steps := []kubetest.Step{
		{What: "list and watch batch/v1 CronJobs", Do: func(ctx context.Context) error {
			list, err := kube.BatchV1().CronJobs("").List(ctx, metav1.ListOptions{Limit: 1})
			if err != nil {
				return err
			}
			w, err := kube.BatchV1().CronJobs("").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion, TimeoutSeconds: ptr.To[int64](1)})
			if err == nil {
				w.Stop()
			}
			return err
		}},
		{What: "read a batch/v1 CronJob", Do: func(ctx context.Context) error {
			_, err := cronJobs.Get(ctx, "nightly", metav1.GetOptions{})
			return err
		}},
		{What: "write its status and state annotation", Do: func(ctx context.Context) error {
			fresh, err := apiserver.Client.BatchV1().CronJobs(namespace).Get(ctx, "nightly", metav1.GetOptions{})
			if err != nil {
				return err
			}
			fresh.Annotations = map[string]string{"cron.jobplane.dev/state": `{"pendingRuns":[]}`}
			_, err = cronJobs.UpdateStatus(ctx, fresh, metav1.UpdateOptions{DryRun: dryRun})
			return err
		}},
		{What: "write its state annotation on the CronJob itself", Do: func(ctx context.Context) error {
			fresh, err := apiserver.Client.BatchV1().CronJobs(namespace).Get(ctx, "nightly", metav1.GetOptions{})
			if err != nil {
				return err
			}
			_, err = cronJobs.Update(ctx, fresh, metav1.UpdateOptions{DryRun: dryRun})
			return err
		}},
		{What: "create a run's Job owned by the batch/v1 CronJob (SubmitJob, as cron)", Do: func(ctx context.Context) error {
			job := &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Name: "nightly-29922375", Namespace: namespace, OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "batch/v1", Kind: "CronJob", Name: stored.Name, UID: stored.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
				Spec: *stored.Spec.JobTemplate.Spec.DeepCopy(),
			}
			_, err := kube.BatchV1().Jobs(namespace).Create(ctx, job, metav1.CreateOptions{DryRun: dryRun})
			return err
		}},
	}
	probe := kubetest.ProbeSteps(steps, 5*time.Second)
	if unneeded := apiserver.EachPermissionIsNeeded(t, "", "jobplane-cron-drop-in", 5*time.Second, probe); len(unneeded) > 0 {
		t.Errorf("jobplane-cron-drop-in grants what cron does not use: %v", unneeded)
	}
}
