// Package chunk hands out values from arrays allocated many at a time, so
// that converting or decoding the thousands of pods of one request takes a
// few allocations instead of several per pod.
package chunk

// MaxSize bounds the chunks of a request's parts (SizeFor): the parts of a
// few hundred pods at a time allocate only what the pods use.
const MaxSize = 256

// SizeFor is the chunk size for n objects' parts of one kind: n, at most
// MaxSize.
func SizeFor(n int) int { return min(n, MaxSize) }

// Of hands out values of T from arrays of Size values allocated at once. A
// value lives as long as any value of its array: chunks suit objects built
// and dropped together. A Size of 0 or 1 allocates each Take alone.
type Of[T any] struct {
	Size int
	free []T
}

// Take returns n zero values, with a capacity of n; nil for 0.
func (c *Of[T]) Take(n int) []T {
	if n == 0 {
		return nil
	}
	if len(c.free) < n {
		c.free = make([]T, max(n, c.Size))
	}
	out := c.free[:n:n]
	c.free = c.free[n:]
	return out
}

// One returns a zero value.
func (c *Of[T]) One() *T { return &c.Take(1)[0] }

// Append returns s with a zero value more, taken from the chunk while s is
// empty (most lists of a pod hold one item).
func (c *Of[T]) Append(s []T) []T {
	if len(s) == 0 {
		return c.Take(1)
	}
	var zero T
	return append(s, zero)
}
