package controller

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The cron service's Kubernetes clients count their requests by method
// and resource, as the executor's do.
func TestTransportCountsAPIRequests(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	m := NewMetrics(false)
	client := &http.Client{Transport: m.Transport(http.DefaultTransport)}
	for _, path := range []string{"/apis/jobplane.dev/v1/namespaces/ns/cronjobs/c/status", "/apis/jobplane.dev/v1/namespaces/ns/cronjobs/c/status"} {
		req, err := http.NewRequest(http.MethodPut, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if n := testutil.ToFloat64(m.apiRequests.WithLabelValues(http.MethodPut, "cronjobs/status")); n != 2 {
		t.Errorf("counted %v status writes, want 2", n)
	}
}
