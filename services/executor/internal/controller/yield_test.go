package controller

import (
	"context"
	"errors"
	"testing"

	"github.com/jobplane/jobplane/lib/fairlimit"
	"github.com/jobplane/jobplane/lib/plan"
)

// A worker's sync creating 100 pods, while another namespace's Job waits for
// a worker, gives its worker up at the token after its first yieldAfter
// creations: the creations still waiting for a token are not made (with a
// budget of 12 tokens, exactly 12 are: batches 1, 2 and 4, then 5 of the
// batch of 8, the 9th token giving the worker up), the expectations are
// lowered for the rest, the rest of its plan is left to the next sync, and
// its key is queued again behind the other namespace's. With nobody else
// waiting, another Job of its own namespace waiting, or from the SyncJob
// RPC, the same sync makes all 100.
func TestALongSyncGivesItsWorkerUpToAnotherNamespace(t *testing.T) {
	job := newJob("job")
	for _, tc := range []struct {
		name      string
		waiting   string // a key queued behind the Job's; "": none
		rpc       bool
		wantYield bool
	}{
		{name: "another namespace's Job waits", waiting: "other/job", wantYield: true},
		{name: "nobody else waits"},
		{name: "another Job of its namespace waits", waiting: testNamespace + "/job-2"},
		{name: "the SyncJob RPC's sync", waiting: "other/job", rpc: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, job)
			qps, burst := float32(1e6), 1_000_000
			if tc.wantYield {
				qps, burst = 1e-6, 12
			}
			budget := fairlimit.New(qps, burst, nil)
			t.Cleanup(budget.Stop)
			f.c.cfg.APIBudget = budget
			f.planner.set(
				plan.CreatePods{Because: because("Scale"), Pods: podsToCreate(job, 100), CreationReason: plan.PodCreateNew},
				afterCreate,
			)
			ctx := context.Background()
			f.c.queue.Add(jobKey)
			if tc.waiting != "" {
				f.c.queue.Add(tc.waiting)
			}
			if tc.rpc {
				if _, _, _, err := f.c.SyncJob(ctx, testNamespace, "job"); err != nil {
					t.Fatal(err)
				}
			} else {
				f.c.processNextWorkItem(ctx)
			}

			created := len(f.createdPods())
			pending := f.c.state.State(jobKey).Expectations.PendingCreations
			if int(pending) != created {
				t.Errorf("%d creations expected after the sync, want the %d made", pending, created)
			}
			if !tc.wantYield {
				if created != 100 {
					t.Errorf("%d pods created, want all 100 in one sync", created)
				}
				return
			}
			if created != 12 {
				t.Errorf("%d pods created, want the 12 the budget had tokens for", created)
			}
			for _, e := range f.events() {
				if e == "Normal AfterCreate after" {
					t.Error("the action after the creations was performed; the sync should have stopped")
				}
			}
			if next, _ := f.c.queue.Get(); next != "other/job" {
				t.Errorf("next key %q, want the other namespace's", next)
			}
			if n := f.c.queue.Len(); n != 1 {
				t.Errorf("%d keys queued after the other namespace's, want the yielding Job's again", n)
			}
		})
	}
}

// A namespace that keeps a key queued (a hostile tenant's Job whose pods
// churn) makes another namespace's long sync give its worker up at every
// turn, but never before it has made more than yieldAfter creations: the
// long Job goes on, a turn's worth at a time.
func TestAWaitingNamespaceCannotStopALongSync(t *testing.T) {
	job := newJob("job")
	f := newFixture(t, job)
	budget := fairlimit.New(1e6, 1_000_000, nil)
	t.Cleanup(budget.Stop)
	f.c.cfg.APIBudget = budget
	f.planner.set(plan.CreatePods{Because: because("Scale"), Pods: podsToCreate(job, 100), CreationReason: plan.PodCreateNew})
	f.c.queue.Add("hostile/job") // queued throughout
	before := 0
	for turn := 1; turn <= 3; turn++ {
		_, _, _, err := f.c.sync(yieldable(context.Background()), jobKey)
		if !errors.Is(err, errYielded) {
			t.Fatalf("turn %d: %v, want the worker given up", turn, err)
		}
		made := len(f.createdPods()) - before
		before += made
		if made <= yieldAfter {
			t.Errorf("turn %d: %d creations before the worker was given up, want more than %d", turn, made, yieldAfter)
		}
	}
}
