package e2e

import (
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/jobplane/jobplane/lib/kubetest"
)

// scopedCollection matches the cluster-wide collections of pods, Jobs and
// CronJobs: what the informers of the executor and of the cron service
// list and watch.
var scopedCollection = regexp.MustCompile(`^(/api/v1|/apis/[^/]+/[^/]+)/(pods|jobs|cronjobs)$`)

// scopedKubeconfig starts, until tb ends, a reverse proxy to the cluster's
// API server on loopback, and returns the path of a kubeconfig reaching it
// without credentials (the proxy sends the admin's). The proxy passes every
// request on unchanged, but for the cluster-wide lists and watches of pods,
// Jobs and CronJobs, to which it adds fieldSelector (on metadata.namespace):
// a process behind it sees only the namespaces fieldSelector selects, as a
// namespace-scoped installation would. Requests naming a namespace, writes,
// Leases and access reviews pass as they are.
func scopedKubeconfig(tb testing.TB, cluster *kubetest.Cluster, fieldSelector string) string {
	tb.Helper()
	target, err := url.Parse(cluster.Config.Host)
	if err != nil {
		tb.Fatal(err)
	}
	transport, err := rest.TransportFor(cluster.Config)
	if err != nil {
		tb.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			if r.In.Method != http.MethodGet || !scopedCollection.MatchString(r.In.URL.Path) {
				return
			}
			q := r.Out.URL.Query()
			selector := fieldSelector
			if have := q.Get("fieldSelector"); have != "" {
				selector = have + "," + selector
			}
			q.Set("fieldSelector", selector)
			r.Out.URL.RawQuery = q.Encode()
		},
		Transport: transport,
		// Watches stream: every event is passed on at once.
		FlushInterval: -1,
		// A process stopped mid-watch makes the proxy log a broken pipe.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 30 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			tb.Logf("API proxy for %q: %v", fieldSelector, err)
		}
	}()
	tb.Cleanup(func() { _ = srv.Close() })

	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["scoped"] = &clientcmdapi.Cluster{Server: "http://" + ln.Addr().String()}
	cfg.AuthInfos["scoped"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["scoped"] = &clientcmdapi.Context{Cluster: "scoped", AuthInfo: "scoped"}
	cfg.CurrentContext = "scoped"
	path := filepath.Join(tb.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		tb.Fatal(err)
	}
	return path
}
