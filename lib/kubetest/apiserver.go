package kubetest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// APIServer is a running etcd + kube-apiserver pair, with no controllers.
type APIServer struct {
	// Config reaches the apiserver as a cluster admin.
	Config *rest.Config
	// Client is a clientset built from Config.
	Client kubernetes.Interface
	// Dir holds the data and logs of both processes.
	Dir string
	// ServiceAccountKeyFile is the PEM RSA key that signs the service
	// account tokens it issues (tests forge expired ones with it).
	ServiceAccountKeyFile string

	apiServerPID int
}

// PeakRSS is the most resident memory kube-apiserver has had (VmHWM),
// in bytes.
func (a *APIServer) PeakRSS(tb testing.TB) int64 {
	tb.Helper()
	n, err := peakRSS(a.apiServerPID)
	if err != nil {
		tb.Fatalf("kube-apiserver: %v", err)
	}
	return n
}

const adminToken = "jobplane-test-admin"

// ServiceAccountIssuer is the issuer of the service account tokens, and
// their default audience.
const ServiceAccountIssuer = "https://kubernetes.default.svc"

// Option changes how StartAPIServer starts the API server.
type Option func(*apiServerOptions)

type apiServerOptions struct {
	flags []string
}

// WithFlags adds flags to kube-apiserver's command line, after (and so
// overriding) its own.
func WithFlags(flags ...string) Option {
	return func(o *apiServerOptions) { o.flags = append(o.flags, flags...) }
}

// StartAPIServer starts etcd and kube-apiserver on free loopback ports and
// stops them (removing their data) when the test ends.
func StartAPIServer(tb testing.TB, opts ...Option) *APIServer {
	tb.Helper()
	var o apiServerOptions
	for _, opt := range opts {
		opt(&o)
	}
	bin := Binaries(tb)
	dir := tb.TempDir()
	ports := freePorts(tb, 3)
	etcdClient, etcdPeer, apiPort := ports[0], ports[1], ports[2]
	logs := []string{filepath.Join(dir, "etcd.log"), filepath.Join(dir, "kube-apiserver.log")}
	showLogsOnFailure(tb, func() []string { return logs })

	clientURL := fmt.Sprintf("http://127.0.0.1:%d", etcdClient)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPeer)
	start(tb, filepath.Join(bin, "etcd"), logs[0],
		"--name=test",
		"--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+clientURL, "--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=test="+peerURL,
		"--unsafe-no-fsync",
		"--log-level=warn",
	)

	saKey := writeServiceAccountKey(tb, dir)
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(adminToken+",admin,admin,system:masters\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	apiServerPID := start(tb, filepath.Join(bin, "kube-apiserver"), logs[1], append([]string{
		"--etcd-servers=" + clientURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(apiPort),
		"--cert-dir=" + filepath.Join(dir, "certs"),
		"--token-auth-file=" + tokens,
		"--authorization-mode=RBAC",
		"--service-account-issuer=" + ServiceAccountIssuer,
		"--service-account-key-file=" + saKey,
		"--service-account-signing-key-file=" + saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		// Pods are created without a ServiceAccount object existing; no
		// controller-manager runs here to create the default one.
		"--disable-admission-plugins=ServiceAccount",
		"--enable-priority-and-fairness=false",
	}, o.flags...)...)

	cfg := &rest.Config{
		Host:            fmt.Sprintf("https://127.0.0.1:%d", apiPort),
		BearerToken:     adminToken,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             -1, // tests are not rate limited
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	waitReady(tb, client)
	return &APIServer{Config: cfg, Client: client, Dir: dir, ServiceAccountKeyFile: saKey, apiServerPID: apiServerPID}
}

// start runs a component with its output in logPath and stops it when the
// test ends; it returns the component's process id.
func start(tb testing.TB, binary, logPath string, args ...string) int {
	tb.Helper()
	logFile, err := os.Create(logPath)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Own process group, so nothing is left behind if the test binary dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("starting %s: %v", binary, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		logFile.Close()
	})
	return cmd.Process.Pid
}

func writeServiceAccountKey(tb testing.TB, dir string) string {
	tb.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(dir, "sa.key")
	block := &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// waitReady waits for /readyz and for the default namespace to exist.
func waitReady(tb testing.TB, client kubernetes.Interface) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var lastErr error
	for ctx.Err() == nil {
		_, lastErr = client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if lastErr == nil {
			if _, lastErr = client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); lastErr == nil {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	tb.Fatalf("kube-apiserver not ready after 90s: %v", lastErr)
}

// WriteKubeconfig writes a kubeconfig reaching the apiserver as an admin and
// returns its path.
func (a *APIServer) WriteKubeconfig(tb testing.TB) string {
	tb.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: a.Config.Host, InsecureSkipTLSVerify: true}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: a.Config.BearerToken}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	cfg.CurrentContext = "test"
	path := filepath.Join(a.Dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		tb.Fatal(err)
	}
	return path
}
