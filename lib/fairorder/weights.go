package fairorder

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// MaxWeight is the largest weight a namespace may have.
const MaxWeight = 1000

// Shares are the namespaces' weights: Of(ns) is from 1 to MaxWeight.
// Version changes whenever a weight does.
type Shares interface {
	Of(ns string) int
	Version() uint64
}

// Weights are the namespaces' shares of turns, by namespace: while both have
// work, a namespace of weight 4 gets four turns for each turn of one of
// weight 1. A namespace not listed has weight 1. As a flag.Value its form is
// "team-a=4,team-b=2".
type Weights map[string]int

// Of is the weight of namespace ns.
func (w Weights) Of(ns string) int {
	if n, ok := w[ns]; ok {
		return n
	}
	return 1
}

// Version is 0: the weights of a flag never change.
func (Weights) Version() uint64 { return 0 }

// String is the flag form, namespaces in order.
func (w Weights) String() string {
	parts := make([]string, 0, len(w))
	for _, ns := range slices.Sorted(maps.Keys(w)) {
		parts = append(parts, ns+"="+strconv.Itoa(w[ns]))
	}
	return strings.Join(parts, ",")
}

// Set parses the flag form, replacing what w held; every malformed entry is
// reported.
func (w *Weights) Set(s string) error {
	parsed := Weights{}
	var errs []error
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		ns, value, ok := strings.Cut(entry, "=")
		if !ok {
			errs = append(errs, fmt.Errorf("%q: want namespace=weight", entry))
			continue
		}
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%q: namespace %q: %s", entry, ns, strings.Join(msgs, "; ")))
		}
		n, err := ParseWeight(value)
		if err != nil {
			errs = append(errs, fmt.Errorf("%q: %w", entry, err))
		}
		if _, dup := parsed[ns]; dup {
			errs = append(errs, fmt.Errorf("%q: namespace %s given twice", entry, ns))
		}
		parsed[ns] = n
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	*w = parsed
	return nil
}

// ParseWeight reads a weight: an integer from 1 to MaxWeight.
func ParseWeight(value string) (int, error) {
	n, err := strconv.Atoi(value)
	if err != nil || n < 1 || n > MaxWeight {
		return 0, fmt.Errorf("weight must be an integer from 1 to %d, not %q", MaxWeight, value)
	}
	return n, nil
}
