package dropin

import (
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/utils/ptr"

	"github.com/jobplane/jobplane/lib/featuregates"
)

// BuiltinManagedBy is the spec.managedBy of the built-in Job controller's
// Jobs, as unset is.
const BuiltinManagedBy = "kubernetes.io/job-controller"

// Runs says whether an executor whose own Jobs carry managedBy runs job:
// those, and in drop-in mode the built-in controller's; every Job in
// drop-in mode with JobManagedBy off (a cluster emulating a version before
// spec.managedBy), as the built-in controller then does.
func Runs(job *batchv1.Job, managedBy string, dropIn bool, gates featuregates.Features) bool {
	m := ptr.Deref(job.Spec.ManagedBy, "")
	return m == managedBy || dropIn && (gates.JobManagedByOff || m == "" || m == BuiltinManagedBy)
}
