package engine

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// sortByCompletionIndex orders pods exactly as the stable comparison sort
// does (sortByKey): by index, pods of one index in their order, whether the
// indexes are dense, repeated, unknown (-1) or sparse (the fallback).
func TestSortByCompletionIndexIsTheStableSort(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name   string
		n      int
		index  func() int
		checks int
	}{
		{"dense", 1000, func() int { return r.IntN(1000) }, 20},
		{"repeated", 500, func() int { return r.IntN(10) }, 20},
		{"with unknown", 300, func() int { return r.IntN(400) - 1 }, 20},
		{"sparse", 200, func() int { return r.IntN(1 << 30) }, 20},
		{"one", 1, func() int { return 7 }, 1},
		{"two", 2, func() int { return r.IntN(3) - 1 }, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range tc.checks {
				pods := make([]*pod, tc.n)
				for i := range pods {
					pods[i] = &pod{index: tc.index()}
				}
				want := slices.Clone(pods)
				sortByKey(want, func(p *pod) int { return p.index }, func(a, b int) int { return a - b })
				sortByCompletionIndex(pods)
				for i := range pods {
					if pods[i] != want[i] {
						t.Fatalf("position %d: index %d, want the pod of index %d at %d", i, pods[i].index, want[i].index, i)
					}
				}
			}
		})
	}
}
