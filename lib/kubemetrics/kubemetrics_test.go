package kubemetrics

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestResource(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/namespaces/ns/pods":                            "pods",
		"/api/v1/namespaces/ns/pods/p":                          "pods",
		"/apis/batch/v1/namespaces/ns/jobs/j/status":            "jobs/status",
		"/apis/jobplane.dev/v1/namespaces/ns/cronjobs/c/status": "cronjobs/status",
		"/apis/coordination.k8s.io/v1/namespaces/ns/leases/l":   "leases",
	} {
		if got := Resource(path); got != want {
			t.Errorf("Resource(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestTransportCountsThenSends(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	var counted []string
	client := &http.Client{Transport: Transport(http.DefaultTransport, func(r *http.Request) {
		counted = append(counted, r.Method+" "+Resource(r.URL.Path))
	})}
	resp, err := client.Post(srv.URL+"/apis/batch/v1/namespaces/ns/jobs", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(counted) != 1 || counted[0] != "POST jobs" {
		t.Errorf("counted %q, want [POST jobs]", counted)
	}
}
