package jobvalidation

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/util/validation/field"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
)

func contractJob(t *testing.T) *jobplanev1.Job {
	t.Helper()
	spec, err := structpb.NewStruct(map[string]any{
		"restartPolicy": "Never",
		"containers":    []any{map[string]any{"name": "main", "image": "busybox"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &jobplanev1.Job{
		Metadata: &jobplanev1.ObjectMeta{Name: "work", Namespace: "default"},
		Spec:     &jobplanev1.JobSpec{Template: &jobplanev1.PodTemplateSpec{Spec: spec}},
	}
}

func TestCheckReturnsTheJobDefaulted(t *testing.T) {
	job, errs := Check(contractJob(t), field.NewPath("job"))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if *job.Spec.Completions != 1 || *job.Spec.Parallelism != 1 || *job.Spec.BackoffLimit != 6 || len(job.Spec.Template.Spec.Containers) != 1 {
		t.Errorf("not defaulted or template lost: %+v", job.Spec)
	}
	if job.Spec.Selector != nil || job.Spec.Template.Labels != nil {
		t.Errorf("the selector and its labels are the API server's to generate: %+v", job.Spec)
	}
}

func TestCheckReportsViolationsUnderTheGivenField(t *testing.T) {
	cases := map[string]struct {
		job  func(*jobplanev1.Job) *jobplanev1.Job
		want []string
	}{
		"no job": {
			job:  func(*jobplanev1.Job) *jobplanev1.Job { return nil },
			want: []string{"req.job"},
		},
		"negative parallelism": {
			job: func(j *jobplanev1.Job) *jobplanev1.Job {
				j.Spec.Parallelism = proto.Int32(-1)
				return j
			},
			want: []string{"req.job.spec.parallelism"},
		},
		"template spec that is not a pod spec": {
			job: func(j *jobplanev1.Job) *jobplanev1.Job {
				j.Spec.Template.Spec.Fields["containers"] = structpb.NewStringValue("main")
				return j
			},
			want: []string{"req.job.spec.template.spec"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, errs := Check(tc.job(contractJob(t)), field.NewPath("req", "job"))
			var got []string
			for _, e := range errs {
				got = append(got, e.Field)
			}
			if len(got) != len(tc.want) || got[0] != tc.want[0] {
				t.Errorf("violations %v, want %v", got, tc.want)
			}
		})
	}
}
