package jobstate

import (
	"testing"

	clocktesting "k8s.io/utils/clock/testing"
)

type storeAt string

func (s storeAt) LastStoreSyncResourceVersion() string { return string(s) }

func TestEnsureReadyWaitsForTheCacheToSeeOurWrites(t *testing.T) {
	for _, tc := range []struct {
		name    string
		writes  map[string][]string
		stores  map[string]LastSyncRVGetter
		wantErr bool
	}{
		{name: "nothing written", stores: map[string]LastSyncRVGetter{Pods: storeAt("1")}},
		{name: "pods cache behind", writes: map[string][]string{Pods: {"10"}}, stores: map[string]LastSyncRVGetter{Pods: storeAt("9")}, wantErr: true},
		{name: "pods cache caught up", writes: map[string][]string{Pods: {"10"}}, stores: map[string]LastSyncRVGetter{Pods: storeAt("10")}},
		{name: "an older write does not lower the mark", writes: map[string][]string{Pods: {"12", "10"}}, stores: map[string]LastSyncRVGetter{Pods: storeAt("11")}, wantErr: true},
		{name: "jobs cache behind", writes: map[string][]string{Pods: {"3"}, Jobs: {"20"}}, stores: map[string]LastSyncRVGetter{Pods: storeAt("30"), Jobs: storeAt("19")}, wantErr: true},
		{name: "a store that has seen nothing is not waited for", writes: map[string][]string{Pods: {"10"}}, stores: map[string]LastSyncRVGetter{Pods: storeAt("")}},
		{name: "a resource without a store is not waited for", writes: map[string][]string{Jobs: {"10"}}, stores: map[string]LastSyncRVGetter{Pods: storeAt("1")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(clocktesting.NewFakeClock(t0))
			for resource, rvs := range tc.writes {
				for _, rv := range rvs {
					s.WroteAt("ns/job", resource, rv)
				}
			}
			err := s.EnsureReady("ns/job", tc.stores)
			if (err != nil) != tc.wantErr {
				t.Fatalf("EnsureReady = %v, want error %v", err, tc.wantErr)
			}
			if !tc.wantErr && s.EnsureReady("ns/job", map[string]LastSyncRVGetter{Pods: storeAt("1"), Jobs: storeAt("1")}) != nil {
				t.Fatal("the record was not dropped once the caches caught up")
			}
		})
	}
}
