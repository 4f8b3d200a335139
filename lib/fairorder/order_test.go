package fairorder

import (
	"fmt"
	"strings"
	"testing"
)

func TestRemoveTakesAKeyOutWithoutServingIt(t *testing.T) {
	cases := []struct {
		name   string
		pushed []string
		remove string
		found  bool
		// want is the order of the keys left.
		want []string
	}{
		{name: "KeyInTheMiddleOfItsNamespace", pushed: []string{"a/1", "b/1", "a/2", "a/3"}, remove: "a/2", found: true,
			want: []string{"a/1", "b/1", "a/3"}},
		{name: "LastKeyOfItsNamespace", pushed: []string{"a/1", "b/1", "c/1"}, remove: "b/1", found: true,
			want: []string{"a/1", "c/1"}},
		{name: "KeyNotQueued", pushed: []string{"a/1"}, remove: "a/2", want: []string{"a/1"}},
		{name: "NamespaceNeverSeen", pushed: []string{"a/1"}, remove: "z/1", want: []string{"a/1"}},
		{name: "UnkeyedLane", pushed: []string{"", "a/1"}, remove: "", found: true, want: []string{"a/1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOrder(nil)
			for _, k := range tc.pushed {
				o.Push(k)
			}
			if got := o.Remove(tc.remove); got != tc.found {
				t.Errorf("Remove(%q) = %v, want %v", tc.remove, got, tc.found)
			}
			if o.Len() != len(tc.want) {
				t.Fatalf("Len = %d, want %d", o.Len(), len(tc.want))
			}
			var got []string
			for o.Len() > 0 {
				got = append(got, o.Pop())
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("left %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRemovedNamespaceKeepsItsPass: taking a namespace's only key out gives it
// no credit: it comes back behind the namespaces served since.
func TestRemovedNamespaceKeepsItsPass(t *testing.T) {
	o := NewOrder(nil)
	for _, k := range []string{"a/1", "a/2", "b/1", "b/2"} {
		o.Push(k)
	}
	if got := o.Pop(); got != "a/1" {
		t.Fatalf("first turn %s, want a/1", got)
	}
	o.Remove("a/2") // a idle, its next turn already one turn ahead
	o.Push("a/3")
	var got []string
	for o.Len() > 0 {
		got = append(got, o.Pop())
	}
	if want := "[b/1 a/3 b/2]"; fmt.Sprint(got) != want {
		t.Errorf("turns %v, want %s", got, want)
	}
}

// TestQuietNamespacesAreForgotten: a namespace with nothing queued is kept
// only while it is owed a wait; thousands passing through leave nothing.
func TestQuietNamespacesAreForgotten(t *testing.T) {
	o := NewOrder(nil)
	for i := range 10000 {
		o.Push(fmt.Sprintf("ns-%d/job", i))
		o.Pop()
	}
	for range 10 {
		o.Push("busy/job")
		o.Pop()
	}
	if n := len(o.tenants); n > 2 {
		t.Errorf("%d namespaces kept after 10,000 came and went; want at most 2", n)
	}
	if len(o.buckets) != 0 || len(o.passes) != 0 {
		t.Errorf("%d buckets, %d passes left with nothing queued", len(o.buckets), len(o.passes))
	}
}

func TestWeightsFlag(t *testing.T) {
	cases := []struct {
		name    string
		value   string
		want    string
		wantErr string
	}{
		{name: "Empty", value: "", want: ""},
		{name: "SeveralInAnyOrder", value: "team-b=1, team-a=4", want: "team-a=4,team-b=1"},
		{name: "TrailingComma", value: "team-a=2,", want: "team-a=2"},
		{name: "NoWeight", value: "team-a", wantErr: `"team-a": want namespace=weight`},
		{name: "WeightZero", value: "team-a=0", wantErr: "weight must be an integer from 1 to 1000"},
		{name: "WeightTooLarge", value: "team-a=1001", wantErr: "weight must be an integer from 1 to 1000"},
		{name: "NotANumber", value: "team-a=x", wantErr: "weight must be an integer"},
		{name: "NotANamespaceName", value: "Team_A=2", wantErr: `namespace "Team_A"`},
		{name: "Twice", value: "team-a=2,team-a=3", wantErr: "given twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var w Weights
			err := w.Set(tc.value)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Set(%q) = %v, want an error with %q", tc.value, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := w.String(); got != tc.want {
				t.Errorf("Set(%q) then String = %q, want %q", tc.value, got, tc.want)
			}
		})
	}
	w := Weights{"team-a": 4}
	if w.Of("team-a") != 4 || w.Of("team-b") != 1 || Weights(nil).Of("x") != 1 {
		t.Error("Of: a listed namespace has its weight, others 1")
	}
}

// WaitingBesides tells a namespace whether another has keys queued, as the
// keys come and go.
func TestWaitingBesidesFollowsTheQueuedNamespaces(t *testing.T) {
	o := NewOrder(nil)
	check := func(when string, ns string, want bool) {
		t.Helper()
		if got := o.WaitingBesides(ns); got != want {
			t.Errorf("%s: WaitingBesides(%q) = %v, want %v", when, ns, got, want)
		}
	}
	check("empty", "a", false)
	o.Push("a/1")
	o.Push("a/2")
	check("only a queued", "a", false)
	check("only a queued", "b", true)
	o.Push("b/1")
	check("a and b queued", "a", true)
	if got := o.Pop(); got != "a/1" {
		t.Fatalf("popped %q, want a/1", got)
	}
	if got := o.Pop(); got != "b/1" {
		t.Fatalf("popped %q, want b/1", got)
	}
	check("a left alone", "a", false)
	check("a left alone", "b", true)
	o.Push("b/2")
	o.Remove("a/2")
	check("b left alone", "b", false)
	check("b left alone", "a", true)
	o.Pop()
	check("empty again", "b", false)
}

// Next names the namespace Pop serves next, as the keys come and go.
func TestNextIsTheNamespacePopServes(t *testing.T) {
	o := NewOrder(nil)
	if got := o.Next(); got != "" {
		t.Fatalf("empty: Next() = %q, want none", got)
	}
	for _, key := range []string{"a/1", "a/2", "a/3", "b/1", "c/1", "b/2"} {
		o.Push(key)
	}
	for o.Len() > 0 {
		next := o.Next()
		if got := NamespaceOf(o.Pop()); got != next {
			t.Fatalf("Next() = %q, then Pop served %q", next, got)
		}
	}
	if got := o.Next(); got != "" {
		t.Errorf("emptied: Next() = %q, want none", got)
	}
	o.Push("a/4")
	o.Push("b/3")
	o.Remove("a/4")
	if got := o.Next(); got != "b" {
		t.Errorf("a's only key removed: Next() = %q, want b", got)
	}
}
