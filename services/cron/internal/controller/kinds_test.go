package controller

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/lib/fairorder"
)

// A jobplane CronJob and a batch/v1 CronJob of the same name are two
// CronJobs: their keys differ, and each key leads back to its kind.
func TestEachKindHasItsOwnKeys(t *testing.T) {
	custom := &unstructured.Unstructured{}
	custom.SetAPIVersion(cronapi.APIVersion)
	custom.SetNamespace("team")
	custom.SetName("nightly")
	batch := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "nightly"}}
	customKey, ok1 := keyOf(custom)
	batchKey, ok2 := keyOf(batch)
	tombstoneKey, ok3 := keyOf(cache.DeletedFinalStateUnknown{Key: "team/nightly", Obj: batch})
	if !ok1 || !ok2 || !ok3 || customKey == batchKey || tombstoneKey != batchKey {
		t.Fatalf("keys %q, %q, tombstone %q", customKey, batchKey, tombstoneKey)
	}
	if customKey != "team/nightly" {
		t.Errorf("jobplane's key %q, want namespace/name as before drop-in mode", customKey)
	}
	for key, want := range map[string]string{customKey: cronapi.APIVersion, batchKey: "batch/v1"} {
		apiVersion, ns, name, err := splitCronJobKey(key)
		if err != nil || apiVersion != want || ns != "team" || name != "nightly" {
			t.Errorf("%q: %s %s/%s (%v), want %s team/nightly", key, apiVersion, ns, name, err, want)
		}
		if got := fairorder.NamespaceOf(key); got != "team" {
			t.Errorf("%q takes its turns as namespace %q, want team's", key, got)
		}
	}
}
