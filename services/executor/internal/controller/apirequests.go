package controller

import (
	"net/http"
	"strings"
	"sync"

	"github.com/jobplane/jobplane/services/executor/internal/fairlimit"
)

// jobRequestCounts counts the executor's API requests by verb and resource, and
// per Job until it finishes, when the Job's total is observed: the API cost
// of a Job is what the fair limiter shares out.
type jobRequestCounts struct {
	mu     sync.Mutex
	perJob map[string]int
}

// Transport wraps the Kubernetes client's transport to count requests.
func (m *Metrics) Transport(next http.RoundTripper) http.RoundTripper {
	return &countingTransport{next: next, count: func(r *http.Request) {
		m.apiRequests.WithLabelValues(r.Method, resourceOf(r.URL.Path)).Inc()
		if key := fairlimit.KeyOf(r.Context()); key != "" {
			m.perJob.mu.Lock()
			m.perJob.perJob[key]++
			m.perJob.mu.Unlock()
		}
	}}
}

// jobDone observes and forgets the request count of a finished or deleted
// Job.
func (m *Metrics) jobDone(key string) {
	m.perJob.mu.Lock()
	n, ok := m.perJob.perJob[key]
	delete(m.perJob.perJob, key)
	m.perJob.mu.Unlock()
	if ok {
		m.apiRequestsPerJob.Observe(float64(n))
	}
}

// countingTransport counts each request, then sends it on. It names the
// transport it wraps so that client-go can still cancel requests through it.
type countingTransport struct {
	next  http.RoundTripper
	count func(*http.Request)
}

func (t *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.count(r)
	return t.next.RoundTrip(r)
}

// WrappedRoundTripper implements client-go's net.RoundTripperWrapper.
func (t *countingTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

// resourceOf is the resource (and subresource) of an API path:
// /api/v1/namespaces/ns/pods/name → pods; .../jobs/name/status → jobs/status.
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i := 0; i < len(parts); i++ {
		if parts[i] == "namespaces" && i+2 < len(parts) {
			parts = parts[i+2:]
			break
		}
	}
	switch {
	case len(parts) >= 3:
		return parts[0] + "/" + parts[2]
	case len(parts) >= 1:
		return parts[0]
	}
	return ""
}
