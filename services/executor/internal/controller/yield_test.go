package controller

import (
	"context"
	"testing"

	"github.com/jobplane/jobplane/lib/fairlimit"
	"github.com/jobplane/jobplane/lib/plan"
)

// A worker's sync creating 100 pods, while another namespace's Job waits for
// a worker, gives its worker up once it has made more than yieldAfter: the
// creations it did not make lower the expectations, the rest of its plan is
// left to the next sync, and its key is queued again behind the other
// namespace's. With only its own namespace waiting, or from the SyncJob RPC,
// the same sync makes all 100.
func TestALongSyncGivesItsWorkerUpToAnotherNamespace(t *testing.T) {
	job := newJob("job")
	for _, tc := range []struct {
		name          string
		othersWaiting bool
		rpc           bool
		wantYield     bool
	}{
		{name: "another namespace's Job waits", othersWaiting: true, wantYield: true},
		{name: "nobody else waits"},
		{name: "the SyncJob RPC's sync", othersWaiting: true, rpc: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, job)
			budget := fairlimit.New(1e6, 1e6, nil)
			t.Cleanup(budget.Stop)
			f.c.cfg.APIBudget = budget
			f.planner.set(
				plan.CreatePods{Because: because("Scale"), Pods: podsToCreate(job, 100), CreationReason: plan.PodCreateNew},
				afterCreate,
			)
			ctx := context.Background()
			f.c.queue.Add(jobKey)
			if tc.othersWaiting {
				f.c.queue.Add("other/job")
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
			if created <= yieldAfter || created >= 100 {
				t.Errorf("%d pods created, want more than %d and fewer than 100 before the worker is given up", created, yieldAfter)
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
