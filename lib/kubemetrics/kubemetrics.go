// Package kubemetrics counts a service's requests to the Kubernetes API, by
// method and resource, from its client's transport.
package kubemetrics

import (
	"net/http"
	"strings"
)

// Transport wraps next, calling count with each request before sending it
// on (for rest.Config.Wrap).
func Transport(next http.RoundTripper, count func(*http.Request)) http.RoundTripper {
	return &countingTransport{next: next, count: count}
}

// countingTransport names the transport it wraps so that client-go can
// still cancel requests through it.
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

// Resource is the resource (and subresource) of an API path:
// /api/v1/namespaces/ns/pods/name → pods; .../jobs/name/status →
// jobs/status; /apis/jobplane.dev/v1/namespaces/ns/cronjobs → cronjobs.
func Resource(path string) string {
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
