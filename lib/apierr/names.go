package apierr

import (
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
	var errs field.ErrorList
	for _, msg := range apimachineryvalidation.ValidateNamespaceName(namespace, false) {
		errs = append(errs, field.Invalid(path, namespace, msg))
	}
	return errs
}
