package leader_test

import (
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/jobplane/jobplane/lib/leader"
)

// The Lease's client waits in no queue of the service's own requests: its
// rate limiter is its own, at the service's rate.
func TestTheLeasesClientHasItsOwnRateLimiter(t *testing.T) {
	shared := flowcontrol.NewTokenBucketRateLimiter(1, 1)
	cfg := &rest.Config{Host: "https://127.0.0.1:1", QPS: 20, Burst: 30, RateLimiter: shared, UserAgent: "jobplane-executor"}
	client, err := leader.ClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	limiter := client.(*kubernetes.Clientset).CoordinationV1().RESTClient().GetRateLimiter()
	if limiter == shared || limiter == nil {
		t.Errorf("the Lease's client has rate limiter %v, want one of its own", limiter)
	}
	if limiter.QPS() != 20 {
		t.Errorf("its rate is %v, want the service's 20", limiter.QPS())
	}
	if cfg.RateLimiter != shared {
		t.Error("the service's own config was changed")
	}
}
