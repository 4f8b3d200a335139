package apierr

import (
	"strconv"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxLabelSelectorLength bounds a label selector a caller sends. Every
// requirement is matched against every object listed, and a selector the
// API server takes travels in a URL; this is far beyond any a person
// writes.
const MaxLabelSelectorLength = 16 << 10

// LabelSelector parses a caller's label selector: violations at path for
// one too long or malformed.
func LabelSelector(path *field.Path, selector string) (labels.Selector, field.ErrorList) {
	if len(selector) > MaxLabelSelectorLength {
		return nil, field.ErrorList{field.TooLong(path, "", MaxLabelSelectorLength)}
	}
	parsed, err := labels.Parse(selector)
	if err != nil {
		return nil, field.ErrorList{field.Invalid(path, selector, err.Error())}
	}
	return parsed, nil
}

// ResourceVersion checks a resourceVersion a caller resumes a watch from:
// empty, or the decimal the API server's storage writes (which it answers
// otherwise with a 422 naming its own field).
func ResourceVersion(path *field.Path, rv string) field.ErrorList {
	if rv == "" {
		return nil
	}
	if _, err := strconv.ParseUint(rv, 10, 64); err != nil {
		return field.ErrorList{field.Invalid(path, rv, "must be a resourceVersion this API answered (a decimal number), or empty")}
	}
	return nil
}
