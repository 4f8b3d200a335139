package fairqueue

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/jobplane/jobplane/lib/fairorder"
)

func namespaceWith(name string, annotations map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
}

// A namespace's valid annotation is its weight, over the flag's; an invalid
// one, a removed one or a deleted namespace leaves the flag's (or 1).
func TestNamespaceSharesFollowTheAnnotation(t *testing.T) {
	s := NewNamespaceShares(fairorder.Weights{"flagged": 3, "both": 2}, slog.New(slog.DiscardHandler))
	s.set(namespaceWith("annotated", map[string]string{WeightAnnotation: "7"}))
	s.set(namespaceWith("both", map[string]string{WeightAnnotation: "5"}))
	s.set(namespaceWith("flagged", nil))
	for _, value := range []string{"0", "1001", "-2", "two", "", "4.5"} {
		s.set(namespaceWith("invalid-"+strings.Trim(value, "-."), map[string]string{WeightAnnotation: value}))
	}
	want := map[string]int{"annotated": 7, "both": 5, "flagged": 3, "unknown": 1,
		"invalid-0": 1, "invalid-1001": 1, "invalid-2": 1, "invalid-two": 1, "invalid-": 1, "invalid-45": 1}
	for ns, w := range want {
		if got := s.Of(ns); got != w {
			t.Errorf("Of(%s) = %d, want %d", ns, got, w)
		}
	}

	s.set(namespaceWith("both", map[string]string{WeightAnnotation: "bad"})) // an edit that breaks it
	s.set(namespaceWith("annotated", nil))                                   // the annotation removed
	if got := s.Of("both"); got != 2 {
		t.Errorf("after an invalid edit Of(both) = %d, want the flag's 2", got)
	}
	if got := s.Of("annotated"); got != 1 {
		t.Errorf("after the annotation's removal Of(annotated) = %d, want 1", got)
	}
}

// Through an informer: an annotation added, changed and the namespace
// deleted (as a tombstone too) are followed.
func TestNamespaceSharesWatchTheNamespaces(t *testing.T) {
	client := fake.NewClientset(namespaceWith("team-a", map[string]string{WeightAnnotation: "4"}), namespaceWith("team-b", nil))
	factory := informers.NewSharedInformerFactory(client, 0)
	s := NewNamespaceShares(nil, slog.New(slog.DiscardHandler))
	informer := factory.Core().V1().Namespaces().Informer()
	if err := s.Watch(informer); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	cache.WaitForCacheSync(stop, informer.HasSynced)
	eventually(t, "team-a's weight 4", func() bool { return s.Of("team-a") == 4 && s.Of("team-b") == 1 })

	ctx := t.Context()
	if _, err := client.CoreV1().Namespaces().Update(ctx, namespaceWith("team-b", map[string]string{WeightAnnotation: "9"}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "team-b's weight 9", func() bool { return s.Of("team-b") == 9 })
	if err := client.CoreV1().Namespaces().Delete(ctx, "team-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "team-a's weight gone", func() bool { return s.Of("team-a") == 1 })

	s.set(namespaceWith("team-c", map[string]string{WeightAnnotation: "3"}))
	s.unset(cache.DeletedFinalStateUnknown{Key: "team-c", Obj: namespaceWith("team-c", nil)})
	if got := s.Of("team-c"); got != 1 {
		t.Errorf("after a tombstone Of(team-c) = %d, want 1", got)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 500 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("never: %s", what)
}

// A weight changed while its namespace has work applies from its next turn.
func TestAChangedWeightAppliesFromTheNextTurn(t *testing.T) {
	s := NewNamespaceShares(nil, slog.New(slog.DiscardHandler))
	o := fairorder.NewOrder(s)
	for i := range 12 {
		o.Push(fmt.Sprintf("a/%d", i))
		o.Push(fmt.Sprintf("b/%d", i))
	}
	turns := func(n int) string {
		var ns []string
		for range n {
			ns = append(ns, fairorder.NamespaceOf(o.Pop()))
		}
		return strings.Join(ns, "")
	}
	if got := turns(4); got != "abab" {
		t.Fatalf("equal weights: %s, want abab", got)
	}
	s.set(namespaceWith("a", map[string]string{WeightAnnotation: "3"}))
	// a's pass was set at weight 1 before the change; from then on a pays
	// a third of a turn.
	if got := turns(8); strings.Count(got, "a") != 6 {
		t.Fatalf("after a's weight became 3: %s, want a three turns for each of b's", got)
	}
}
