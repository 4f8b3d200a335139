package main

import (
	"context"
	"log"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
)

// probeNamespace holds the ConfigMap whose updates time the driver's own
// watch.
const probeNamespace = "bench-cron-probe"

const probeAnnotation = "bench.jobplane.dev/seq"

// probe measures how late the driver's watch sees a write: once a second it
// updates a ConfigMap and times, through a metadata informer like the Jobs',
// the event of that update from when the update was answered (the write
// committed). The Jobs' skews include that lag; the report gives it beside
// them.
type probe struct {
	mu       sync.Mutex
	answered map[int]time.Time
	lags     []float64 // seconds, with the time of each sample
	at       []time.Time
}

func startProbe(ctx context.Context, kube kubernetes.Interface, meta metadata.Interface) (*probe, error) {
	p := &probe{answered: map[int]time.Time{}}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: probeNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	cms := kube.CoreV1().ConfigMaps(probeNamespace)
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		cm, err = cms.Get(ctx, "probe", metav1.GetOptions{})
	}
	if err != nil {
		return nil, err
	}
	factory := metadatainformer.NewFilteredSharedInformerFactory(meta, 0, probeNamespace, nil)
	inf := factory.ForResource(corev1.SchemeGroupVersion.WithResource("configmaps")).Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, cur any) {
			now := time.Now()
			m, ok := cur.(*metav1.PartialObjectMetadata)
			if !ok {
				return
			}
			seq, err := strconv.Atoi(m.Annotations[probeAnnotation])
			if err != nil {
				return
			}
			p.seen(seq, now)
		},
	}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for seq := 1; ; seq++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			next := cm.DeepCopy()
			if next.Annotations == nil {
				next.Annotations = map[string]string{}
			}
			next.Annotations[probeAnnotation] = strconv.Itoa(seq)
			updated, err := cms.Update(ctx, next, metav1.UpdateOptions{})
			if err != nil {
				if ctx.Err() == nil {
					log.Printf("probe: %v", err)
				}
				if got, err := cms.Get(ctx, "probe", metav1.GetOptions{}); err == nil {
					cm = got
				}
				continue
			}
			cm = updated
			p.answer(seq, time.Now())
		}
	}()
	return p, nil
}

// seen and answer record the two ends of an update; whichever comes last
// records the lag (the event may come before the answer: no lag).
func (p *probe) seen(seq int, t time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a, ok := p.answered[seq]; ok {
		p.lags, p.at = append(p.lags, max(0, t.Sub(a).Seconds())), append(p.at, a)
		delete(p.answered, seq)
		return
	}
	p.answered[-seq] = t // seen first
}

func (p *probe) answer(seq int, t time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.answered[-seq]; ok {
		p.lags, p.at = append(p.lags, 0), append(p.at, t)
		delete(p.answered, -seq)
		return
	}
	p.answered[seq] = t
}

// lagsBetween are the watch lags of the updates answered in [from, to].
func (p *probe) lagsBetween(from, to time.Time) []float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []float64
	for i, t := range p.at {
		if !t.Before(from) && !t.After(to) {
			out = append(out, p.lags[i])
		}
	}
	return out
}
