package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
)

// The flood scenario is a hostile tenant's probe of each controller's front
// door: while -flooders goroutines of another caller read namespace A's
// -jobs suspended Jobs as fast as they are answered, how much later does
// namespace B's Job of -beside pods complete than without them? The reads
// go where a tenant of each side reads its Jobs: the API server's list of
// Jobs for the built-in controller, the executor's ListJobs for jobplane
// (at -executor-addr, as system:anonymous, which the loopback executor of
// the benchmark authenticates). Each caller may read namespace A only:
// the allowed flood reads A, the denied flood reads B and is refused
// (Forbidden, PermissionDenied), the unseen flood reads a namespace of a
// new name each call, so that no authorization is cached and each is asked
// of the API server. B's Job runs -flood-runs times in each phase: quiet,
// allowed, denied, unseen. Through every phase a bystander, another caller
// allowed to read namespace B only, lists B's Jobs at the same door every
// bystanderEvery: how much longer do its reads take than in the quiet?

// floodUser is the flooder's user on the API server (impersonated by the
// driver's admin credentials); system:anonymous is the executor's caller.
const floodUser = "bench-flooder"

// bystanderUser is the bystander's user on the API server (impersonated,
// so in the flooder's priority level, as another flow); its ServiceAccount
// in namespace B, of the same name, is the executor's caller.
const bystanderUser = "bench-bystander"

// bystanderEvery is how often the bystander reads.
const bystanderEvery = 50 * time.Millisecond

// floodWarmup is how long a flood runs before B's first Job of its phase.
const floodWarmup = 3 * time.Second

// floodPhases in the order they run.
var floodPhases = []string{"quiet", "allowed", "denied", "unseen"}

// floodPhase is one phase's measurement.
type floodPhase struct {
	// Seconds are B's Jobs', seen added to seen Complete, in order.
	Seconds []float64 `json:"seconds"`
	// Calls are the flood's calls answered in the phase, by their gRPC
	// code (the API server's answers mapped as client-go's errors are),
	// and CallSeconds how long the flood ran (its warm-up included).
	Calls       map[string]int `json:"calls,omitempty"`
	CallSeconds float64        `json:"callSeconds,omitempty"`
	// Bystander is another caller's reads of namespace B through the
	// phase.
	Bystander *bystanderReads `json:"bystander,omitempty"`
}

// bystanderReads are the times of a caller's reads, one every
// bystanderEvery, that is not the flooder and may read namespace B only.
type bystanderReads struct {
	// P50, P99 and Max are of the answered calls' times, in milliseconds.
	P50 float64 `json:"p50Millis"`
	P99 float64 `json:"p99Millis"`
	Max float64 `json:"maxMillis"`
	// Calls are its calls by the code of their answers.
	Calls map[string]int `json:"calls"`
}

// flood runs the three phases.
func (r *runner) flood(ctx context.Context, res *result, deadline time.Time) error {
	res.Jobs, res.BesidePods, res.Flooders = r.o.jobs, r.o.beside, r.o.flooders
	if err := r.letTheFlooderReadA(ctx); err != nil {
		return err
	}
	for i := range r.o.jobs {
		job := r.newJob(r.ns, fmt.Sprintf("suspended-%04d", i), 1, 1)
		job.Spec.Suspend = ptr.To(true)
		if _, err := r.client.BatchV1().Jobs(r.ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating namespace A's Jobs: %w", err)
		}
	}
	r.quiesce(ctx) // the controller's syncs of A's new Jobs
	read, closeRead, err := r.frontDoor(floodUser, "")
	if err != nil {
		return err
	}
	defer closeRead()
	bystanderToken, err := r.letTheBystanderReadB(ctx)
	if err != nil {
		return err
	}
	readB, closeReadB, err := r.frontDoor(bystanderUser, bystanderToken)
	if err != nil {
		return err
	}
	defer closeReadB()
	res.Flood = map[string]*floodPhase{}
	for _, phase := range floodPhases {
		got := &floodPhase{}
		res.Flood[phase] = got
		stopBystander := startBystander(func(ctx context.Context) error { return readB(ctx, r.nsB) })
		var stopFlood func() (map[string]int, float64)
		if phase != "quiet" {
			var unseen atomic.Int64
			namespace := map[string]func() string{
				"allowed": func() string { return r.ns },
				"denied":  func() string { return r.nsB },
				"unseen":  func() string { return fmt.Sprintf("bench-flood-unseen-%d", unseen.Add(1)) },
			}[phase]
			stopFlood = startFlood(r.o.flooders, func(ctx context.Context) error { return read(ctx, namespace()) })
			time.Sleep(floodWarmup)
		}
		for i := range r.o.floodRuns {
			secs, err := r.runB(ctx, fmt.Sprintf("b-%s-%d", phase, i), deadline)
			if err != nil {
				stopBystander()
				if stopFlood != nil {
					stopFlood()
				}
				return err
			}
			got.Seconds = append(got.Seconds, secs)
		}
		got.Bystander = stopBystander()
		if stopFlood != nil {
			got.Calls, got.CallSeconds = stopFlood()
		}
		log.Printf("%s: B's Job %s: %v s; flood calls %v in %.0fs; bystander %+v", r.o.variant, phase, got.Seconds, got.Calls, got.CallSeconds, *got.Bystander)
		r.quiesce(ctx)
	}
	return nil
}

// runB runs one Job of namespace B and returns its seconds from seen added
// to seen Complete.
func (r *runner) runB(ctx context.Context, name string, deadline time.Time) (float64, error) {
	job, err := r.client.BatchV1().Jobs(r.nsB).Create(ctx, r.newJob(r.nsB, name, r.o.beside, max(1, r.o.beside/2)), metav1.CreateOptions{})
	if err != nil {
		return 0, err
	}
	if limit := time.Now().Add(aloneTimeout); limit.Before(deadline) {
		deadline = limit
	}
	if err := r.w.waitFor(deadline, func() bool { return r.w.done(job.UID) }); err != nil {
		return 0, fmt.Errorf("namespace B's Job %s: %w", name, err)
	}
	if r.w.failedJobs() > 0 {
		return 0, fmt.Errorf("namespace B's Job %s failed", name)
	}
	return r.w.elapsed(job.UID), nil
}

// letTheFlooderReadA lets floodUser and system:anonymous get and list the
// Jobs of namespace A, and nothing else.
func (r *runner) letTheFlooderReadA(ctx context.Context) error {
	return r.letReadJobs(ctx, r.ns, "bench-flood-reader",
		rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: "User", Name: floodUser},
		rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: "User", Name: "system:anonymous"})
}

// letTheBystanderReadB lets bystanderUser and the ServiceAccount of that
// name in namespace B get and list B's Jobs, and nothing else; it returns
// a token of the ServiceAccount.
func (r *runner) letTheBystanderReadB(ctx context.Context) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: bystanderUser, Namespace: r.nsB}}
	if _, err := r.client.CoreV1().ServiceAccounts(r.nsB).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	err := r.letReadJobs(ctx, r.nsB, "bench-bystander-reader",
		rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: "User", Name: bystanderUser},
		rbacv1.Subject{Kind: "ServiceAccount", Name: bystanderUser, Namespace: r.nsB})
	if err != nil {
		return "", err
	}
	token, err := r.client.CoreV1().ServiceAccounts(r.nsB).CreateToken(ctx, bystanderUser,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("a token of the bystander's ServiceAccount: %w", err)
	}
	return token.Status.Token, nil
}

// letReadJobs binds subjects to a Role, named name, to get and list the
// Jobs of ns.
func (r *runner) letReadJobs(ctx context.Context, ns, name string, subjects ...rbacv1.Subject) error {
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list"}}},
	}
	if _, err := r.client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return err
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   subjects,
	}
	_, err := r.client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{})
	return err
}

// frontDoor is one read of a namespace's Jobs at the variant's front door
// by user, made once (client-go would retry a 429 itself): a page of them
// (the executor's default page size, 100). The built-in's caller is user,
// impersonated by the driver's credentials; the executor's is the bearer
// of token, or system:anonymous without one. The second function closes
// its connection.
func (r *runner) frontDoor(user, token string) (func(ctx context.Context, ns string) error, func(), error) {
	if r.o.variant == "builtin" {
		cfg := rest.CopyConfig(r.cfg)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, nil, err
		}
		return func(ctx context.Context, ns string) error {
			return client.BatchV1().RESTClient().Get().Namespace(ns).Resource("jobs").
				VersionedParams(&metav1.ListOptions{Limit: 100}, metav1.ParameterCodec).
				MaxRetries(0).Do(ctx).Error()
		}, func() {}, nil
	}
	if r.o.executorAddr == "" {
		return nil, nil, errors.New("flood: -executor-addr is required for jobplane")
	}
	conn, err := grpc.NewClient(r.o.executorAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}
	executor := jobplanev1.NewExecutorServiceClient(conn)
	return func(ctx context.Context, ns string) error {
		if token != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
		}
		_, err := executor.ListJobs(ctx, &jobplanev1.ListJobsRequest{Namespace: ns})
		return err
	}, func() { conn.Close() }, nil
}

// startFlood calls read from n goroutines, each as soon as its last call
// is answered, until the returned stop, which waits for the calls in
// flight and says how many calls were answered with each code and for how
// long the flood ran. A call taking over floodCallTimeout is cut short.
func startFlood(n int, read func(context.Context) error) (stop func() (map[string]int, float64)) {
	start := time.Now()
	var stopped atomic.Bool
	var mu sync.Mutex
	calls := map[string]int{}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			mine := map[string]int{}
			for !stopped.Load() {
				ctx, cancel := context.WithTimeout(context.Background(), floodCallTimeout)
				err := read(ctx)
				cancel()
				mine[codeOf(err).String()]++
			}
			mu.Lock()
			for code, k := range mine {
				calls[code] += k
			}
			mu.Unlock()
		})
	}
	return func() (map[string]int, float64) {
		stopped.Store(true)
		wg.Wait()
		return calls, time.Since(start).Seconds()
	}
}

// startBystander calls read every bystanderEvery, or as soon as its last
// call is answered when that took longer, until the returned stop, which
// waits for the call in flight and summarises them.
func startBystander(read func(context.Context) error) (stop func() *bystanderReads) {
	done := make(chan *bystanderReads)
	quit := make(chan struct{})
	go func() {
		var millis []float64
		calls := map[string]int{}
		tick := time.NewTicker(bystanderEvery)
		defer tick.Stop()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), floodCallTimeout)
			start := time.Now()
			err := read(ctx)
			took := time.Since(start)
			cancel()
			calls[codeOf(err).String()]++
			if err == nil {
				millis = append(millis, float64(took.Microseconds())/1000)
			}
			select {
			case <-quit:
				done <- summarise(millis, calls)
				return
			case <-tick.C:
			}
		}
	}()
	return func() *bystanderReads {
		close(quit)
		return <-done
	}
}

// summarise is the quantiles of millis, and calls.
func summarise(millis []float64, calls map[string]int) *bystanderReads {
	return &bystanderReads{P50: quantile(millis, 0.5), P99: quantile(millis, 0.99), Max: quantile(millis, 1), Calls: calls}
}

// floodCallTimeout bounds one call of the flood.
const floodCallTimeout = 30 * time.Second

// codeOf is err's gRPC code, the API server's errors mapped to the codes
// of their meaning.
func codeOf(err error) codes.Code {
	switch {
	case err == nil:
		return codes.OK
	case apierrors.IsForbidden(err):
		return codes.PermissionDenied
	case apierrors.IsTooManyRequests(err):
		return codes.ResourceExhausted
	}
	if s, ok := status.FromError(err); ok {
		return s.Code()
	}
	return codes.Unknown
}
