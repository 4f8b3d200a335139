package grpcserver_test

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/grpcserver/grpctest"
)

// scrape GETs url with the Authorization header authorization (none when
// empty) and returns the status and body.
func scrape(t *testing.T, client *http.Client, url, authorization string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("%s: 401 without WWW-Authenticate", url)
	}
	return resp.StatusCode, string(body)
}

// metricsCase is one request to the metrics port and what it must get.
type metricsCase struct {
	name          string
	path          string
	authorization string
	want          int
	bodySays      string
}

func checkMetricsCases(t *testing.T, client *http.Client, baseURL string, cases []metricsCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := scrape(t, client, baseURL+tc.path, tc.authorization)
			if code != tc.want || !strings.Contains(body, tc.bodySays) {
				t.Errorf("GET %s: %d %q, want %d saying %q", tc.path, code, body, tc.want, tc.bodySays)
			}
		})
	}
}

func TestMetricsAreServedOnlyToCallersAllowedToGetThem(t *testing.T) {
	cluster := newFakeCluster()
	cluster.tokens["prometheus-token"] = authenticationv1.UserInfo{Username: "prometheus"}
	cluster.tokens["alice-token"] = authenticationv1.UserInfo{Username: "alice"}
	cluster.grantPath("prometheus", "get", "/metrics")
	srv := authServer(t, cluster, nil)

	checkMetricsCases(t, http.DefaultClient, srv.MetricsURL, []metricsCase{
		{"no credentials", "/metrics", "", http.StatusUnauthorized, `no credentials: send the header "authorization: Bearer <token>"`},
		{"a refused token", "/metrics", "Bearer forged", http.StatusUnauthorized, "the bearer token was refused"},
		{"another scheme", "/metrics", "Basic cHJvbWV0aGV1czpwYXNzd29yZA==", http.StatusUnauthorized, `must be "Bearer <token>"`},
		{"allowed", "/metrics", "Bearer prometheus-token", http.StatusOK, "go_goroutines"},
		{"authenticated, not allowed", "/metrics", "Bearer alice-token", http.StatusForbidden, `User "alice" cannot get path "/metrics"`},
		{"liveness is open", "/healthz", "", http.StatusOK, "ok"},
		{"readiness is open", "/readyz", "", http.StatusOK, "ok"},
		{"liveness with a refused token", "/healthz", "Bearer forged", http.StatusOK, "ok"},
		// Any other path, a debug endpoint added later, is behind the same door.
		{"another path, no credentials", "/debug/pprof/", "", http.StatusUnauthorized, "no credentials"},
		{"another path, allowed only /metrics", "/debug/pprof/", "Bearer prometheus-token", http.StatusForbidden, `User "prometheus" cannot get path "/debug/pprof/"`},
	})

	t.Run("the API server does not answer", func(t *testing.T) {
		cluster.setDown(true)
		defer cluster.setDown(false)
		// A token not seen yet: the cache cannot answer.
		cluster.tokens["grafana-token"] = authenticationv1.UserInfo{Username: "grafana"}
		if code, body := scrape(t, http.DefaultClient, srv.MetricsURL+"/metrics", "Bearer grafana-token"); code != http.StatusServiceUnavailable {
			t.Errorf("%d %q, want 503", code, body)
		}
	})
}

// With -profiling, Go's profiles are served behind the same door as
// /metrics: to callers allowed get on their path only.
func TestProfilesAreServedOnlyToCallersAllowedToGetThem(t *testing.T) {
	cluster := newFakeCluster()
	cluster.tokens["prometheus-token"] = authenticationv1.UserInfo{Username: "prometheus"}
	cluster.tokens["profiler-token"] = authenticationv1.UserInfo{Username: "profiler"}
	cluster.grantPath("prometheus", "get", "/metrics")
	cluster.grantPath("profiler", "get", "/debug/pprof/heap")
	srv := authServer(t, cluster, func(c *grpcserver.Config) { c.Profiling = true })

	checkMetricsCases(t, http.DefaultClient, srv.MetricsURL, []metricsCase{
		{"no credentials", "/debug/pprof/heap?debug=1", "", http.StatusUnauthorized, "no credentials"},
		{"allowed /metrics only", "/debug/pprof/heap?debug=1", "Bearer prometheus-token", http.StatusForbidden, `cannot get path "/debug/pprof/heap"`},
		{"allowed", "/debug/pprof/heap?debug=1", "Bearer profiler-token", http.StatusOK, "heap profile"},
		{"another profile", "/debug/pprof/goroutine?debug=1", "Bearer profiler-token", http.StatusForbidden, `cannot get path "/debug/pprof/goroutine"`},
	})
}

func TestHealthIsAnsweredWithoutAskingTheAPIServer(t *testing.T) {
	cluster := newFakeCluster()
	srv := authServer(t, cluster, nil)
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, _ := scrape(t, http.DefaultClient, srv.MetricsURL+path, "Bearer forged"); code != http.StatusOK {
			t.Errorf("%s: %d", path, code)
		}
	}
	if n := cluster.count("tokenreviews") + cluster.count("subjectaccessreviews"); n != 0 {
		t.Errorf("%d reviews for health checks", n)
	}
}

func TestMetricsScrapesAreReviewedOncePerTTL(t *testing.T) {
	cluster := newFakeCluster()
	cluster.tokens["prometheus-token"] = authenticationv1.UserInfo{Username: "prometheus"}
	cluster.grantPath("prometheus", "get", "/metrics")
	srv := authServer(t, cluster, nil)
	for range 5 {
		if code, _ := scrape(t, http.DefaultClient, srv.MetricsURL+"/metrics", "Bearer prometheus-token"); code != http.StatusOK {
			t.Fatalf("scrape: %d", code)
		}
	}
	if tr, sar := cluster.count("tokenreviews"), cluster.count("subjectaccessreviews"); tr != 1 || sar != 1 {
		t.Errorf("%d TokenReviews and %d SubjectAccessReviews for 5 scrapes within the TTL, want 1 and 1", tr, sar)
	}
}

func TestAnonymousScrapesAreAuthorizedLikeAnyOther(t *testing.T) {
	cluster := newFakeCluster()
	srv := authServer(t, cluster, func(c *grpcserver.Config) { c.Auth.Anonymous = true })
	checkMetricsCases(t, http.DefaultClient, srv.MetricsURL, []metricsCase{
		{"anonymous, not allowed", "/metrics", "", http.StatusForbidden, `User "system:anonymous" cannot get path "/metrics"`},
		{"a refused token is not anonymous", "/metrics", "Bearer forged", http.StatusUnauthorized, "refused"},
	})
	cluster.grantPath("system:anonymous", "get", "/metrics")
	srv = authServer(t, cluster, func(c *grpcserver.Config) { c.Auth.Anonymous = true })
	checkMetricsCases(t, http.DefaultClient, srv.MetricsURL, []metricsCase{
		{"anonymous, allowed", "/metrics", "", http.StatusOK, "go_goroutines"},
	})
}

func TestMetricsCanBeOpenOnLoopback(t *testing.T) {
	cluster := newFakeCluster()
	srv := authServer(t, cluster, func(c *grpcserver.Config) {
		c.MetricsAddr = "127.0.0.1:0"
		c.Auth.AllowUnauthenticatedMetrics = true
	})
	checkMetricsCases(t, http.DefaultClient, srv.MetricsURL, []metricsCase{
		{"no credentials", "/metrics", "", http.StatusOK, "go_goroutines"},
		{"a refused token, never reviewed", "/metrics", "Bearer forged", http.StatusOK, "go_goroutines"},
		{"readiness", "/readyz", "", http.StatusOK, "ok"},
	})
	if n := cluster.count("tokenreviews") + cluster.count("subjectaccessreviews"); n != 0 {
		t.Errorf("%d reviews with metrics open", n)
	}
}

func TestMetricsAreServedOverTLSWhenGRPCIs(t *testing.T) {
	ca := grpctest.NewCA(t, "jobplane-clients")
	server := ca.ServerCert(t, "server")
	cluster := newFakeCluster()
	cluster.tokens["prometheus-token"] = authenticationv1.UserInfo{Username: "prometheus"}
	cluster.grantPath("prometheus", "get", "/metrics")
	cluster.grantPath("scraper", "get", "/metrics")
	srv := authServer(t, cluster, func(c *grpcserver.Config) {
		c.TLSCertFile, c.TLSKeyFile, c.ClientCAFile = server.CertFile, server.KeyFile, ca.CertFile
	})
	if !strings.HasPrefix(srv.MetricsURL, "https://") {
		t.Fatalf("metrics at %s, want https", srv.MetricsURL)
	}
	client := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, Certificates: certs}}}
	}
	checkMetricsCases(t, client(), srv.MetricsURL, []metricsCase{
		{"a token", "/metrics", "Bearer prometheus-token", http.StatusOK, "go_goroutines"},
		{"no credentials", "/metrics", "", http.StatusUnauthorized, "no credentials"},
		// A kubelet's probe presents no certificate.
		{"readiness without a certificate", "/readyz", "", http.StatusOK, "ok"},
	})
	checkMetricsCases(t, client(ca.ClientCert(t, "scraper", "monitoring").Certificate), srv.MetricsURL, []metricsCase{
		{"a client certificate", "/metrics", "", http.StatusOK, "go_goroutines"},
	})
	checkMetricsCases(t, client(ca.ClientCert(t, "bob").Certificate), srv.MetricsURL, []metricsCase{
		{"a client certificate, not allowed", "/metrics", "", http.StatusForbidden, `User "bob" cannot get path "/metrics"`},
	})
	plain := "http://" + strings.TrimPrefix(srv.MetricsURL, "https://")
	if code, _ := scrape(t, http.DefaultClient, plain+"/metrics", "Bearer prometheus-token"); code == http.StatusOK {
		t.Error("metrics served in plaintext beside TLS")
	}
}

// As kube-controller-manager without an authorization kubeconfig: the
// service runs, says at start that no one can read its metrics, and answers
// 503 rather than serve them unchecked.
func TestWithoutAnAPIServerMetricsAreServedToNoOne(t *testing.T) {
	srv := serve(t, fastShutdown(), nil)
	checkMetricsCases(t, http.DefaultClient, srv.metricsURL, []metricsCase{
		{"metrics", "/metrics", "", http.StatusServiceUnavailable, "no Kubernetes API"},
		{"liveness", "/healthz", "", http.StatusOK, "ok"},
	})
	if !strings.Contains(srv.logs.String(), "metrics are served to no one") {
		t.Errorf("nothing said at start; logs:\n%s", srv.logs.String())
	}
}

// blockingCollector holds every scrape until released.
type blockingCollector struct {
	entered chan struct{}
	release chan struct{}
}

func (b *blockingCollector) Describe(chan<- *prometheus.Desc) {}

func (b *blockingCollector) Collect(chan<- prometheus.Metric) {
	b.entered <- struct{}{}
	<-b.release
}

// The metrics port serves so many scrapes at once, half of them from one
// host, and answers the others 429 with Retry-After, at once; its probes
// are never held back.
func TestScrapesAreBounded(t *testing.T) {
	srv := authServer(t, newFakeCluster(), func(c *grpcserver.Config) {
		c.MetricsAddr = "127.0.0.1:0"
		c.Auth.AllowUnauthenticatedMetrics = true
	})
	slow := &blockingCollector{entered: make(chan struct{}), release: make(chan struct{})}
	srv.Registry().MustRegister(slow)
	from := func(ip net.IP) *http.Client {
		return &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}).DialContext}}
	}
	refused := func(what string, client *http.Client) {
		t.Helper()
		client.Timeout = 5 * time.Second // served, it would wait for the slow collector
		resp, err := client.Get(srv.MetricsURL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s: %d, Retry-After %q; want 429 with Retry-After", what, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	var wg sync.WaitGroup
	for i, ip := range []net.IP{net.IPv4(127, 0, 0, 2), net.IPv4(127, 0, 0, 2), net.IPv4(127, 0, 0, 3), net.IPv4(127, 0, 0, 3)} {
		wg.Go(func() { scrape(t, from(ip), srv.MetricsURL+"/metrics", "") })
		<-slow.entered
		if i == 1 {
			refused("a third scrape from a host with two in flight", from(ip))
		}
	}
	refused("a fifth scrape", from(net.IPv4(127, 0, 0, 1)))
	checkMetricsCases(t, http.DefaultClient, srv.MetricsURL, []metricsCase{
		{"liveness beside four scrapes", "/healthz", "", http.StatusOK, "ok"},
		{"readiness beside four scrapes", "/readyz", "", http.StatusOK, "ok"},
	})
	close(slow.release)
	wg.Wait()
}
