package kubeconv

import (
	"slices"
	"testing"
)

// A tenant who made two different lists hash alike would get neither the
// other's list: a hit counts only when the contents are equal, and the
// newcomer takes the entry over.
func TestShareListNeverHandsOutADifferentListUnderTheSameHash(t *testing.T) {
	var table sharedTable[uint64, []string]
	equal := func(x, y string) bool { return x == y }
	mine := []string{"example.com/mine"}
	if got := shareList(&table, 1, mine, equal); &got[0] != &mine[0] {
		t.Fatalf("the first list under a key is not kept: %v", got)
	}
	theirs := []string{"example.com/theirs"}
	if got := shareList(&table, 1, theirs, equal); !slices.Equal(got, theirs) {
		t.Fatalf("a different list under the same hash got %v, want %v", got, theirs)
	}
	again := []string{"example.com/theirs"}
	if got := shareList(&table, 1, again, equal); &got[0] != &theirs[0] {
		t.Errorf("an equal list is not shared after the takeover: %v", got)
	}
	if got := shareList(&table, 1, []string{"example.com/mine"}, equal); !slices.Equal(got, mine) {
		t.Errorf("the first list back under the same hash got %v", got)
	}
}
