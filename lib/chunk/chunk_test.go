package chunk

import (
	"testing"
	"unsafe"
)

func TestTakeSharesAnArrayAndCapsEachSlice(t *testing.T) {
	c := Of[int]{Size: 4}
	a, b := c.Take(3), c.Take(1)
	if &a[2:3][0] == &b[0] || uintptr(unsafe.Pointer(&b[0]))-uintptr(unsafe.Pointer(&a[2])) != unsafe.Sizeof(0) {
		t.Error("the second take is not the rest of the first array")
	}
	a = append(a, 7) // a's capacity is its length: it moves, b stays
	if b[0] != 0 || a[3] != 7 || cap(c.Take(2)) != 2 {
		t.Error("a take reaches into another")
	}
	if c.Take(0) != nil {
		t.Error("Take(0) is not nil")
	}
	if big := c.Take(9); len(big) != 9 {
		t.Errorf("Take(9) has %d values", len(big))
	}
}

func TestAppend(t *testing.T) {
	var c Of[string]
	s := c.Append(nil)
	s[0] = "a"
	s = c.Append(s)
	s[1] = "b"
	if len(s) != 2 || s[0] != "a" || s[1] != "b" {
		t.Errorf("%q", s)
	}
}
