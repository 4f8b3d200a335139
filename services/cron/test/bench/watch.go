package main

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
)

// watcher follows, in every namespace, the metadata of Jobs and of both
// kinds of CronJob: when each Job is first seen, and how many times the
// objects of each namespace changed (each change one effective write).
type watcher struct {
	mu          sync.Mutex
	jobs        map[types.UID]*seenJob
	jobMods     map[string]int // namespace → Job modifications seen
	cronJobMods map[string]int // namespace → CronJob modifications seen
	cronJobs    map[string]int // namespace → CronJobs seen
}

// seenJob is a Job as the driver first saw it.
type seenJob struct {
	namespace, cronJob string
	scheduled          time.Time
	seen               time.Time
	created            time.Time // creationTimestamp, a second's resolution
}

func newWatcher(ctx context.Context, client metadata.Interface) (*watcher, error) {
	w := &watcher{jobs: map[types.UID]*seenJob{}, jobMods: map[string]int{}, cronJobMods: map[string]int{}, cronJobs: map[string]int{}}
	factory := metadatainformer.NewSharedInformerFactory(client, 0)
	jobs := factory.ForResource(batchJobs).Informer()
	if _, err := jobs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
				w.addJob(m, time.Now())
			}
		},
		UpdateFunc: func(old, cur any) { w.modified(old, cur, w.jobMods) },
	}); err != nil {
		return nil, err
	}
	for _, gvr := range []schema.GroupVersionResource{batchCronJobs, jobplaneCronJobs} {
		inf := factory.ForResource(gvr).Informer()
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
					w.mu.Lock()
					w.cronJobs[m.Namespace]++
					w.mu.Unlock()
				}
			},
			UpdateFunc: func(old, cur any) { w.modified(old, cur, w.cronJobMods) },
		}); err != nil {
			return nil, err
		}
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("the %v informer did not sync", typ)
		}
	}
	return w, nil
}

func (w *watcher) modified(old, cur any, mods map[string]int) {
	o, ok1 := old.(*metav1.PartialObjectMetadata)
	c, ok2 := cur.(*metav1.PartialObjectMetadata)
	if !ok1 || !ok2 || o.ResourceVersion == c.ResourceVersion {
		return
	}
	w.mu.Lock()
	mods[c.Namespace]++
	w.mu.Unlock()
}

func (w *watcher) addJob(m *metav1.PartialObjectMetadata, now time.Time) {
	j := &seenJob{namespace: m.Namespace, seen: now, created: m.CreationTimestamp.Time}
	if ref := metav1.GetControllerOf(m); ref != nil && ref.Kind == "CronJob" {
		j.cronJob = ref.Name
	}
	j.scheduled = scheduledTime(m)
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.jobs[m.UID]; !ok {
		w.jobs[m.UID] = j
	}
}

// scheduledTime is the run's time: the annotation both controllers set,
// else the minutes since the epoch both put at the end of the name.
func scheduledTime(m *metav1.PartialObjectMetadata) time.Time {
	if t, err := time.Parse(time.RFC3339, m.Annotations[batchv1.CronJobScheduledTimestampAnnotation]); err == nil {
		return t
	}
	if i := strings.LastIndexByte(m.Name, '-'); i >= 0 {
		if minutes, err := strconv.ParseInt(m.Name[i+1:], 10, 64); err == nil {
			return time.Unix(minutes*60, 0)
		}
	}
	return time.Time{}
}

func (w *watcher) cronJobCount(ns string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cronJobs[ns]
}

func (w *watcher) modifications() (jobs, cronJobs map[string]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	jobs, cronJobs = map[string]int{}, map[string]int{}
	for k, v := range w.jobMods {
		jobs[k] = v
	}
	for k, v := range w.cronJobMods {
		cronJobs[k] = v
	}
	return jobs, cronJobs
}

// progress is how many runs of boundary t have a Job in ns, and the largest
// skew among them.
func (w *watcher) progress(ns string, t time.Time) (int, float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	runs := map[string]bool{}
	var maxSkew float64
	for _, j := range w.jobs {
		if j.namespace == ns && j.scheduled.Equal(t) {
			runs[j.cronJob] = true
			maxSkew = math.Max(maxSkew, j.seen.Sub(t).Seconds())
		}
	}
	return len(runs), maxSkew
}

// runs fills in r's runs, misses and skews for the boundaries first to last,
// and the Jobs seen between the two scrapes.
func (b *bench) runs(r *result, first, last, from, to time.Time) {
	ns := namespaceOf(r.Variant)
	r.JobsCreated = b.w.seenBetween(ns, from, to)
	seen, created, duplicates, later := b.w.firstJobs(ns, first, last)
	r.Duplicates, r.Later = duplicates, later
	var skews, skewsCT []float64
	perBoundary := map[int64][]float64{}
	for k, t := range seen {
		s := t.Sub(time.Unix(k.at, 0)).Seconds()
		skews = append(skews, s)
		skewsCT = append(skewsCT, created[k].Sub(time.Unix(k.at, 0)).Seconds())
		perBoundary[k.at] = append(perBoundary[k.at], s)
	}
	r.Expected = b.o.count * b.o.minutes
	r.Runs = len(seen)
	r.Missed = r.Expected - r.Runs
	r.Skew, r.SkewCT = quantilesOf(skews), quantilesOf(skewsCT)
	for t := first; !t.After(last); t = t.Add(time.Minute) {
		q := quantilesOf(perBoundary[t.Unix()])
		r.PerBoundary = append(r.PerBoundary, boundary{Time: t.UTC().Format("15:04"), Runs: q.N, P50: q.P50, P99: q.P99, Max: q.Max})
	}
	if b.o.quiet {
		quiet, _, _, _ := b.w.firstJobs(quietNamespaceOf(r.Variant), first, last)
		var skews []float64
		for k, t := range quiet {
			skews = append(skews, t.Sub(time.Unix(k.at, 0)).Seconds())
		}
		r.Quiet = quantilesOf(skews)
		r.QuietMissed = b.o.minutes - len(quiet)
	}
}

// seenBetween counts the Jobs of ns first seen from from to to.
func (w *watcher) seenBetween(ns string, from, to time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, j := range w.jobs {
		if j.namespace == ns && !j.seen.Before(from) && !j.seen.After(to) {
			n++
		}
	}
	return n
}

// cronJobRun is one run of a CronJob: its name and scheduled time (Unix seconds).
type cronJobRun struct {
	cronJob string
	at      int64
}

// firstJobs are when the first Job of each run of ns scheduled from first to
// last was seen, and its creationTimestamp; duplicates counts the Jobs
// beyond a run's first, later those of runs after last.
func (w *watcher) firstJobs(ns string, first, last time.Time) (seen, created map[cronJobRun]time.Time, duplicates, later int) {
	seen, created = map[cronJobRun]time.Time{}, map[cronJobRun]time.Time{}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, j := range w.jobs {
		if j.namespace != ns {
			continue
		}
		if j.scheduled.Before(first) || j.scheduled.After(last) {
			if j.scheduled.After(last) {
				later++
			}
			continue
		}
		k := cronJobRun{j.cronJob, j.scheduled.Unix()}
		if t, ok := seen[k]; ok {
			duplicates++
			if !j.seen.Before(t) {
				continue
			}
		}
		seen[k], created[k] = j.seen, j.created
	}
	return seen, created, duplicates, later
}

func quantilesOf(xs []float64) quantiles {
	return quantiles{P50: quantile(xs, 0.50), P99: quantile(xs, 0.99), Max: quantile(xs, 1), N: len(xs)}
}

// quantile is the nearest-rank quantile of xs (sorted in place); -1 for
// none.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return -1
	}
	sort.Float64s(xs)
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}
