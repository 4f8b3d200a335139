// Package integration runs the cron service's CronJob RPCs in process, over
// a real gRPC server, against a real kube-apiserver serving the CRD of
// deploy/kubernetes, and compares what the CRD refuses with what the RPCs
// refuse.
package integration

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/grpcserver/grpctest"
	"github.com/jobplane/jobplane/lib/kubeconv"
	"github.com/jobplane/jobplane/lib/kubetest"
	"github.com/jobplane/jobplane/services/cron/internal/svc"
)

// namespace holds the tests' CronJobs.
const namespace = "team-a"

// env is an API server with the CRD installed and the cron service on it.
type env struct {
	api *kubetest.APIServer
	// cronJobs reaches cronjobs.jobplane.dev directly, as kubectl does.
	cronJobs dynamic.NamespaceableResourceInterface
	// rpc is the cron service, through a real gRPC server.
	rpc jobplanev1.CronServiceClient
}

func start(t *testing.T) *env {
	t.Helper()
	api := kubetest.StartAPIServer(t)
	kubetest.InstallCRDs(t, api.Config)
	for _, ns := range []string{namespace, "team-b"} {
		if _, err := api.Client.CoreV1().Namespaces().Create(context.Background(),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	client, err := dynamic.NewForConfig(api.Config)
	if err != nil {
		t.Fatal(err)
	}
	cronJobs := client.Resource(cronapi.GroupVersionResource)
	srv := grpctest.Start(t, func(s *grpcserver.Server) {
		s.RegisterService(&jobplanev1.CronService_ServiceDesc, svc.NewCronService(svc.Config{CronJobs: cronJobs}))
	})
	return &env{api: api, cronJobs: cronJobs, rpc: jobplanev1.NewCronServiceClient(srv.Conn)}
}

// createDirectly creates c as kubectl would, without the cron service.
func (e *env) createDirectly(t *testing.T, c *cronapi.CronJob) (*cronapi.CronJob, error) {
	t.Helper()
	u, err := cronapi.ToUnstructured(c)
	if err != nil {
		t.Fatal(err)
	}
	created, err := e.cronJobs.Namespace(c.Namespace).Create(context.Background(), u, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	out, err := cronapi.FromUnstructured(created)
	if err != nil {
		t.Fatal(err)
	}
	return out, nil
}

// createByRPC creates c with CreateCronJob.
func (e *env) createByRPC(t *testing.T, c *cronapi.CronJob) (*jobplanev1.CronJob, error) {
	t.Helper()
	req, err := kubeconv.CronJobFromKube(c)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.rpc.CreateCronJob(context.Background(), &jobplanev1.CreateCronJobRequest{CronJob: req})
	return resp.GetCronJob(), err
}

// stored reads a CronJob directly.
func (e *env) stored(t *testing.T, namespace, name string) *cronapi.CronJob {
	t.Helper()
	u, err := e.cronJobs.Namespace(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cronapi.FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// kubectl runs the cluster's kubectl against the API server.
func (e *env) kubectl(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	kubeconfig := e.api.WriteKubeconfig(t)
	cmd := exec.Command(filepath.Join(kubetest.Binaries(t), "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// causeFields are the distinct fields of the API server's causes of an
// Invalid error, sorted.
func causeFields(t *testing.T, err error) []string {
	t.Helper()
	var st apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &st) || st.Status().Details == nil {
		t.Fatalf("the API server answered %v, want Invalid with causes", err)
	}
	var out []string
	for _, c := range st.Status().Details.Causes {
		// Not a field: the note that CEL rules wait for the schema's.
		if c.Field == "<nil>" {
			continue
		}
		if !slices.Contains(out, c.Field) {
			out = append(out, c.Field)
		}
	}
	slices.Sort(out)
	return out
}

// violatedFields are the distinct fields of a status's violations, sorted.
func violatedFields(err error) []string {
	var out []string
	for _, v := range apierr.FieldViolations(err) {
		if !slices.Contains(out, v.Field) {
			out = append(out, v.Field)
		}
	}
	return out
}
