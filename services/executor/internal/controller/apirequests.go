package controller

import (
	"net/http"
	"sync"

	"github.com/jobplane/jobplane/lib/fairlimit"
	"github.com/jobplane/jobplane/lib/kubemetrics"
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
	return kubemetrics.Transport(next, func(r *http.Request) {
		m.apiRequests.WithLabelValues(r.Method, kubemetrics.Resource(r.URL.Path)).Inc()
		if key := fairlimit.KeyOf(r.Context()); key != "" {
			m.perJob.mu.Lock()
			m.perJob.perJob[key]++
			m.perJob.mu.Unlock()
		}
	})
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
