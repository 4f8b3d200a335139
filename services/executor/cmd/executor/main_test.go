package main_test

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/grpcserver/grpctest"
	"github.com/jobplane/jobplane/lib/kubetest"
)

// The planner and executor binaries as deploy/kubernetes runs them: TLS,
// tokens of each service's own audience, the executor calling the planner
// with its projected token, each service as its ServiceAccount with its
// ClusterRole from deploy/. A caller runs a Job in its namespace, and only
// there; its pods are created by the executor.
func TestTheBinariesAsDeployed(t *testing.T) {
	apiserver := kubetest.StartAPIServer(t)
	deploy := filepath.Join("..", "..", "..", "..", "deploy", "kubernetes")
	apiserver.Apply(t, filepath.Join(deploy, "00-namespace.yaml"), filepath.Join(deploy, "20-rbac.yaml"))
	kube, ctx := apiserver.Client, context.Background()
	dir := t.TempDir()
	ca := grpctest.NewCA(t, "jobplane")

	plannerTLS := ca.ServerCert(t, "planner")
	planner := kubetest.StartProcess(t, "planner", kubetest.BuildBinary(t, "./services/planner/cmd/planner"),
		"-shutdown-drain", "0s",
		"-kubeconfig", serviceAccountKubeconfig(t, apiserver, dir, "jobplane-planner"),
		"-tls-cert-file", plannerTLS.CertFile, "-tls-key-file", plannerTLS.KeyFile,
		"-authn-audience", "jobplane-planner")

	// The executor's projected token for the planner.
	plannerToken := filepath.Join(dir, "planner-token")
	writeFile(t, plannerToken, serviceAccountToken(t, apiserver, "jobplane-system", "jobplane-executor", "jobplane-planner"))
	executorTLS := ca.ServerCert(t, "executor")
	// Ready only once the planner answers it: the executor's token for the
	// planner is accepted.
	executor := kubetest.StartProcess(t, "executor", kubetest.BuildBinary(t, "./services/executor/cmd/executor"),
		"-shutdown-drain", "0s",
		"-kubeconfig", serviceAccountKubeconfig(t, apiserver, dir, "jobplane-executor"),
		"-leader-elect-namespace", "jobplane-system",
		"-tls-cert-file", executorTLS.CertFile, "-tls-key-file", executorTLS.KeyFile,
		"-authn-audience", "jobplane-executor",
		"-planner-addr", planner.GRPCAddr, "-planner-ca-file", ca.CertFile, "-planner-token-file", plannerToken)

	// A team that may run Jobs in team-a.
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ServiceAccounts("team-a").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "ci"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().Roles("team-a").Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "jobs"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "watch", "create", "delete"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings("team-a").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "jobs"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "jobs"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "team-a", Name: "ci"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	conn, err := grpc.NewClient(executor.GRPCAddr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: ca.Pool})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	api := jobplanev1.NewExecutorServiceClient(conn)
	as := func(token string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	ci := as(serviceAccountToken(t, apiserver, "team-a", "ci", "jobplane-executor"))

	resp, err := api.SubmitJob(ci, &jobplanev1.SubmitJobRequest{Job: newJob(t, "team-a", "build")})
	if err != nil || !resp.GetCreated() {
		t.Fatalf("SubmitJob in team-a: %v %v", resp, err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		pods, err := kube.CoreV1().Pods("team-a").List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=build"})
		if err == nil && len(pods.Items) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the executor created no pod for the Job within a minute: %v %v", pods, err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	_, err = api.SubmitJob(ci, &jobplanev1.SubmitJobRequest{Job: newJob(t, "default", "intruder")})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("SubmitJob in default: %v, want PermissionDenied", err)
	}
	// A token for the API server is not one for the executor.
	_, err = api.ListJobs(as(serviceAccountToken(t, apiserver, "team-a", "ci")), &jobplanev1.ListJobsRequest{Namespace: "team-a"})
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("a token of the API server's audience: %v, want Unauthenticated", err)
	}
}

func newJob(t *testing.T, namespace, name string) *jobplanev1.Job {
	t.Helper()
	spec, err := structpb.NewStruct(map[string]any{
		"restartPolicy": "Never",
		"containers":    []any{map[string]any{"name": "main", "image": "busybox"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &jobplanev1.Job{
		Metadata: &jobplanev1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:     &jobplanev1.JobSpec{Template: &jobplanev1.PodTemplateSpec{Spec: spec}},
	}
}

// serviceAccountToken is a token of namespace/name from the TokenRequest
// API, for audiences (the API server's when none).
func serviceAccountToken(t *testing.T, apiserver *kubetest.APIServer, namespace, name string, audiences ...string) string {
	t.Helper()
	tr, err := apiserver.Client.CoreV1().ServiceAccounts(namespace).CreateToken(context.Background(), name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// serviceAccountKubeconfig writes a kubeconfig reaching the API server as
// jobplane-system/name, as the in-cluster configuration would.
func serviceAccountKubeconfig(t *testing.T, apiserver *kubetest.APIServer, dir, name string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: apiserver.Config.Host, InsecureSkipTLSVerify: true}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: serviceAccountToken(t, apiserver, "jobplane-system", name)}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: name}
	cfg.CurrentContext = "test"
	path := filepath.Join(dir, name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
