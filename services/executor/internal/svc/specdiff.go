package svc

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
)

// specDiff lists the Kubernetes JSON paths ("spec.template.spec.containers[0].image")
// at which two Job specs differ, in order; none when they are equal. It
// compares the specs' JSON, as the API server stores them: no library gives
// the paths of a difference in that form.
func specDiff(a, b batchv1.JobSpec) []string {
	var ja, jb any
	if err := roundTrip(a, &ja); err != nil {
		return []string{"spec"}
	}
	if err := roundTrip(b, &jb); err != nil {
		return []string{"spec"}
	}
	var paths []string
	diffJSON("spec", ja, jb, &paths)
	return paths
}

func roundTrip(v any, out *any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, out)
}

// diffJSON appends the paths under path at which a and b differ. An absent
// object counts as an empty one, so that a label added to no labels is
// named by its key.
func diffJSON(path string, a, b any, out *[]string) {
	am, aObject := a.(map[string]any)
	bm, bObject := b.(map[string]any)
	if (aObject || a == nil) && (bObject || b == nil) && (aObject || bObject) {
		keys := slices.Collect(maps.Keys(am))
		for k := range bm {
			if _, ok := am[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			diffJSON(path+"."+k, am[k], bm[k], out)
		}
		return
	}
	al, aList := a.([]any)
	bl, bList := b.([]any)
	if aList && bList && len(al) == len(bl) {
		for i := range al {
			diffJSON(fmt.Sprintf("%s[%d]", path, i), al[i], bl[i], out)
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		*out = append(*out, path)
	}
}
