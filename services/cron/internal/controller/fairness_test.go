package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobplane/jobplane/lib/cronapi"
)

// A namespace whose 200 CronJobs fall due together, queued before another
// namespace's one, takes turns with it: the other's run is handed to the
// executor at the second sync, not the 201st as behind a first-in-first-out
// queue, and its sync's context carries the CronJob's lane of the API
// budget, which its requests (status write, live reads) wait in.
func TestANamespacesDueCronJobsDoNotHoldAnothersOne(t *testing.T) {
	f := newFixture(t)
	var keys []string
	for i := range 200 {
		cj := everyMinute(fmt.Sprintf("busy-%03d", i), func(cj *cronapi.CronJob) { cj.Namespace = "crowded" })
		f.putCronJob(cj)
		keys = append(keys, cronJobKey(cronapi.APIVersion, cj.Namespace, cj.Name))
	}
	quiet := everyMinute("nightly", func(cj *cronapi.CronJob) { cj.Namespace = "quiet" })
	f.putCronJob(quiet)
	keys = append(keys, cronJobKey(cronapi.APIVersion, quiet.Namespace, quiet.Name))
	f.clock.SetTime(testCreated.Add(35 * time.Second)) // 10:01:05: every CronJob is due
	for _, key := range keys {
		f.c.queue.Add(key)
	}

	ctx := context.Background()
	for turn := 1; turn <= 3; turn++ {
		f.c.processNextWorkItem(ctx)
		f.executor.mu.Lock()
		submitted := slices.Clone(f.executor.submitted)
		lanes := slices.Clone(f.executor.lanes)
		f.executor.mu.Unlock()
		i := slices.IndexFunc(submitted, func(job string) bool { return strings.HasPrefix(job, "nightly-") })
		if i < 0 {
			continue
		}
		if turn > 2 {
			t.Errorf("the quiet namespace's run was handed over at sync %d, want within 2", turn)
		}
		if want := "quiet/nightly"; lanes[i] != want {
			t.Errorf("its submission waited in lane %q, want %q", lanes[i], want)
		}
		return
	}
	t.Fatalf("the quiet namespace's run was not handed over in 3 syncs beside 200 due CronJobs of another")
}
