package admission

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Unread answers are held against their caller's bound and the bound of
// all callers, given back once each (written, or their connection closed),
// and a connection's closing gives back its own only.
func TestUnreadAnswersAreBoundedAndGivenBack(t *testing.T) {
	c := New(Config{Levels: map[string]LevelConfig{
		Workload: {Seats: 1, UnreadAnswerBytes: 100, UnreadAnswerBytesPerCaller: 60},
		System:   {Seats: 1, UnreadAnswerBytes: 100, UnreadAnswerBytesPerCaller: 60},
	}}, nil)
	hold := func(caller, conn string, n int64) *HeldAnswer {
		t.Helper()
		h, err := c.HoldAnswer(Workload, caller, conn, n)
		if err != nil {
			t.Fatalf("holding %d for %s: %v", n, caller, err)
		}
		return h
	}
	refused := func(caller, conn string, n int64) {
		t.Helper()
		if _, err := c.HoldAnswer(Workload, caller, conn, n); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("holding %d for %s: %v, want RESOURCE_EXHAUSTED", n, caller, err)
		}
	}
	a1 := hold("a", "conn-a", 40)
	hold("a", "conn-a2", 20)
	refused("a", "conn-a", 1) // a's 60
	b := hold("b", "conn-b", 40)
	refused("b", "conn-b", 1) // all 100
	// The system level's budget is its own.
	if _, err := c.HoldAnswer(System, "executor", "conn-e", 50); err != nil {
		t.Fatalf("the system level, its workload's budget taken: %v", err)
	}
	c.ConnClosed("conn-e")
	a1.Release()
	a1.Release() // once only
	if all, mine := c.AnswersHeld("a"); all != 60 || mine != 20 {
		t.Fatalf("held %d in all, %d of a's; want 60 and 20", all, mine)
	}
	c.ConnClosed("conn-b")
	b.Release() // after its connection closed: nothing more
	if all, mine := c.AnswersHeld("b"); all != 20 || mine != 0 {
		t.Fatalf("held %d in all, %d of b's after its connection closed; want 20 and 0", all, mine)
	}
	c.ConnClosed("conn-a2")
	if all, _ := c.AnswersHeld("a"); all != 0 {
		t.Fatalf("held %d after every connection closed", all)
	}
	// A caller holding nothing may have one answer above its own bound,
	// within the level's; one above the level's can never be sent.
	big := hold("c", "conn-c", 90)
	refused("c", "conn-c", 1)
	big.Release()
	_, err := c.HoldAnswer(Workload, "c", "conn-c", 101)
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "never") || len(st.Details()) != 1 {
		t.Fatalf("an answer above the level's budget: %v (details %v), want RESOURCE_EXHAUSTED without RetryInfo", err, st.Details())
	}
}

// The level's bound of unread answers, filled by callers each within its
// own, is shared with a caller that holds less: the connection holding
// most of the caller holding the most is closed and its answers given
// back, until the new answer fits; a caller that would then hold more than
// every other is refused, as is any caller when no connection can be
// closed.
func TestUnreadAnswersAreSharedWithACallerHoldingLess(t *testing.T) {
	c := New(Config{Levels: map[string]LevelConfig{Workload: {Seats: 1, UnreadAnswerBytes: 100, UnreadAnswerBytesPerCaller: 40}}}, nil)
	var closed []string
	closable := true
	c.SetConnCloser(func(conn string) bool {
		if closable {
			closed = append(closed, conn)
		}
		return closable
	})
	for _, h := range []struct {
		caller, conn string
		n            int64
	}{{"a", "a1", 20}, {"a", "a2", 15}, {"b", "b1", 40}, {"c", "c1", 25}} {
		if _, err := c.HoldAnswer(Workload, h.caller, h.conn, h.n); err != nil {
			t.Fatal(err)
		}
	}
	closable = false
	if _, err := c.HoldAnswer(Workload, "d", "d1", 30); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("d's 30 when no connection can be closed: %v, want RESOURCE_EXHAUSTED", err)
	}
	closable = true
	if _, err := c.HoldAnswer(Workload, "d", "d1", 30); err != nil {
		t.Fatalf("d's 30 beside callers holding more: %v", err)
	}
	if fmt.Sprint(closed) != "[b1]" {
		t.Fatalf("closed %v, want b's connection alone", closed)
	}
	if all, mine := c.AnswersHeld("d"); all != 90 || mine != 30 {
		t.Fatalf("held %d in all, %d of d's; want 90 and 30", all, mine)
	}
	// c, holding 25, may not take 15 more (within its own 40): it would
	// hold more than any other caller.
	if _, err := c.HoldAnswer(Workload, "c", "c1", 15); status.Code(err) != codes.ResourceExhausted || len(closed) != 1 {
		t.Fatalf("c's 15 more: %v, closed %v; want RESOURCE_EXHAUSTED and nothing more closed", err, closed)
	}
	// The closed connection's end, when the transport reports it, counts
	// nothing twice.
	c.ConnClosed("b1")
	if all, _ := c.AnswersHeld("d"); all != 90 {
		t.Fatalf("held %d after the closed connection ended, want 90", all)
	}
}

// Room that closing connections cannot make is not tried for: no
// connection is closed for an answer refused anyway.
func TestNoConnectionIsClosedForAnAnswerRefusedAnyway(t *testing.T) {
	c := New(Config{Levels: map[string]LevelConfig{Workload: {Seats: 1, UnreadAnswerBytes: 100, UnreadAnswerBytesPerCaller: 60}}}, nil)
	var closed []string
	c.SetConnCloser(func(conn string) bool { closed = append(closed, conn); return true })
	for _, h := range []struct {
		caller, conn string
		n            int64
	}{{"a", "a1", 30}, {"a", "a2", 30}, {"c", "c1", 40}} {
		if _, err := c.HoldAnswer(Workload, h.caller, h.conn, h.n); err != nil {
			t.Fatal(err)
		}
	}
	// d's 50: a's a1 would leave no caller holding more than 50, and 30
	// bytes short.
	if _, err := c.HoldAnswer(Workload, "d", "d1", 50); status.Code(err) != codes.ResourceExhausted || len(closed) != 0 {
		t.Fatalf("d's 50: %v, closed %v; want RESOURCE_EXHAUSTED and nothing closed", err, closed)
	}
}
