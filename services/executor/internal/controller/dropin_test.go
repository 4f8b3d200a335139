package controller

import (
	"testing"

	"github.com/jobplane/jobplane/services/executor/internal/dropin"
	"k8s.io/utils/ptr"
)

// Which Jobs the controller runs: its own managedBy always; in drop-in mode
// the built-in Job controller's too (managedBy unset or
// kubernetes.io/job-controller); another controller's never.
func TestManagedJobs(t *testing.T) {
	for _, tc := range []struct {
		managedBy   *string
		own, dropIn bool
	}{
		{managedBy: ptr.To(testManagedBy), own: true, dropIn: true},
		{managedBy: nil, own: false, dropIn: true},
		{managedBy: ptr.To(dropin.BuiltinManagedBy), own: false, dropIn: true},
		{managedBy: ptr.To("kueue.x-k8s.io/multikueue"), own: false, dropIn: false},
		{managedBy: ptr.To(""), own: false, dropIn: true},
	} {
		job := newJob("job", managedBy(tc.managedBy))
		for _, mode := range []struct {
			dropIn bool
			want   bool
		}{{false, tc.own}, {true, tc.dropIn}} {
			c := &Controller{cfg: Config{ManagedBy: testManagedBy, DropIn: mode.dropIn}}
			if got := c.managed(job); got != mode.want {
				t.Errorf("managedBy %q, drop-in %v: managed %v, want %v", ptr.Deref(tc.managedBy, "<unset>"), mode.dropIn, got, mode.want)
			}
		}
	}
}
