package svc

import "math"

// noByteBound is a store's bound of memory that never binds.
const noByteBound = math.MaxInt64

// heldPods is the pods the store holds, plus one per Job.
func (st *snapshotStore) heldPods() int { return st.heldWeight().pods }
