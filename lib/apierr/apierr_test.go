package apierr

import (
	"reflect"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validation errors become one InvalidArgument status whose field
// violations are the errors' paths and bodies, in the API server's words.
func TestInvalidIsInvalidArgumentWithTheErrorsAsFieldViolations(t *testing.T) {
	if err := Invalid("invalid X", nil); err != nil {
		t.Fatalf("no errors: %v, want nil", err)
	}
	err := Invalid("invalid X", field.ErrorList{
		field.Required(field.NewPath("uid"), ""),
		field.Invalid(field.NewPath("pods").Index(2).Child("metadata", "name"), "a/b", "must be a DNS subdomain"),
		field.NotSupported(field.NewPath("policy"), "Sometimes", []string{"Always", "Never"}),
	})
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("code %s, want InvalidArgument", st.Code())
	}
	want := []Violation{
		{"pods[2].metadata.name", `Invalid value: "a/b": must be a DNS subdomain`},
		{"policy", `Unsupported value: "Sometimes": supported values: "Always", "Never"`},
		{"uid", "Required value"},
	}
	if got := FieldViolations(err); !reflect.DeepEqual(got, want) {
		t.Errorf("violations %+v, want %+v", got, want)
	}
	if msg := st.Message(); msg != `invalid X: uid: Required value; pods[2].metadata.name: Invalid value: "a/b": must be a DNS subdomain; policy: Unsupported value: "Sometimes": supported values: "Always", "Never"` {
		t.Errorf("message %q", msg)
	}
}

func TestObjectKeyChecksNamespaceAndName(t *testing.T) {
	ns, name := field.NewPath("namespace"), field.NewPath("name")
	cases := []struct {
		namespace, name string
		want            []string
	}{
		{"team-a", "nightly.run-01", nil},
		{"", "", []string{"namespace", "name"}},
		{"team-a", "a/b", []string{"name"}},
		{"team-a", "..", []string{"name"}},
		{"Team-A", "job", []string{"namespace"}},
		{"a.b", "job", []string{"namespace"}},
	}
	for _, tc := range cases {
		var got []string
		for _, e := range ObjectKey(ns, name, tc.namespace, tc.name) {
			got = append(got, e.Field)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ObjectKey(%q, %q) errors of %v, want %v", tc.namespace, tc.name, got, tc.want)
		}
	}
	if errs := Namespace(ns, "", false); len(errs) > 0 {
		t.Errorf("an optional empty namespace: %v", errs)
	}
}

// The API server's causes keep their words, under the prefix; a cause about
// no field is left out.
func TestKubeCausesAreTheAPIServersUnderThePrefix(t *testing.T) {
	err := apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, "j", field.ErrorList{
		field.Invalid(field.NewPath("spec", "parallelism"), -1, "must be greater than or equal to 0"),
	})
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Field: "<nil>", Message: "some validation rules were not checked"})
	got := KubeCauses(err, field.NewPath("job"))
	if len(got) != 1 || got[0].Field != "job.spec.parallelism" || got[0].ErrorBody() != "Invalid value: -1: must be greater than or equal to 0" {
		t.Errorf("causes %v", got)
	}
	plain := KubeCauses(apierrors.NewBadRequest("nope"), nil)
	if len(plain) != 1 || plain[0].Field != "" || plain[0].ErrorBody() != "Invalid value: nope" {
		t.Errorf("without causes: %v", plain)
	}
}

// A selector is matched against every object listed, requirement by
// requirement: one longer than any a person writes is refused before it is
// parsed, as a malformed one is, at its path.
func TestLabelSelectorRefusesTheOverlongAndTheMalformed(t *testing.T) {
	path := field.NewPath("labelSelector")
	if s, errs := LabelSelector(path, "app=report,tier in (a,b),!gone"); len(errs) != 0 || s.String() == "" {
		t.Errorf("a selector: %v, %v", s, errs)
	}
	long := strings.Repeat("!a,", MaxLabelSelectorLength/3+1)
	if _, errs := LabelSelector(path, long); len(errs) != 1 || errs[0].Type != field.ErrorTypeTooLong || errs[0].Field != "labelSelector" {
		t.Errorf("a %d-byte selector: %v, want TooLong at labelSelector", len(long), errs)
	}
	if _, errs := LabelSelector(path, "app in ("); len(errs) != 1 || errs[0].Type != field.ErrorTypeInvalid {
		t.Errorf("a malformed selector: %v, want Invalid", errs)
	}
}

// A watch resumes from a resourceVersion the API answered, a decimal:
// anything else is refused at the request's own field.
func TestResourceVersionIsEmptyOrDecimal(t *testing.T) {
	path := field.NewPath("resourceVersion")
	for _, rv := range []string{"", "0", "123456789"} {
		if errs := ResourceVersion(path, rv); len(errs) != 0 {
			t.Errorf("%q: %v", rv, errs)
		}
	}
	for _, rv := range []string{"abc", "-1", "1.5", "99999999999999999999"} {
		if errs := ResourceVersion(path, rv); len(errs) != 1 || errs[0].Field != "resourceVersion" {
			t.Errorf("%q: %v, want one violation at resourceVersion", rv, errs)
		}
	}
}
