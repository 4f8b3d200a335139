package apierr

import (
	"strings"

	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ObjectKey checks the namespace and name a request names an object by, as
// the API server checks them: a namespace is a DNS label, a name a DNS
// subdomain (Jobs and CronJobs alike). A name no object can have is then
// InvalidArgument, never NotFound, a client library's error answered as
// Internal, or a cache key that cannot be split.
func ObjectKey(namespacePath, namePath *field.Path, namespace, name string) field.ErrorList {
	return append(Namespace(namespacePath, namespace, true), Name(namePath, name)...)
}

// Name checks the name of a Job or CronJob: required, a DNS subdomain.
func Name(path *field.Path, name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	if isDNSSubdomain(name) {
		return nil
	}
	var errs field.ErrorList
	for _, msg := range apimachineryvalidation.NameIsDNSSubdomain(name, false) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	return errs
}

// Namespace checks a namespace a request names; empty is an error only when
// required (else it means every namespace).
func Namespace(path *field.Path, namespace string, required bool) field.ErrorList {
	if namespace == "" {
		if required {
			return field.ErrorList{field.Required(path, "")}
		}
		return nil
	}
	if len(namespace) <= maxLabel && isDNSLabel(namespace) {
		return nil
	}
	var errs field.ErrorList
	for _, msg := range apimachineryvalidation.ValidateNamespaceName(namespace, false) {
		errs = append(errs, field.Invalid(path, namespace, msg))
	}
	return errs
}

// The longest DNS label and subdomain (RFC 1123).
const (
	maxLabel     = 63
	maxSubdomain = 253
)

// isDNSSubdomain is what apimachinery's IsDNS1123Subdomain accepts, without
// its regular expression: a sync names its Job and namespace, and the
// expressions took 3% of the planner's CPU on small syncs. A name it refuses
// is checked by apimachinery again, for its messages.
func isDNSSubdomain(s string) bool {
	if len(s) > maxSubdomain {
		return false
	}
	for {
		dot := strings.IndexByte(s, '.')
		if dot < 0 {
			return isDNSLabel(s)
		}
		if !isDNSLabel(s[:dot]) {
			return false
		}
		s = s[dot+1:]
	}
}

// isDNSLabel is IsDNS1123Label's pattern, without its length: lower-case
// letters, digits and '-', starting and ending with a letter or digit.
func isDNSLabel(s string) bool {
	if s == "" || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
