package refbench

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	jobutil "k8s.io/kubernetes/pkg/controller/job/util"
	"k8s.io/utils/ptr"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/lib/kubeconv"
	"github.com/jobplane/jobplane/lib/kubetest"
)

// TestTheCronServiceAgreesWithTheReference decides random CronJobs' syncs
// once with the reference's CronJob controller (its history cleanup, then
// syncCronJob, then its status write: the API answering every call) and
// once with the cron service's PlanCronJob (half of them as batch/v1
// CronJobs, as drop-in mode runs them, half as jobplane.dev/v1 ones without
// extensions, whose Jobs' owner differs only in its apiVersion), and
// compares the steps each
// took (Jobs created and deleted, events), the Jobs created, the status at
// the end and when each syncs again. The cases the contract names as the
// reference's faults, fixed in jobplane, are told apart and counted.
// CRON_AGREE_CASES sets the number of cases (3,000 by default),
// CRON_AGREE_SEED the first seed. Run with:
//
//	cd hack/refbench && GOWORK=off go test -run CronServiceAgrees -v .
func TestTheCronServiceAgreesWithTheReference(t *testing.T) {
	cases, first := casesFromEnv("CRON_AGREE_CASES", "CRON_AGREE_SEED")
	t.Setenv("GOWORK", "") // the cron service is built in the repository's workspace
	bin := kubetest.BuildBinary(t, "./services/cron/cmd/cron")
	t.Setenv("TZ", "UTC") // the service's zone, which a CronJob without spec.timeZone runs in
	cron := kubetest.StartProcess(t, "cron", bin, "-shutdown-drain", "0s", "-authn-anonymous",
		"-kubeconfig", emptyAPIServer(t), "-drop-in", "-jobplane-cronjobs=false", "-leader-elect=false")
	conn, err := grpc.NewClient(cron.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := jobplanev1.NewCronServiceClient(conn)
	disagreed := 0
	seen := map[string]int{}
	for seed := first; seed < first+uint64(cases); seed++ {
		cj, jobs, now := randomCronJob(seed)
		jobs = widenCronJob(seed, cj, jobs, now)
		want := failedCreatesLeftOut(referenceCronSync(t, cj, jobs, now), cj, jobs)
		got := cronServiceSync(t, client, cj, jobs, now, seed%2 == 1)
		for _, step := range want.Steps {
			seen[stepKind(step)]++
		}
		if want.RequeueAfter != nil {
			seen["requeued"]++
		}
		want.Steps, got.Steps = eventsSorted(want.Steps), eventsSorted(got.Steps)
		diff := cmp.Diff(want, got, cmpopts.EquateEmpty())
		if diff == "" {
			continue
		}
		if fault := referenceFault(t, cj, jobs, jobs, now, want, got); fault != "" {
			seen["the reference's fault: "+fault]++
			continue
		}
		disagreed++
		if disagreed <= 5 {
			t.Errorf("seed %d: %s\nreference (-) / cron service (+):\n%s", seed, describeCronJob(cj, jobs, now), diff)
		}
	}
	if disagreed > 0 {
		t.Errorf("%d of %d cases disagree", disagreed, cases)
	}
	if cases >= 1000 {
		for _, what := range []string{"create", "delete", "requeued", "event Normal SawCompletedJob", "event Normal MissingJob",
			"event Normal JobAlreadyActive", "event Warning UnexpectedJob", "event Warning TooManyMissedTimes",
			"event Warning UnknownTimeZone", "event Warning UnparseableSchedule", "event Warning UnsupportedSchedule"} {
			if seen[what] == 0 {
				t.Errorf("the cases no longer cover %q", what)
			}
		}
	}
	t.Logf("%d cases:", cases)
	for what, n := range seen {
		t.Logf("  %s: %d", what, n)
	}
}

// eventsSorted sorts each run of events between other steps: the
// reference records its events about Jobs in its cache's order, which is
// a map's.
func eventsSorted(steps []string) []string {
	out := slices.Clone(steps)
	for i := 0; i < len(out); {
		end := i
		for end < len(out) && strings.HasPrefix(out[end], "event ") {
			end++
		}
		slices.Sort(out[i:end])
		i = max(end, i+1)
	}
	return out
}

// stepKind is a step without its object: "create", "delete" or "event
// <type> <reason>".
func stepKind(step string) string {
	if strings.HasPrefix(step, "event ") {
		return strings.SplitN(step, ":", 2)[0]
	}
	return strings.Fields(step)[0]
}

// cronServiceSync asks the cron service's PlanCronJob for the sync of cj
// and jobs at now: cj as a batch/v1 CronJob (as drop-in mode reads one),
// or as a jobplane.dev/v1 one when custom.
func cronServiceSync(t *testing.T, client jobplanev1.CronServiceClient, cj *batchv1.CronJob, jobs []*batchv1.Job, now time.Time, custom bool) cronDecided {
	t.Helper()
	typeMeta := cj.TypeMeta
	if custom {
		typeMeta = metav1.TypeMeta{APIVersion: cronapi.APIVersion, Kind: cronapi.Kind}
	}
	in, err := kubeconv.CronJobFromKube(&cronapi.CronJob{TypeMeta: typeMeta, ObjectMeta: cj.ObjectMeta,
		Spec: cronapi.CronJobSpec{CronJobSpec: cj.Spec}, Status: cronapi.CronJobStatus{CronJobStatus: cj.Status}})
	if err != nil {
		t.Fatal(err)
	}
	req := &jobplanev1.PlanCronJobRequest{CronJob: in, Now: timestamppb.New(now)}
	for _, j := range jobs {
		pj, err := kubeconv.JobFromKube(j)
		if err != nil {
			t.Fatal(err)
		}
		req.Jobs = append(req.Jobs, pj)
	}
	resp, err := client.PlanCronJob(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	plan := resp.GetPlan()
	var d cronDecided
	for _, a := range plan.GetActions() {
		switch {
		case a.GetCreateJob() != nil:
			j, err := kubeconv.JobToKube(a.GetCreateJob().GetJob(), kubeconv.FullTemplate)
			if err != nil {
				t.Fatal(err)
			}
			for i := range j.OwnerReferences {
				if custom && j.OwnerReferences[i].APIVersion == cronapi.APIVersion {
					j.OwnerReferences[i].APIVersion = "batch/v1" // the reference's CronJob is a batch/v1 one
				}
			}
			d.Steps = append(d.Steps, "create "+j.Name)
			d.Created = append(d.Created, j)
		case a.GetDeleteJob() != nil:
			d.Steps = append(d.Steps, "delete "+a.GetDeleteJob().GetJob().GetName())
		case a.GetRecordEvent() != nil:
			e := a.GetRecordEvent()
			d.Steps = append(d.Steps, "event "+e.GetType()+" "+e.GetReason()+": "+e.GetMessage())
		}
	}
	d.Status, d.WroteStatus = cj.Status, plan.GetUpdateStatus()
	if d.WroteStatus {
		d.Status = kubeconv.CronJobStatusToKube(plan.GetStatus()).CronJobStatus
	}
	if plan.GetRequeueAfter() != nil {
		d.RequeueAfter = ptr.To(plan.GetRequeueAfter().AsDuration())
	}
	return d
}

// referenceFault names the fault of the reference's, listed in the
// contract, that explains why got differs from want; "" if none does. Only
// what the fault changes is set aside: the rest must still agree. jobs are
// the Jobs the reference sees, api those its API holds (another's Job of a
// run's name among them, though out of its sight).
func referenceFault(t *testing.T, cj *batchv1.CronJob, jobs, api []*batchv1.Job, now time.Time, want, got cronDecided) string {
	if here := slices.DeleteFunc(slices.Clone(jobs), func(j *batchv1.Job) bool { return j.Namespace != cj.Namespace }); len(here) < len(jobs) {
		// cronjob.proto, CronJobStatus.active: a reference into another
		// namespace is missing for jobplane; the reference keeps it while
		// that Job exists (and deletes it under Replace).
		return decidedWithout(t, cj, here, here, now, got, "an active reference into another namespace")
	}
	if ours := slices.DeleteFunc(slices.Clone(jobs), func(j *batchv1.Job) bool { return adoptedByName(cj, j) }); len(ours) < len(jobs) {
		// cron_service.proto, PlanCronJobRequest.jobs: the reference takes
		// a Job whose controller reference names the CronJob for its own,
		// whatever its UID (a CronJob recreated under the same name adopts
		// its predecessor's Jobs); jobplane does by UID. They stay in the
		// API, out of its informer.
		return decidedWithout(t, cj, jobs, ours, now, got, "Jobs an earlier CronJob of the same name controls")
	}
	withoutMissSchedule := got
	withoutMissSchedule.Steps = slices.DeleteFunc(slices.Clone(got.Steps), func(step string) bool {
		return strings.HasPrefix(step, "event Warning MissSchedule: ")
	})
	if len(withoutMissSchedule.Steps) < len(got.Steps) && cmp.Equal(want, withoutMissSchedule, cmpopts.EquateEmpty()) {
		// cronjob.proto, starting_deadline_seconds: the reference applies
		// the deadline before its check, so its MissSchedule never fires.
		return "MissSchedule"
	}
	if every, ok := strings.CutPrefix(cj.Spec.Schedule, "@every "); ok && cj.Spec.StartingDeadlineSeconds != nil {
		interval, err := time.ParseDuration(every)
		// A deadline beyond a Duration wraps here as it does in the
		// reference, whose fault it then is too.
		if err == nil && time.Duration(*cj.Spec.StartingDeadlineSeconds)*time.Second < interval &&
			!runDue(cj, want) && (runDue(cj, got) || runBlocked(cj, api, got, latestEveryRun(cj, interval, now))) &&
			slices.Equal(stepsBesideTheRun(want.Steps, jobs, want.Status.Active), stepsBesideTheRun(got.Steps, jobs, want.Status.Active)) &&
			want.Status.LastSuccessfulTime.Equal(got.Status.LastSuccessfulTime) {
			// cronjob.proto, starting_deadline_seconds: the reference counts
			// the interval from the deadline and never finds such a
			// schedule's run due.
			return "@every with a deadline shorter than its interval"
		}
	}
	for _, step := range want.Steps {
		name, ok := strings.CutPrefix(step, "create ")
		if !ok || slices.Contains(got.Steps, step) || !slices.ContainsFunc(jobs, func(j *batchv1.Job) bool { return j.Name == name && metav1.IsControlledBy(j, cj) }) {
			continue
		}
		// cron_service.proto, CronJobPlan: the Job of the scheduled time
		// exists, so the run happened and jobplane records it (its Job
		// listed as active while it runs) and creates nothing.
		w, g := want, got
		notIt := func(r corev1.ObjectReference) bool { return r.Name == name }
		w.Steps = slices.DeleteFunc(slices.Clone(want.Steps), func(s string) bool { return s == step })
		w.Created = slices.DeleteFunc(slices.Clone(want.Created), func(j *batchv1.Job) bool { return j.Name == name })
		w.Status.Active = slices.DeleteFunc(slices.Clone(want.Status.Active), notIt)
		g.Status.Active = slices.DeleteFunc(slices.Clone(got.Status.Active), notIt)
		fault := "the run's Job exists, deleted by the history cleanup" // which the reference creates again
		if !slices.Contains(want.Steps, "delete "+name) {
			// The reference's read of it after AlreadyExists names no
			// namespace (the Job it built has none): NotFound, the run
			// left unrecorded, the sync retried with backoff.
			fault = "the run's Job exists"
			g.Status.LastScheduleTime, g.WroteStatus, g.RequeueAfter = want.Status.LastScheduleTime, want.WroteStatus, want.RequeueAfter
		}
		if cmp.Equal(w, g, cmpopts.EquateEmpty()) {
			return fault
		}
	}
	return ""
}

// decidedWithout names fault when the reference, with only the Jobs of api
// in its API and of listed in its informer, decides as jobplane did (got),
// or differs from it only by another fault; "" otherwise.
func decidedWithout(t *testing.T, cj *batchv1.CronJob, api, listed []*batchv1.Job, now time.Time, got cronDecided, fault string) string {
	alone := failedCreatesLeftOut(referenceCronSyncListing(t, cj, api, listed, now), cj, api)
	alone.Steps = eventsSorted(alone.Steps)
	if cmp.Equal(alone, got, cmpopts.EquateEmpty()) {
		return fault
	}
	if other := referenceFault(t, cj, listed, api, now, alone, got); other != "" {
		return fault + ", and " + other
	}
	return ""
}

// failedCreatesLeftOut is d without the creations the API refused because
// a Job of that name, not cj's by UID, exists and was not deleted before:
// the reference tries and fails, jobplane leaves it alone, and neither
// changes anything.
func failedCreatesLeftOut(d cronDecided, cj *batchv1.CronJob, jobs []*batchv1.Job) cronDecided {
	anothers := func(name string) bool {
		return slices.ContainsFunc(jobs, func(j *batchv1.Job) bool {
			ref := metav1.GetControllerOf(j)
			return j.Name == name && (ref == nil || ref.UID != cj.UID)
		})
	}
	var steps []string
	for _, step := range d.Steps {
		name, ok := strings.CutPrefix(step, "create ")
		if ok && anothers(name) && !slices.Contains(steps, "delete "+name) {
			d.Created = slices.DeleteFunc(slices.Clone(d.Created), func(j *batchv1.Job) bool { return j.Name == name })
			continue
		}
		steps = append(steps, step)
	}
	d.Steps = steps
	return d
}

// adoptedByName: the reference takes j for cj's though jobplane does not,
// its controller reference naming cj under another UID.
func adoptedByName(cj *batchv1.CronJob, j *batchv1.Job) bool {
	ref := metav1.GetControllerOf(j)
	return ref != nil && ref.Name == cj.Name && ref.UID != cj.UID
}

// stepsBesideTheRun are a sync's steps less those of the run it found due:
// its creation, Forbid's JobAlreadyActive, and Replace's deletions of the
// Jobs still running or still listed as active and its failed reads (a reference whose UID is
// an earlier Job's is replaced by name, finished or not).
func stepsBesideTheRun(steps []string, jobs []*batchv1.Job, active []corev1.ObjectReference) []string {
	replaced := func(name string) bool {
		return slices.ContainsFunc(jobs, func(j *batchv1.Job) bool { return j.Name == name && !jobutil.IsJobFinished(j) }) ||
			slices.ContainsFunc(active, func(r corev1.ObjectReference) bool { return r.Name == name })
	}
	return slices.DeleteFunc(slices.Clone(steps), func(step string) bool {
		deleted, isDelete := strings.CutPrefix(step, "delete ")
		return strings.HasPrefix(step, "create ") || strings.HasPrefix(step, "event Normal JobAlreadyActive: ") ||
			strings.HasPrefix(step, "event Warning FailedGet: ") || (isDelete && replaced(deleted))
	})
}

// runBlocked says the sync of cj found the run whose Job is named run due
// and could not start it: it created nothing and ended without a requeue, on
// another's Job of that name or on a Replace whose read of an active Job
// failed.
func runBlocked(cj *batchv1.CronJob, jobs []*batchv1.Job, d cronDecided, run string) bool {
	anothersOfItsName := slices.ContainsFunc(jobs, func(j *batchv1.Job) bool {
		ref := metav1.GetControllerOf(j)
		return j.Name == run && (ref == nil || ref.UID != cj.UID)
	})
	failedGet := slices.ContainsFunc(d.Steps, func(step string) bool { return strings.HasPrefix(step, "event Warning FailedGet: ") })
	return d.RequeueAfter == nil && len(d.Created) == 0 && (anothersOfItsName || failedGet)
}

// latestEveryRun is the name of the Job of an "@every interval" schedule's
// latest run at or before now, as both controllers name it (the CronJob's
// name and the minutes of the scheduled time): robfig/cron's constant delay
// (whole seconds, at least one) counted from the last scheduled time, or
// from the CronJob's creation.
func latestEveryRun(cj *batchv1.CronJob, interval time.Duration, now time.Time) string {
	delay := max(interval-interval%time.Second, time.Second)
	start := cj.CreationTimestamp.Time
	if cj.Status.LastScheduleTime != nil {
		start = cj.Status.LastScheduleTime.Time
	}
	first := start.Add(delay - time.Duration(start.Nanosecond()))
	if first.After(now) {
		return ""
	}
	at := first.Add(now.Sub(first) / delay * delay)
	return cj.Name + "-" + strconv.FormatInt(at.Unix()/60, 10)
}

// runDue says the sync of cj found a run due: it created its Job,
// recorded a run whose Job exists, or the Forbid policy held it back.
func runDue(cj *batchv1.CronJob, d cronDecided) bool {
	return len(d.Created) > 0 || !d.Status.LastScheduleTime.Equal(cj.Status.LastScheduleTime) ||
		slices.ContainsFunc(d.Steps, func(step string) bool { return strings.HasPrefix(step, "event Normal JobAlreadyActive: ") })
}

// describeCronJob says what a case is, for a failure's message.
func describeCronJob(cj *batchv1.CronJob, jobs []*batchv1.Job, now time.Time) string {
	var b strings.Builder
	b.WriteString("now " + now.Format(time.RFC3339Nano) + "\nCronJob " + cj.CreationTimestamp.Format(time.RFC3339) +
		" schedule " + strconv.Quote(cj.Spec.Schedule) + " zone " + ptr.Deref(cj.Spec.TimeZone, "-") +
		" policy " + string(cj.Spec.ConcurrencyPolicy))
	if cj.Spec.StartingDeadlineSeconds != nil {
		b.WriteString(" deadline " + strconv.FormatInt(*cj.Spec.StartingDeadlineSeconds, 10))
	}
	if cj.Spec.Suspend != nil {
		b.WriteString(" suspend " + strconv.FormatBool(*cj.Spec.Suspend))
	}
	if cj.Spec.SuccessfulJobsHistoryLimit != nil || cj.Spec.FailedJobsHistoryLimit != nil {
		b.WriteString(" limits " + strconv.Itoa(int(ptr.Deref(cj.Spec.SuccessfulJobsHistoryLimit, -1))) + "/" +
			strconv.Itoa(int(ptr.Deref(cj.Spec.FailedJobsHistoryLimit, -1))))
	}
	if cj.DeletionTimestamp != nil {
		b.WriteString(" deleting")
	}
	if t := cj.Status.LastScheduleTime; t != nil {
		b.WriteString("\n  last scheduled " + t.Format(time.RFC3339))
	}
	for _, a := range cj.Status.Active {
		b.WriteString("\n  active " + a.Name + " " + string(a.UID))
	}
	for _, j := range jobs {
		b.WriteString("\n  Job " + j.Name + " " + string(j.UID))
		if owner := metav1.GetControllerOf(j); owner != nil {
			b.WriteString(" of " + owner.Name)
		}
		for _, c := range j.Status.Conditions {
			b.WriteString(" " + string(c.Type))
		}
		if j.DeletionTimestamp != nil {
			b.WriteString(" deleting")
		}
	}
	return b.String()
}
