package grpcserver_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/grpcserver/grpctest"
	"github.com/jobplane/jobplane/lib/kubetest"
)

// The planner's and cron's roles in deploy/ are exactly what they use to
// authenticate and authorize their callers and scrapers: with them a
// caller's token is reviewed and its permission checked; without any one
// permission, calls or scrapes of /metrics fail.
func TestThePlannersAndCronsRolesAreExactlyWhatTheyUse(t *testing.T) {
	apiserver := kubetest.StartAPIServer(t)
	deploy := filepath.Join("..", "..", "deploy", "kubernetes")
	apiserver.Apply(t, filepath.Join(deploy, "00-namespace.yaml"), filepath.Join(deploy, "20-rbac.yaml"))
	ctx := context.Background()

	// The caller: a ServiceAccount that may read CronJobs in default, and
	// the services' /metrics.
	if _, err := apiserver.Client.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "caller"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bindMetricsReader(t, apiserver, "default", "caller")
	if _, err := apiserver.Client.RbacV1().Roles("default").Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "cronjob-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"jobplane.dev"}, Resources: []string{"cronjobs"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := apiserver.Client.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "cronjob-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "cronjob-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: "caller"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := apiserver.Client.CoreV1().ServiceAccounts("default").CreateToken(ctx, "caller", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	callerCtx := bearer(tr.Status.Token)
	scrapeMetrics := func(srv *grpctest.Server) error {
		if code, body := scrape(t, http.DefaultClient, srv.MetricsURL+"/metrics", "Bearer "+tr.Status.Token); code != http.StatusOK {
			return fmt.Errorf("/metrics: %d %s", code, body)
		}
		return nil
	}

	// serveAs serves the services as the ServiceAccount of the service.
	serveAs := func(service string) *grpctest.Server {
		client, err := kubernetes.NewForConfig(apiserver.ServiceAccountConfig(t, "jobplane-system", "jobplane-"+service))
		if err != nil {
			t.Fatal(err)
		}
		cfg := fastShutdown()
		cfg.Auth.Anonymous = false
		cfg.Auth.TokenCacheTTL, cfg.Auth.AuthzCacheTTL = time.Second, time.Second
		return grpctest.StartWith(t, grpctest.Options{Config: &cfg, Server: []grpcserver.Option{grpcserver.WithKubeClient(client)}},
			func(s *grpcserver.Server) {
				s.RegisterService(&jobplanev1.PlannerService_ServiceDesc, whoAmI{})
				s.RegisterService(&jobplanev1.CronService_ServiceDesc, emptyCron{})
			})
	}
	within := 4 * time.Second

	planner := serveAs("planner")
	if unneeded := apiserver.EachPermissionIsNeeded(t, "", "jobplane-planner", within, func() error {
		if _, err := whoami(t, planner.Conn, callerCtx); err != nil {
			return err
		}
		return scrapeMetrics(planner)
	}); len(unneeded) > 0 {
		t.Errorf("jobplane-planner grants what the planner does not use: %v", unneeded)
	}

	cron := serveAs("cron")
	if unneeded := apiserver.EachPermissionIsNeeded(t, "", "jobplane-cron", within, func() error {
		// Unimplemented: authenticated and authorized, the handler answered.
		_, err := jobplanev1.NewCronServiceClient(cron.Conn).GetCronJob(callerCtx, &jobplanev1.GetCronJobRequest{Namespace: "default", Name: "nightly"})
		if status.Code(err) != codes.Unimplemented {
			return err
		}
		return scrapeMetrics(cron)
	}); len(unneeded) > 0 {
		t.Errorf("jobplane-cron grants what cron does not use: %v", unneeded)
	}
}

// The ClusterRole jobplane-metrics-reader of deploy/ is what a scraper
// needs, and nothing else lets one in: a ServiceAccount bound to it reads
// /metrics of a service run as deploy/ runs it (its own ServiceAccount and
// role, TLS, tokens of its audience), one without it is forbidden, and a
// token of another audience or none is not authenticated. Health is open.
func TestOnlyScrapersBoundToTheMetricsReaderRoleReadMetrics(t *testing.T) {
	apiserver := kubetest.StartAPIServer(t)
	deploy := filepath.Join("..", "..", "deploy", "kubernetes")
	apiserver.Apply(t, filepath.Join(deploy, "00-namespace.yaml"), filepath.Join(deploy, "20-rbac.yaml"))
	ctx := context.Background()
	if _, err := apiserver.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"prometheus", "stranger"} {
		if _, err := apiserver.Client.CoreV1().ServiceAccounts("monitoring").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bindMetricsReader(t, apiserver, "monitoring", "prometheus")
	token := func(name string, audiences ...string) string {
		tr, err := apiserver.Client.CoreV1().ServiceAccounts("monitoring").CreateToken(ctx, name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: ptr.To[int64](3600)},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + tr.Status.Token
	}

	client, err := kubernetes.NewForConfig(apiserver.ServiceAccountConfig(t, "jobplane-system", "jobplane-planner"))
	if err != nil {
		t.Fatal(err)
	}
	ca := grpctest.NewCA(t, "jobplane")
	pair := ca.ServerCert(t, "planner")
	cfg := fastShutdown()
	cfg.Auth.Anonymous = false
	cfg.TLSCertFile, cfg.TLSKeyFile = pair.CertFile, pair.KeyFile
	cfg.Auth.Audiences = "jobplane-planner"
	planner := grpctest.StartWith(t, grpctest.Options{Config: &cfg, Server: []grpcserver.Option{grpcserver.WithKubeClient(client)}},
		func(s *grpcserver.Server) { s.RegisterService(&jobplanev1.PlannerService_ServiceDesc, whoAmI{}) })
	https := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool}}}

	checkMetricsCases(t, https, planner.MetricsURL, []metricsCase{
		{"bound to jobplane-metrics-reader", "/metrics", token("prometheus", "jobplane-planner"), http.StatusOK, "grpc_server_started_total"},
		{"not bound", "/metrics", token("stranger", "jobplane-planner"), http.StatusForbidden,
			`User "system:serviceaccount:monitoring:stranger" cannot get path "/metrics"`},
		{"a token of the API server's audience", "/metrics", token("prometheus"), http.StatusUnauthorized, "another audience"},
		{"no credentials", "/metrics", "", http.StatusUnauthorized, "no credentials"},
		{"readiness without credentials", "/readyz", "", http.StatusOK, "ok"},
		{"liveness without credentials", "/healthz", "", http.StatusOK, "ok"},
	})
}

// bindMetricsReader binds deploy/'s ClusterRole jobplane-metrics-reader to
// the ServiceAccount namespace/name.
func bindMetricsReader(t *testing.T, apiserver *kubetest.APIServer, namespace, name string) {
	t.Helper()
	if _, err := apiserver.Client.RbacV1().ClusterRoleBindings().Create(context.Background(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "jobplane-metrics-reader-" + namespace + "-" + name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "jobplane-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
