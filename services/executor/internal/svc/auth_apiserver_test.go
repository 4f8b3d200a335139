package svc_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/auth"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/grpcserver/grpctest"
	"github.com/jobplane/jobplane/lib/kubetest"
	"github.com/jobplane/jobplane/lib/plan"
	"github.com/jobplane/jobplane/services/executor/internal/svc"
)

// authTTL is the cache TTL of the servers under test: short, so that a
// revoked permission is seen within the test.
const authTTL = 2 * time.Second

// securedAPI is the executor's gRPC service behind the production chassis
// with TLS, mutual TLS and auth on, against a real kube-apiserver with RBAC,
// with a fake controller.
type securedAPI struct {
	kube   kubernetes.Interface
	apisrv *kubetest.APIServer
	runner *fakeRunner
	ca     *grpctest.CA
	addr   string
	// api has no client certificate: calls carry tokens.
	api jobplanev1.ExecutorServiceClient
}

// startSecuredAPI serves the executor acting as identity (the admin when
// nil): its informer, its writes, its reviews and its impersonation.
func startSecuredAPI(t *testing.T, apiserver *kubetest.APIServer, identity *rest.Config, serverOpts ...grpcserver.Option) *securedAPI {
	t.Helper()
	if identity == nil {
		identity = apiserver.Config
	}
	executor, err := kubernetes.NewForConfig(identity)
	if err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(executor, 0)
	lister := factory.Batch().V1().Jobs().Lister()
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() {
		close(stop)
		factory.Shutdown()
	})
	factory.WaitForCacheSync(stop)
	impersonate, err := svc.Impersonating(identity)
	if err != nil {
		t.Fatal(err)
	}

	ca := grpctest.NewCA(t, "jobplane-clients")
	pair := ca.ServerCert(t, "executor")
	cfg := grpcserver.Defaults("127.0.0.1:0", "")
	cfg.ShutdownDrain = 0
	cfg.TLSCertFile, cfg.TLSKeyFile, cfg.ClientCAFile = pair.CertFile, pair.KeyFile, ca.CertFile
	cfg.Auth.TokenCacheTTL, cfg.Auth.AuthzCacheTTL = authTTL, authTTL
	runner := &fakeRunner{leader: true}
	srv := grpctest.StartWith(t, grpctest.Options{
		Config: &cfg,
		Server: append([]grpcserver.Option{grpcserver.WithKubeClient(executor)}, serverOpts...),
		Dial:   []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: ca.Pool}))},
	}, func(s *grpcserver.Server) {
		s.RegisterService(&jobplanev1.ExecutorService_ServiceDesc, svc.NewExecutorService(svc.Config{
			Client:      executor,
			Impersonate: impersonate,
			Jobs:        lister,
			PodsOf:      func(*batchv1.Job) ([]*corev1.Pod, error) { return nil, nil },
			Runner:      runner,
			ManagedBy:   managedBy,
			Log:         slog.New(slog.DiscardHandler),
		}))
	})
	return &securedAPI{kube: apiserver.Client, apisrv: apiserver, runner: runner, ca: ca, addr: srv.Addr,
		api: jobplanev1.NewExecutorServiceClient(srv.Conn)}
}

// withCert is a client presenting cert (from whatever CA).
func (s *securedAPI) withCert(t *testing.T, cert tls.Certificate) jobplanev1.ExecutorServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		RootCAs:              s.ca.Pool,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil },
	})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return jobplanev1.NewExecutorServiceClient(conn)
}

func createNamespace(t *testing.T, kube kubernetes.Interface, name string, labels map[string]string) {
	t.Helper()
	_, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// serviceAccount creates a ServiceAccount and returns its subject.
func serviceAccount(t *testing.T, kube kubernetes.Interface, namespace, name string) rbacv1.Subject {
	t.Helper()
	_, err := kube.CoreV1().ServiceAccounts(namespace).Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}
}

// token asks the TokenRequest API for a token of the ServiceAccount, for
// audiences (the API server's when none).
func token(t *testing.T, kube kubernetes.Interface, sa rbacv1.Subject, audiences ...string) string {
	t.Helper()
	tr, err := kube.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(context.Background(), sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// grant gives subject rules in namespace with a Role and RoleBinding named
// name, and returns a function that deletes the RoleBinding.
func grant(t *testing.T, kube kubernetes.Interface, namespace, name string, subject rbacv1.Subject, rules ...rbacv1.PolicyRule) func() {
	t.Helper()
	ctx := context.Background()
	if _, err := kube.RbacV1().Roles(namespace).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := kube.RbacV1().RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{subject},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := kube.RbacV1().RoleBindings(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// grantEverywhere gives subject rules in every namespace.
func grantEverywhere(t *testing.T, kube kubernetes.Interface, subject rbacv1.Subject, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	name := "test-" + strings.NewReplacer(":", "-").Replace(subject.Name)
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{subject},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// jobWriter is what a team needs to run Jobs through jobplane in its
// namespace, as a Role would grant it.
var jobWriter = []rbacv1.PolicyRule{
	{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "watch", "create", "delete"}},
	{APIGroups: []string{"batch"}, Resources: []string{"jobs/status"}, Verbs: []string{"update"}},
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "create", "delete", "patch"}},
}

func as(token string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token)
}

func TestAuthAgainstTheAPIServer(t *testing.T) {
	// Privileged containers are allowed, as in clusters that run them: Pod
	// Security is what refuses them where it is enforced.
	apiserver := kubetest.StartAPIServer(t, kubetest.WithFlags("--allow-privileged=true"))
	s := startSecuredAPI(t, apiserver, nil)
	kube := s.kube
	ctx := context.Background()
	createNamespace(t, kube, "team-a", nil)
	createNamespace(t, kube, "team-b", nil)
	alice := serviceAccount(t, kube, "team-a", "alice")
	grant(t, kube, "team-a", "alice-jobs", alice, jobWriter...)
	aliceToken := token(t, kube, alice)
	aliceUser := "system:serviceaccount:team-a:alice"

	// A Job of team B that alice must not be able to touch.
	theirs := job("team-b", "theirs")
	theirs.UID, theirs.ResourceVersion = "", ""
	theirs, err := kube.BatchV1().Jobs("team-b").Create(ctx, theirs, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("a caller with rights in namespace A only can do nothing in B", func(t *testing.T) {
		// Alice's rights work in her namespace.
		if _, err := s.api.SubmitJob(as(aliceToken), &jobplanev1.SubmitJobRequest{Job: contractJob(t, "team-a", "mine")}); err != nil {
			t.Fatalf("SubmitJob in team-a: %v", err)
		}
		if _, err := s.api.ListJobs(as(aliceToken), &jobplanev1.ListJobsRequest{Namespace: "team-a"}); err != nil {
			t.Fatalf("ListJobs in team-a: %v", err)
		}

		deletes := &jobplanev1.SyncPlan{Actions: []*jobplanev1.Action{{Kind: &jobplanev1.Action_DeletePods{DeletePods: &jobplanev1.DeletePodsAction{
			Pods: []*jobplanev1.PodRef{{Name: "theirs-x", Uid: "00000000-0000-0000-0000-000000000001"}},
		}}}}}
		attempts := []struct {
			rpc, verb string
			call      func() error
		}{
			{"SubmitJob", "create", func() error {
				_, err := s.api.SubmitJob(as(aliceToken), &jobplanev1.SubmitJobRequest{Job: contractJob(t, "team-b", "intruder")})
				return err
			}},
			{"GetJob", "get", func() error {
				_, err := s.api.GetJob(as(aliceToken), &jobplanev1.GetJobRequest{Namespace: "team-b", Name: "theirs"})
				return err
			}},
			{"ListJobs", "list", func() error {
				_, err := s.api.ListJobs(as(aliceToken), &jobplanev1.ListJobsRequest{Namespace: "team-b"})
				return err
			}},
			{"ListJobs of every namespace", "list", func() error {
				_, err := s.api.ListJobs(as(aliceToken), &jobplanev1.ListJobsRequest{})
				return err
			}},
			{"WatchJobs", "watch", func() error {
				stream, err := s.api.WatchJobs(as(aliceToken), &jobplanev1.WatchJobsRequest{Namespace: "team-b"})
				if err != nil {
					return err
				}
				_, err = stream.Recv()
				return err
			}},
			{"DeleteJob", "delete", func() error {
				_, err := s.api.DeleteJob(as(aliceToken), &jobplanev1.DeleteJobRequest{Namespace: "team-b", Name: "theirs"})
				return err
			}},
			{"Execute", "update", func() error {
				_, err := s.api.Execute(as(aliceToken), &jobplanev1.ExecuteRequest{Namespace: "team-b", Name: "theirs", Uid: string(theirs.UID), Plan: deletes})
				return err
			}},
			{"SyncJob", "update", func() error {
				_, err := s.api.SyncJob(as(aliceToken), &jobplanev1.SyncJobRequest{Namespace: "team-b", Name: "theirs"})
				return err
			}},
		}
		for _, a := range attempts {
			err := a.call()
			if status.Code(err) != codes.PermissionDenied {
				t.Errorf("%s in team-b: %v, want PermissionDenied", a.rpc, err)
				continue
			}
			if want := `User "` + aliceUser + `" cannot ` + a.verb + ` resource "jobs`; !strings.Contains(status.Convert(err).Message(), want) {
				t.Errorf("%s: %q does not say %q", a.rpc, status.Convert(err).Message(), want)
			}
		}
		list, err := kube.BatchV1().Jobs("team-b").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 1 || list.Items[0].Name != "theirs" || list.Items[0].UID != theirs.UID || list.Items[0].ResourceVersion != theirs.ResourceVersion {
			t.Errorf("team-b changed: %v", list.Items)
		}
		if len(s.runner.calls) != 0 {
			t.Errorf("the controller was asked %v", s.runner.calls)
		}
	})

	t.Run("callers without a valid token are unauthenticated", func(t *testing.T) {
		past := time.Now().Add(-time.Hour).Unix()
		expired := resign(t, apiserver.ServiceAccountKeyFile, aliceToken, func(claims map[string]any) {
			claims["iat"], claims["nbf"], claims["exp"] = past-600, past-600, past
		})
		otherKey := resign(t, writeRSAKey(t), aliceToken, func(map[string]any) {})
		for name, ctx := range map[string]context.Context{
			"no token":                      context.Background(),
			"an expired token":              as(expired),
			"a token for another audience":  as(token(t, kube, alice, "some-other-service")),
			"a token signed by another key": as(otherKey),
			"a made-up token":               as("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhZG1pbiJ9.c2ln"),
		} {
			_, err := s.api.ListJobs(ctx, &jobplanev1.ListJobsRequest{Namespace: "team-a"})
			if status.Code(err) != codes.Unauthenticated {
				t.Errorf("%s: %v, want Unauthenticated", name, err)
			}
		}
	})

	t.Run("a client certificate is the user and groups it names", func(t *testing.T) {
		grant(t, kube, "team-a", "team-c-reads", rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "team-c"},
			rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"list"}})
		carol := s.withCert(t, s.ca.ClientCert(t, "carol", "team-c").Certificate)
		if _, err := carol.ListJobs(ctx, &jobplanev1.ListJobsRequest{Namespace: "team-a"}); err != nil {
			t.Errorf("carol in team-a: %v", err)
		}
		_, err := carol.ListJobs(ctx, &jobplanev1.ListJobsRequest{Namespace: "team-b"})
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), `User "carol" cannot list`) {
			t.Errorf("carol in team-b: %v", err)
		}

		other := grpctest.NewCA(t, "other")
		forged := other.ClientCert(t, "mallory", "system:masters").Certificate
		mallory := s.withCert(t, forged)
		_, err = mallory.ListJobs(ctx, &jobplanev1.ListJobsRequest{Namespace: "team-a"})
		if status.Code(err) != codes.Unavailable {
			t.Errorf("a certificate of another CA: %v, want Unavailable (no connection)", err)
		}
		// The server refuses it in the handshake, with a TLS alert.
		conn, err := tls.Dial("tcp", s.addr, &tls.Config{
			RootCAs: s.ca.Pool, NextProtos: []string{"h2"},
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &forged, nil },
		})
		if err == nil {
			// TLS 1.3: the client's side ends first; the alert comes with the first read.
			_, err = conn.Read(make([]byte, 1))
			conn.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("handshake with a certificate of another CA: %v, want a certificate alert", err)
		}
	})

	t.Run("a RoleBinding removed is effective within the TTL", func(t *testing.T) {
		dave := serviceAccount(t, kube, "team-a", "dave")
		revoke := grant(t, kube, "team-a", "dave-reads", dave, rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"list"}})
		daveToken := token(t, kube, dave)
		list := func() error {
			_, err := s.api.ListJobs(as(daveToken), &jobplanev1.ListJobsRequest{Namespace: "team-a"})
			return err
		}
		if err := list(); err != nil {
			t.Fatalf("before the RoleBinding is removed: %v", err)
		}
		revoke()
		revoked := time.Now()
		for status.Code(list()) != codes.PermissionDenied {
			// The API server's RBAC sees the removal within moments; the
			// cache adds at most its TTL.
			if time.Since(revoked) > authTTL+time.Second {
				t.Fatalf("dave still lists Jobs %s after his RoleBinding was removed (TTL %s)", time.Since(revoked), authTTL)
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Logf("effective after %s (TTL %s)", time.Since(revoked).Round(time.Millisecond), authTTL)
	})

	t.Run("admission sees the caller: a policy exempting the executor's identity refuses the caller's Job", func(t *testing.T) {
		// The policy refuses privileged Jobs but for cluster admins, which
		// is what the executor is here: without impersonation it would pass.
		createNamespace(t, kube, "guarded", map[string]string{"policy.jobplane.dev/no-privileged": "true"})
		grant(t, kube, "guarded", "alice-jobs", alice, jobWriter...)
		noPrivilegedJobs(t, kube)
		privileged := privilegedJob(t, "guarded", "privileged")
		aliceClient := impersonating(t, apiserver, aliceUser)
		waitFor(t, "the policy to be enforced", func() bool {
			_, err := aliceClient.BatchV1().Jobs("guarded").Create(ctx, privilegedKubeJob("guarded", "probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err != nil
		})

		_, err := s.api.SubmitJob(as(aliceToken), &jobplanev1.SubmitJobRequest{Job: privileged})
		// A policy's denial is the API server's Invalid (422) unless the
		// policy says otherwise: INVALID_ARGUMENT with its message.
		want := `ValidatingAdmissionPolicy 'no-privileged-jobs' with binding 'no-privileged-jobs' denied request: privileged containers are not allowed in Jobs`
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), want) {
			t.Errorf("SubmitJob of a privileged template: %v, want the policy's refusal %q", err, want)
		}
		if list, err := kube.BatchV1().Jobs("guarded").List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) != 0 {
			t.Errorf("left behind: %v %v", list.Items, err)
		}
		// The executor's own identity would have been let through.
		if _, err := kube.BatchV1().Jobs("guarded").Create(ctx, privilegedKubeJob("guarded", "probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("the policy refuses the executor's identity too, so this proves nothing: %v", err)
		}
	})

	t.Run("Pod Security restricted refuses a privileged template's pods, not its Job", func(t *testing.T) {
		// Pod Security's enforce mode applies to pods only; on Jobs it
		// warns. The Job is accepted; each pod the executor then creates
		// from it is refused by the admission, with this message, and
		// recorded as a FailedCreate event on the Job: no privileged pod
		// runs.
		createNamespace(t, kube, "restricted", map[string]string{
			"pod-security.kubernetes.io/enforce": "restricted",
			"pod-security.kubernetes.io/warn":    "restricted",
		})
		grant(t, kube, "restricted", "alice-jobs", alice, jobWriter...)
		resp, err := s.api.SubmitJob(as(aliceToken), &jobplanev1.SubmitJobRequest{Job: privilegedJob(t, "restricted", "privileged")})
		if err != nil {
			t.Fatalf("SubmitJob: %v", err)
		}
		stored, err := kube.BatchV1().Jobs("restricted").Get(ctx, resp.GetJob().GetMetadata().GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod := plan.NewPod(stored, plan.PodToCreate{GenerateName: stored.Name + "-", Finalizers: []string{plan.DefaultTrackingFinalizer}})
		_, err = kube.CoreV1().Pods("restricted").Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if want := `violates PodSecurity "restricted:latest": privileged (container "main" must not set securityContext.privileged=true)`; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the executor creating its pod: %v, want %q", err, want)
		}
	})
}

// privilegedJob is contractJob with a privileged container.
func privilegedJob(t *testing.T, namespace, name string) *jobplanev1.Job {
	t.Helper()
	j := contractJob(t, namespace, name)
	j.Spec.Template.Spec.Fields["containers"].GetListValue().GetValues()[0].GetStructValue().Fields["securityContext"] =
		structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"privileged": structpb.NewBoolValue(true)}})
	return j
}

func privilegedKubeJob(namespace, name string) *batchv1.Job {
	j := job(namespace, name)
	j.UID, j.ResourceVersion = "", ""
	j.Spec.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	return j
}

// noPrivilegedJobs installs a ValidatingAdmissionPolicy refusing Jobs with
// a privileged container in namespaces labelled
// policy.jobplane.dev/no-privileged, except to cluster admins.
func noPrivilegedJobs(t *testing.T, kube kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	_, err := kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "no-privileged-jobs"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}},
				},
			}}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{
				Name: "not-a-cluster-admin", Expression: `!("system:masters" in request.userInfo.groups)`,
			}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: `!object.spec.template.spec.containers.exists(c, has(c.securityContext) && has(c.securityContext.privileged) && c.securityContext.privileged)`,
				Message:    "privileged containers are not allowed in Jobs",
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "no-privileged-jobs"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        "no-privileged-jobs",
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"policy.jobplane.dev/no-privileged": "true"},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// impersonating is a client of apiserver acting as user.
func impersonating(t *testing.T, apiserver *kubetest.APIServer, user string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(apiserver.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 30s: %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The API server itself refuses a Job its caller may not create: SubmitJob
// acts as the caller. Here the chassis lets every authenticated call through
// to show it.
func TestSubmitJobIsRefusedByTheAPIServerForACallerWithoutRights(t *testing.T) {
	apiserver := kubetest.StartAPIServer(t)
	s := startSecuredAPI(t, apiserver, nil, grpcserver.WithAuthorizer(allowEveryone{}))
	createNamespace(t, s.kube, "team-a", nil)
	bob := serviceAccount(t, s.kube, "team-a", "bob")
	grant(t, s.kube, "team-a", "bob-reads", bob, rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list"}})

	_, err := s.api.SubmitJob(as(token(t, s.kube, bob)), &jobplanev1.SubmitJobRequest{Job: contractJob(t, "team-a", "bobs")})
	want := `jobs.batch is forbidden: User "system:serviceaccount:team-a:bob" cannot create resource "jobs" in API group "batch" in the namespace "team-a"`
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), want) {
		t.Fatalf("SubmitJob: %v, want the API server's %q", err, want)
	}
	if list, err := s.kube.BatchV1().Jobs("team-a").List(context.Background(), metav1.ListOptions{}); err != nil || len(list.Items) != 0 {
		t.Errorf("left behind: %v %v", list, err)
	}
}

type allowEveryone struct{}

func (allowEveryone) Authorize(context.Context, *auth.Identity, auth.Attributes) (auth.Decision, error) {
	return auth.Decision{Allowed: true}, nil
}

// resign returns tok with its claims changed by edit and signed with the
// RSA key in keyFile: with the API server's own service account key, a
// token it could have issued.
func resign(t *testing.T, keyFile, tok string, edit func(claims map[string]any)) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	edit(claims)
	payload, err = json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	signed := parts[0] + "." + base64.RawURLEncoding.EncodeToString(payload)
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(keyPEM)
	key, err := x509.ParsePKCS1PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func writeRSAKey(t *testing.T) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/other.key"
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
