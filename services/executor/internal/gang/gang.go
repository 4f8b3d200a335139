// Package gang gives a gang-schedulable Job its scheduling objects, as the
// reference Job controller does with its WorkloadWithJob gate (alpha in
// v1.36, off by default): a Workload of one PodGroupTemplate (a gang of
// parallelism pods) and its PodGroup, both controlled by the Job, created
// before the Job's first pod; every pod the Job creates then names the
// PodGroup in spec.schedulingGroup.
package gang

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha2 "k8s.io/api/scheduling/v1alpha2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/dump"
)

// The indexes of the caches, by the namespace/name the objects' specs
// reference (Workload.spec.controllerRef and PodGroup.spec.podGroupTemplateRef
// carry names, not UIDs: ownership is checked by owner reference after).
const (
	workloadsByJob      = "workloadByJobName"
	podGroupsByWorkload = "podGroupByWorkloadName"
)

// reasonWorkloadCreated is the reference's event on the Job.
const reasonWorkloadCreated = "WorkloadCreated"

var jobKind = batchv1.SchemeGroupVersion.WithKind("Job")

// Objects finds and creates the scheduling objects of Jobs.
type Objects struct {
	client    kubernetes.Interface
	workloads cache.Indexer
	podGroups cache.Indexer
	recorder  record.EventRecorder
	log       *slog.Logger
	// Synced are the caches' HasSynced, which syncs wait for.
	Synced []cache.InformerSynced
}

// New watches Workloads and PodGroups (scheduling.k8s.io/v1alpha2) through
// factory; recorder records the Jobs' events.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder, log *slog.Logger) (*Objects, error) {
	workloads, podGroups := factory.Scheduling().V1alpha2().Workloads().Informer(), factory.Scheduling().V1alpha2().PodGroups().Informer()
	if err := workloads.AddIndexers(cache.Indexers{workloadsByJob: indexWorkload}); err != nil {
		return nil, fmt.Errorf("adding the Workload index: %w", err)
	}
	if err := podGroups.AddIndexers(cache.Indexers{podGroupsByWorkload: indexPodGroup}); err != nil {
		return nil, fmt.Errorf("adding the PodGroup index: %w", err)
	}
	return &Objects{client: client, workloads: workloads.GetIndexer(), podGroups: podGroups.GetIndexer(), recorder: recorder, log: log,
		Synced: []cache.InformerSynced{workloads.HasSynced, podGroups.HasSynced}}, nil
}

// Served checks that the API server serves Workloads and PodGroups
// (scheduling.k8s.io/v1alpha2, alpha: its GenericWorkload gate and
// --runtime-config): without them the caches would never sync, and no Job
// would run.
func Served(client discovery.DiscoveryInterface) error {
	group := schedulingv1alpha2.SchemeGroupVersion.String()
	resources, err := client.ServerResourcesForGroupVersion(group)
	if err != nil {
		return fmt.Errorf("the API server does not serve %s (WorkloadWithJob needs it: kube-apiserver --feature-gates=GenericWorkload=true --runtime-config=%s=true): %w", group, group, err)
	}
	missing := map[string]bool{"workloads": true, "podgroups": true}
	for _, r := range resources.APIResources {
		delete(missing, r.Name)
	}
	if len(missing) > 0 {
		return fmt.Errorf("the API server's %s lacks %v, which WorkloadWithJob needs", group, slices.Sorted(maps.Keys(missing)))
	}
	return nil
}

// Eligible says whether the Job is gang-scheduled: Indexed, parallelism
// above 1 and equal to completions, and no scheduling group already set on
// its template (a higher-level controller's own).
func Eligible(job *batchv1.Job) bool {
	s := job.Spec
	return s.Parallelism != nil && *s.Parallelism > 1 &&
		s.CompletionMode != nil && *s.CompletionMode == batchv1.IndexedCompletion &&
		s.Completions != nil && *s.Completions == *s.Parallelism &&
		s.Template.Spec.SchedulingGroup == nil
}

// Ensure finds or creates the Job's Workload and PodGroup and answers the
// PodGroup its pods join; nil when the Job is scheduled as any other: not
// eligible, a Job that started before (pods is every pod it controls), or
// objects that are ambiguous or not the Job's.
func (o *Objects) Ensure(ctx context.Context, job *batchv1.Job, pods []*corev1.Pod) (*schedulingv1alpha2.PodGroup, error) {
	if o == nil || !Eligible(job) {
		return nil, nil
	}
	wl, err := o.workload(ctx, job, pods)
	if err != nil || wl == nil {
		return nil, err
	}
	return o.podGroup(ctx, job, wl)
}

// workload is the Job's Workload, created when the Job is new.
func (o *Objects) workload(ctx context.Context, job *batchv1.Job, pods []*corev1.Pod) (*schedulingv1alpha2.Workload, error) {
	var result *schedulingv1alpha2.Workload
	// Created but not yet in the cache: look again, as the reference does.
	err := retry.OnError(retry.DefaultRetry, apierrors.IsAlreadyExists, func() error {
		matched, err := o.workloads.ByIndex(workloadsByJob, job.Namespace+"/"+job.Name)
		if err != nil {
			return err
		}
		switch len(matched) {
		case 0:
			if !isNew(job, pods) {
				return nil
			}
			result, err = o.createWorkload(ctx, job)
			return err
		case 1:
			wl := matched[0].(*schedulingv1alpha2.Workload)
			if !metav1.IsControlledBy(wl, job) {
				o.log.Debug("Workload not the Job's; default scheduling", "job", job.Namespace+"/"+job.Name, "workload", wl.Name)
				return nil
			}
			if len(wl.Spec.PodGroupTemplates) != 1 {
				o.log.Debug("Workload of an unsupported shape; default scheduling", "job", job.Namespace+"/"+job.Name, "workload", wl.Name)
				return nil
			}
			result = wl
			return nil
		default:
			o.log.Warn("several Workloads reference the Job; default scheduling", "job", job.Namespace+"/"+job.Name, "workloads", len(matched))
			return nil
		}
	})
	return result, err
}

// podGroup is the Workload's PodGroup, created when there is none.
func (o *Objects) podGroup(ctx context.Context, job *batchv1.Job, wl *schedulingv1alpha2.Workload) (*schedulingv1alpha2.PodGroup, error) {
	var result *schedulingv1alpha2.PodGroup
	err := retry.OnError(retry.DefaultRetry, apierrors.IsAlreadyExists, func() error {
		matched, err := o.podGroups.ByIndex(podGroupsByWorkload, wl.Namespace+"/"+wl.Name)
		if err != nil {
			return err
		}
		switch len(matched) {
		case 0:
			result, err = o.createPodGroup(ctx, job, wl)
			return err
		case 1:
			if pg := matched[0].(*schedulingv1alpha2.PodGroup); metav1.IsControlledBy(pg, job) {
				result = pg
			}
			return nil
		default:
			o.log.Warn("several PodGroups reference the Workload; default scheduling", "job", job.Namespace+"/"+job.Name, "podGroups", len(matched))
			return nil
		}
	})
	return result, err
}

// isNew says whether the Job never started, so that a Job older than the
// gate gets no scheduling objects: no pods, no start time, no pod counted,
// never suspended (each alone has gaps, as the reference says).
func isNew(job *batchv1.Job, pods []*corev1.Pod) bool {
	if len(pods) != 0 || job.Status.StartTime != nil || job.Status.Succeeded != 0 || job.Status.Failed != 0 {
		return false
	}
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobSuspended {
			return false
		}
	}
	return true
}

func (o *Objects) createWorkload(ctx context.Context, job *batchv1.Job) (*schedulingv1alpha2.Workload, error) {
	wl := &schedulingv1alpha2.Workload{
		ObjectMeta: metav1.ObjectMeta{
			Name:            WorkloadName(job),
			Namespace:       job.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, jobKind)},
		},
		Spec: schedulingv1alpha2.WorkloadSpec{
			ControllerRef: &schedulingv1alpha2.TypedLocalObjectReference{APIGroup: batchv1.GroupName, Kind: "Job", Name: job.Name},
			PodGroupTemplates: []schedulingv1alpha2.PodGroupTemplate{{
				Name: job.Name + "-pgt-0",
				SchedulingPolicy: schedulingv1alpha2.PodGroupSchedulingPolicy{
					Gang: &schedulingv1alpha2.GangSchedulingPolicy{MinCount: *job.Spec.Parallelism},
				},
			}},
		},
	}
	created, err := o.client.SchedulingV1alpha2().Workloads(job.Namespace).Create(ctx, wl, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	o.recorder.Eventf(job, corev1.EventTypeNormal, reasonWorkloadCreated, "Created Workload %s for Job %s", created.Name, job.Name)
	return created, nil
}

func (o *Objects) createPodGroup(ctx context.Context, job *batchv1.Job, wl *schedulingv1alpha2.Workload) (*schedulingv1alpha2.PodGroup, error) {
	template := wl.Spec.PodGroupTemplates[0]
	pg := &schedulingv1alpha2.PodGroup{
		ObjectMeta: metav1.ObjectMeta{
			Name:      PodGroupName(wl.Name, template.Name),
			Namespace: job.Namespace,
			OwnerReferences: []metav1.OwnerReference{
				*metav1.NewControllerRef(job, jobKind),
				// Not blocking the Workload's deletion.
				{APIVersion: schedulingv1alpha2.SchemeGroupVersion.String(), Kind: "Workload", Name: wl.Name, UID: wl.UID},
			},
		},
		Spec: schedulingv1alpha2.PodGroupSpec{
			PodGroupTemplateRef: &schedulingv1alpha2.PodGroupTemplateReference{
				Workload: &schedulingv1alpha2.WorkloadPodGroupTemplateReference{WorkloadName: wl.Name, PodGroupTemplateName: template.Name},
			},
			SchedulingPolicy: *template.SchedulingPolicy.DeepCopy(),
		},
	}
	return o.client.SchedulingV1alpha2().PodGroups(job.Namespace).Create(ctx, pg, metav1.CreateOptions{})
}

// Join makes pod a member of the PodGroup pg (nil: none). The reference
// also adds an owner reference to the PodGroup to its pod template, which
// its pod creation then drops (it keeps only the Job's); jobplane's pods are
// the reference's: the scheduling group alone.
func Join(pod *corev1.Pod, pg *schedulingv1alpha2.PodGroup) {
	if pg == nil {
		return
	}
	name := pg.Name
	pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &name}
}

// WorkloadName is the reference's name of a Job's Workload: the Job's name,
// truncated, and a hash of its UID.
func WorkloadName(job *batchv1.Job) string {
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dump.ForHash(job.UID)) // the reference's DeepHashObject
	hash := rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
	prefix := job.Name
	if limit := validation.DNS1123SubdomainMaxLength - len(hash) - 1; len(prefix) > limit {
		prefix = prefix[:limit]
	}
	return prefix + "-" + hash
}

// PodGroupName is the reference's name of a Workload's PodGroup: both names,
// truncated to share the room fairly, and a hash of them.
func PodGroupName(workload, template string) string {
	h := fnv.New32a()
	h.Write([]byte(workload))
	h.Write([]byte(template))
	hash := rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
	room := validation.DNS1123SubdomainMaxLength - len(hash) - 2
	if len(workload)+len(template) > room {
		half := room / 2
		switch {
		case len(workload) <= half:
			template = template[:room-len(workload)]
		case len(template) <= half:
			workload = workload[:room-len(template)]
		default:
			workload, template = workload[:room-half], template[:half]
		}
	}
	return workload + "-" + template + "-" + hash
}

func indexWorkload(obj any) ([]string, error) {
	wl, ok := obj.(*schedulingv1alpha2.Workload)
	if !ok {
		return nil, fmt.Errorf("not a Workload: %T", obj)
	}
	ref := wl.Spec.ControllerRef
	if ref == nil || ref.APIGroup != batchv1.GroupName || ref.Kind != "Job" || ref.Name == "" {
		return nil, nil
	}
	return []string{wl.Namespace + "/" + ref.Name}, nil
}

func indexPodGroup(obj any) ([]string, error) {
	pg, ok := obj.(*schedulingv1alpha2.PodGroup)
	if !ok {
		return nil, fmt.Errorf("not a PodGroup: %T", obj)
	}
	ref := pg.Spec.PodGroupTemplateRef
	if ref == nil || ref.Workload == nil || ref.Workload.WorkloadName == "" {
		return nil, nil
	}
	return []string{pg.Namespace + "/" + ref.Workload.WorkloadName}, nil
}
