package main

import "testing"

func TestProcessorsFollowTheAPIBudget(t *testing.T) {
	for _, tc := range []struct {
		qps            float64
		runtimeDefault int
		want           int
	}{
		{qps: 20, runtimeDefault: 8, want: 1},   // the default budget
		{qps: 500, runtimeDefault: 8, want: 1},  // one processor's worth
		{qps: 501, runtimeDefault: 8, want: 2},  // a little more takes a second
		{qps: 1000, runtimeDefault: 8, want: 2}, // kube-controller-manager-sized
		{qps: 1e6, runtimeDefault: 8, want: 8},  // never beyond the cores
		{qps: 1000, runtimeDefault: 1, want: 1}, // nor the container's CPU limit
		{qps: 0.5, runtimeDefault: 2, want: 1},  // never none
	} {
		if got := processors(tc.qps, tc.runtimeDefault); got != tc.want {
			t.Errorf("processors(%g, %d) = %d, want %d", tc.qps, tc.runtimeDefault, got, tc.want)
		}
	}
}
