package engine

import (
	"strconv"
	"strings"
)

// interval is a closed range of completion indexes.
type interval struct {
	First int
	Last  int
}

// orderedIntervals is a sorted list of disjoint, non-adjacent intervals: the
// form of status.completedIndexes and status.failedIndexes ("1,3-5,7").
type orderedIntervals []interval

// parseIndexes reads an interval string, dropping indexes at or beyond
// completions and skipping malformed parts, as the reference does.
func parseIndexes(s string, completions int) orderedIntervals {
	if s == "" {
		return nil
	}
	var result orderedIntervals
	for part := range strings.SplitSeq(s, ",") {
		limits := strings.Split(part, "-")
		var iv interval
		var err error
		if iv.First, err = strconv.Atoi(limits[0]); err != nil {
			continue
		}
		if iv.First >= completions {
			break
		}
		if len(limits) > 1 {
			if iv.Last, err = strconv.Atoi(limits[1]); err != nil {
				continue
			}
			if iv.Last >= completions {
				iv.Last = completions - 1
			}
		} else {
			iv.Last = iv.First
		}
		if iv.Last < iv.First {
			continue // reversed ("9-0"), which the API server refuses
		}
		if n := len(result); n > 0 && result[n-1].Last == iv.First-1 {
			result[n-1].Last = iv.Last
		} else {
			result = append(result, iv)
		}
	}
	return result
}

// withOrderedIndexes returns the intervals with indexes (increasing) added.
func (oi orderedIntervals) withOrderedIndexes(indexes []int) orderedIntervals {
	add := make(orderedIntervals, len(indexes))
	for i, ix := range indexes {
		add[i] = interval{ix, ix}
	}
	return oi.merge(add)
}

// merge returns the union of two lists of ordered intervals.
func (oi orderedIntervals) merge(other orderedIntervals) orderedIntervals {
	var result orderedIntervals
	appendOrExtend := func(iv interval) {
		n := len(result)
		if n == 0 || iv.First > result[n-1].Last+1 {
			result = append(result, iv)
		} else if result[n-1].Last < iv.Last {
			result[n-1].Last = iv.Last
		}
	}
	i, j := 0, 0
	for i < len(oi) && j < len(other) {
		if oi[i].First < other[j].First {
			appendOrExtend(oi[i])
			i++
		} else {
			appendOrExtend(other[j])
			j++
		}
	}
	for ; i < len(oi); i++ {
		appendOrExtend(oi[i])
	}
	for ; j < len(other); j++ {
		appendOrExtend(other[j])
	}
	return result
}

// total is the number of indexes in the intervals.
func (oi orderedIntervals) total() int {
	n := 0
	for _, iv := range oi {
		n += iv.Last - iv.First + 1
	}
	return n
}

// has says whether ix is in the intervals; nil has nothing.
func (oi *orderedIntervals) has(ix int) bool {
	if oi == nil {
		return false
	}
	list := *oi
	lo, hi := 0, len(list)
	for hi > lo {
		mid := lo + (hi-lo)/2
		if list[mid].Last >= ix {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return hi < len(list) && list[hi].First <= ix
}

// String renders the intervals as the API does: "1,3-5,7"; two adjacent
// indexes are written "3,4".
func (oi orderedIntervals) String() string {
	var b strings.Builder
	for _, iv := range oi {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(iv.First))
		if iv.Last > iv.First {
			if iv.Last == iv.First+1 {
				b.WriteByte(',')
			} else {
				b.WriteByte('-')
			}
			b.WriteString(strconv.Itoa(iv.Last))
		}
	}
	return b.String()
}
