package kubeconv_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/kubeconv"
)

// The testdata files are the output of `kubectl get job|pod NAME -o json
// --show-managed-fields` against the local cluster (hack/cluster.sh): a
// completed Indexed Job, a Job managed by jobplane, a Job in flight with
// uncounted pods, a succeeded pod and an evicted pod being deleted.
var (
	jobFiles = []string{"kubectl-job-complete.json", "kubectl-job-managed.json", "kubectl-job-in-flight.json"}
	podFiles = []string{"kubectl-pod-succeeded.json", "kubectl-pod-failed.json"}
)

// Fields of the contract that none of the kubectl outputs above can hold, and
// why. Every other field of Job and Pod must be exercised by the testdata.
var notInKubectlOutput = map[string]string{
	"jobplane.v1.ContainerState.waiting":        "kwok and status patches leave no container waiting; see TestWaitingContainersRoundTrip",
	"jobplane.v1.ContainerStateWaiting.reason":  "as above",
	"jobplane.v1.ContainerStateWaiting.message": "as above",
}

func TestKubectlJSONIsAcceptedAndEveryModelledFieldRead(t *testing.T) {
	covered := map[string]bool{}
	for _, name := range append(append([]string{}, jobFiles...), podFiles...) {
		t.Run(name, func(t *testing.T) {
			raw := readFile(t, name)
			var msg proto.Message = &jobplanev1.Pod{}
			if strings.Contains(name, "job") {
				msg = &jobplanev1.Job{}
			}
			if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, msg); err != nil {
				t.Fatalf("protojson rejects kubectl output: %v", err)
			}
			var tree any
			if err := json.Unmarshal(raw, &tree); err != nil {
				t.Fatal(err)
			}
			w := &walker{t: t, covered: covered}
			w.compare(msg.ProtoReflect(), tree.(map[string]any), "")
			if w.checked < 40 {
				t.Errorf("only %d fields checked", w.checked)
			}
		})
	}

	// Every field of the Job and Pod messages is read from some output.
	var missing []string
	for _, root := range []protoreflect.MessageDescriptor{(&jobplanev1.Job{}).ProtoReflect().Descriptor(), (&jobplanev1.Pod{}).ProtoReflect().Descriptor()} {
		for _, f := range allFields(root, map[protoreflect.FullName]bool{}) {
			if !covered[f] {
				if _, excused := notInKubectlOutput[f]; !excused {
					missing = append(missing, f)
				}
			}
		}
	}
	if len(missing) > 0 {
		t.Errorf("fields no kubectl output exercises:\n%s", strings.Join(missing, "\n"))
	}
}

// The same JSON decoded by Kubernetes' own types and converted gives the same
// message as protojson: the converters and the JSON names agree.
func TestConvertersAgreeWithProtojson(t *testing.T) {
	for _, name := range jobFiles {
		t.Run(name, func(t *testing.T) {
			raw := readFile(t, name)
			fromJSON := &jobplanev1.Job{}
			if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, fromJSON); err != nil {
				t.Fatal(err)
			}
			var kube batchv1.Job
			if err := json.Unmarshal(raw, &kube); err != nil {
				t.Fatal(err)
			}
			converted, err := kubeconv.JobFromKube(&kube)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(fromJSON, converted, protocmp.Transform()); diff != "" {
				t.Errorf("JobFromKube differs from protojson (-protojson +converted):\n%s", diff)
			}
			back, err := kubeconv.JobToKube(converted, kubeconv.FullTemplate)
			if err != nil {
				t.Fatal(err)
			}
			kube.ManagedFields = nil
			if diff := cmp.Diff(kube, *back); diff != "" {
				t.Errorf("JobToKube(JobFromKube(job)) differs (-kube +back):\n%s", diff)
			}
		})
	}
	for _, name := range podFiles {
		t.Run(name, func(t *testing.T) {
			raw := readFile(t, name)
			fromJSON := &jobplanev1.Pod{}
			if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, fromJSON); err != nil {
				t.Fatal(err)
			}
			var kube corev1.Pod
			if err := json.Unmarshal(raw, &kube); err != nil {
				t.Fatal(err)
			}
			converted := kubeconv.PodFromKube(&kube)
			if diff := cmp.Diff(fromJSON, converted, protocmp.Transform()); diff != "" {
				t.Errorf("PodFromKube differs from protojson (-protojson +converted):\n%s", diff)
			}
			if diff := cmp.Diff(converted, kubeconv.PodFromKube(kubeconv.PodToKube(converted)), protocmp.Transform()); diff != "" {
				t.Errorf("pod round trip differs:\n%s", diff)
			}
			if len(kube.Labels) == 0 {
				t.Fatal("the pod has no labels to leave out")
			}
			if diff := cmp.Diff(forSync(converted), kubeconv.PodFromKubeForSync(&kube), protocmp.Transform()); diff != "" {
				t.Errorf("PodFromKubeForSync is not PodFromKube without what a sync does not read:\n%s", diff)
			}
		})
	}
}

func TestRestartPolicyOnlyDecodingReadsJustTheRestartPolicy(t *testing.T) {
	var kube batchv1.Job
	if err := json.Unmarshal(readFile(t, "kubectl-job-in-flight.json"), &kube); err != nil {
		t.Fatal(err)
	}
	pb, err := kubeconv.JobFromKube(&kube)
	if err != nil {
		t.Fatal(err)
	}
	lite, err := kubeconv.JobToKube(pb, kubeconv.RestartPolicyOnly)
	if err != nil {
		t.Fatal(err)
	}
	if lite.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyOnFailure || len(lite.Spec.Template.Spec.Containers) != 0 {
		t.Errorf("template spec %+v", lite.Spec.Template.Spec)
	}
}

// JobForSyncFromKube is JobFromKube with a template spec of the
// restartPolicy alone, and no labels nor annotations, the Job's or its
// template's, for every Job of the testdata.
func TestAJobForASyncIsTheJobWithoutWhatASyncDoesNotRead(t *testing.T) {
	for _, name := range jobFiles {
		t.Run(name, func(t *testing.T) {
			var kube batchv1.Job
			if err := json.Unmarshal(readFile(t, name), &kube); err != nil {
				t.Fatal(err)
			}
			want, err := kubeconv.JobFromKube(&kube)
			if err != nil {
				t.Fatal(err)
			}
			rp := want.GetSpec().GetTemplate().GetSpec().GetFields()["restartPolicy"]
			want.Spec.Template.Spec = &structpb.Struct{Fields: map[string]*structpb.Value{"restartPolicy": rp}}
			if len(want.Metadata.Labels)+len(want.Metadata.Annotations)+len(want.Spec.Template.Metadata.GetLabels()) == 0 {
				t.Fatal("the Job has no labels nor annotations to leave out")
			}
			want.Metadata.Labels, want.Metadata.Annotations = nil, nil
			want.Spec.Template.Metadata.Labels, want.Spec.Template.Metadata.Annotations = nil, nil
			if diff := cmp.Diff(want, kubeconv.JobForSyncFromKube(&kube), protocmp.Transform()); diff != "" {
				t.Error(diff)
			}
		})
	}
}

func TestTemplateThatIsNotAPodSpecIsAnError(t *testing.T) {
	spec, _ := structpb.NewStruct(map[string]any{"containers": "not a list"})
	_, err := kubeconv.JobToKube(&jobplanev1.Job{Spec: &jobplanev1.JobSpec{Template: &jobplanev1.PodTemplateSpec{Spec: spec}}}, kubeconv.FullTemplate)
	if err == nil {
		t.Fatal("accepted")
	}
}

func TestWaitingContainersRoundTrip(t *testing.T) {
	pod := &jobplanev1.Pod{Status: &jobplanev1.PodStatus{ContainerStatuses: []*jobplanev1.ContainerStatus{{
		Name:  "main",
		State: &jobplanev1.ContainerState{Waiting: &jobplanev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "pulling"}},
	}}}}
	back := kubeconv.PodFromKube(kubeconv.PodToKube(pod))
	if diff := cmp.Diff(pod.GetStatus().GetContainerStatuses(), back.GetStatus().GetContainerStatuses(), protocmp.Transform()); diff != "" {
		t.Error(diff)
	}
}

// walker compares a decoded message with the JSON it came from.
type walker struct {
	t       *testing.T
	covered map[string]bool
	checked int
}

func (w *walker) compare(m protoreflect.Message, obj map[string]any, path string) {
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		p := path + "." + fd.JSONName()
		raw, inJSON := obj[fd.JSONName()]
		if inJSON && raw == nil {
			inJSON = false // JSON null is "unset"
		}
		if !m.Has(fd) {
			if inJSON && !isZeroJSON(raw) {
				w.t.Errorf("%s: %v in JSON, not read", p, raw)
			}
			continue
		}
		if !inJSON {
			w.t.Errorf("%s: set but absent from JSON", p)
			continue
		}
		w.covered[string(fd.FullName())] = true
		w.compareValue(fd, m.Get(fd), raw, p)
	}
}

func (w *walker) compareValue(fd protoreflect.FieldDescriptor, v protoreflect.Value, raw any, path string) {
	switch {
	case fd.IsList():
		items, ok := raw.([]any)
		if !ok || len(items) != v.List().Len() {
			w.t.Errorf("%s: list %v vs JSON %v", path, v, raw)
			return
		}
		for i := range items {
			w.compareSingle(fd, v.List().Get(i), items[i], fmt.Sprintf("%s[%d]", path, i))
		}
	case fd.IsMap():
		entries, ok := raw.(map[string]any)
		if !ok || len(entries) != v.Map().Len() {
			w.t.Errorf("%s: map %v vs JSON %v", path, v, raw)
			return
		}
		v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
			if entries[k.String()] != mv.String() {
				w.t.Errorf("%s[%s]: %q vs JSON %v", path, k, mv.String(), entries[k.String()])
			}
			w.checked++
			return true
		})
	default:
		w.compareSingle(fd, v, raw, path)
	}
}

func (w *walker) compareSingle(fd protoreflect.FieldDescriptor, v protoreflect.Value, raw any, path string) {
	if fd.Kind() != protoreflect.MessageKind {
		w.checked++
		var want any
		switch fd.Kind() {
		case protoreflect.StringKind:
			want = v.String()
		case protoreflect.BoolKind:
			want = v.Bool()
		default:
			want = float64(v.Int())
		}
		if !reflect.DeepEqual(want, raw) {
			w.t.Errorf("%s: %v vs JSON %v", path, want, raw)
		}
		return
	}
	switch msg := v.Message().Interface().(type) {
	case *timestamppb.Timestamp:
		w.checked++
		ts, err := time.Parse(time.RFC3339, raw.(string))
		if err != nil || !ts.Equal(msg.AsTime()) {
			w.t.Errorf("%s: %s vs JSON %v", path, msg.AsTime(), raw)
		}
	case *structpb.Struct:
		w.checked++
		if diff := cmp.Diff(raw, msg.AsMap()); diff != "" {
			w.t.Errorf("%s: struct differs from JSON:\n%s", path, diff)
		}
	default:
		obj, ok := raw.(map[string]any)
		if !ok {
			w.t.Errorf("%s: JSON %v is not an object", path, raw)
			return
		}
		w.compare(v.Message(), obj, path)
	}
}

func isZeroJSON(v any) bool {
	switch x := v.(type) {
	case string:
		return x == ""
	case float64:
		return x == 0
	case bool:
		return !x
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

// allFields lists the full names of the fields reachable from md, not
// descending into well-known types.
func allFields(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) []string {
	if seen[md.FullName()] || strings.HasPrefix(string(md.FullName()), "google.") {
		return nil
	}
	seen[md.FullName()] = true
	var out []string
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		out = append(out, string(fd.FullName()))
		if fd.Message() != nil && !fd.IsMap() {
			out = append(out, allFields(fd.Message(), seen)...)
		}
	}
	sort.Strings(out)
	return out
}

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestJobWithoutSpecConverts(t *testing.T) {
	job, err := kubeconv.JobToKube(&jobplanev1.Job{Metadata: &jobplanev1.ObjectMeta{Name: "j"}}, kubeconv.FullTemplate)
	if err != nil || job.Name != "j" {
		t.Fatalf("JobToKube of a Job without spec = %v, %v", job, err)
	}
}

// forSync is p without what a sync does not read: labels, annotations but
// the sync's, containers' messages.
func forSync(p *jobplanev1.Pod) *jobplanev1.Pod {
	out := proto.Clone(p).(*jobplanev1.Pod)
	out.Metadata.Labels = nil
	for k := range out.Metadata.Annotations {
		if !slices.Contains(kubeconv.SyncAnnotations[:], k) {
			delete(out.Metadata.Annotations, k)
		}
	}
	if len(out.Metadata.Annotations) == 0 {
		out.Metadata.Annotations = nil
	}
	for _, st := range append(out.GetStatus().GetInitContainerStatuses(), out.GetStatus().GetContainerStatuses()...) {
		if w := st.GetState().GetWaiting(); w != nil {
			w.Message = ""
		}
		if t := st.GetState().GetTerminated(); t != nil {
			t.Message = ""
		}
	}
	return out
}

// A pod for a sync keeps the annotations a sync reads and leaves out the
// rest, its labels and its containers' messages (a tenant writes them),
// whether converted alone or by a request's converter, which leaves the
// informer's pod as it was.
func TestAPodForASyncKeepsWhatTheSyncReads(t *testing.T) {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"app": "x"}, Annotations: map[string]string{
			"note": strings.Repeat("x", 100<<10), batchv1.JobCompletionIndexAnnotation: "3", batchv1.JobIndexFailureCountAnnotation: "1",
		}},
		Status: corev1.PodStatus{
			Message:    "evicted",
			Conditions: []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Message: "kept"}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{
				Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error", Message: strings.Repeat("y", 4096)},
			}}},
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "i", State: corev1.ContainerState{
				Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "long"},
			}}},
		},
	}
	before := p.DeepCopy()
	for name, got := range map[string]*jobplanev1.Pod{"alone": kubeconv.PodFromKubeForSync(p), "in a request": kubeconv.NewSyncPodConverter(1).FromKube(p)} {
		meta, status := got.GetMetadata(), got.GetStatus()
		if meta.GetLabels() != nil || len(meta.GetAnnotations()) != 2 || meta.GetAnnotations()[batchv1.JobCompletionIndexAnnotation] != "3" ||
			meta.GetAnnotations()[batchv1.JobIndexFailureCountAnnotation] != "1" {
			t.Errorf("%s: labels %v, annotations %v; want the two a sync reads alone", name, meta.GetLabels(), meta.GetAnnotations())
		}
		terminated, waiting := status.GetContainerStatuses()[0].GetState().GetTerminated(), status.GetInitContainerStatuses()[0].GetState().GetWaiting()
		if terminated.GetMessage() != "" || waiting.GetMessage() != "" || terminated.GetExitCode() != 3 || terminated.GetReason() != "Error" || waiting.GetReason() != "ImagePullBackOff" {
			t.Errorf("%s: containers' states %v, %v; want their reasons and exit code without messages", name, terminated, waiting)
		}
		if status.GetMessage() != "evicted" || status.GetConditions()[0].GetMessage() != "kept" {
			t.Errorf("%s: the pod's message %q and its conditions' %v, set by the cluster, are kept", name, status.GetMessage(), status.GetConditions())
		}
		if diff := cmp.Diff(forSync(kubeconv.PodFromKube(p)), got, protocmp.Transform()); diff != "" {
			t.Errorf("%s differs from PodFromKube without what a sync does not read:\n%s", name, diff)
		}
	}
	if diff := cmp.Diff(before, p); diff != "" {
		t.Errorf("the informer's pod changed:\n%s", diff)
	}
}
