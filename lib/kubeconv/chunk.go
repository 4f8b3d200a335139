package kubeconv

// chunk hands out values of T from arrays of size values allocated at once,
// so that converting the thousands of pods of one request takes a few
// allocations instead of several per pod. A value lives as long as any
// value of its array: chunks suit objects built and dropped together. A
// size of 0 or 1 allocates each take alone.
type chunk[T any] struct {
	free []T
	size int
}

// take returns n zero values; nil for 0.
func (c *chunk[T]) take(n int) []T {
	if n == 0 {
		return nil
	}
	if len(c.free) < n {
		c.free = make([]T, max(n, c.size))
	}
	out := c.free[:n:n]
	c.free = c.free[n:]
	return out
}

// one returns a zero value.
func (c *chunk[T]) one() *T { return &c.take(1)[0] }
