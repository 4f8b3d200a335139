// Package podwire is the contract's pod (jobplane.v1.Pod) in the protobuf
// wire format, both ways, without the generated messages in between: the
// executor writes its Kubernetes pods straight into a request (AppendPod),
// the planner reads a request's pods straight into Kubernetes pods
// (Decoder). The pods are most of a request, and building each pod twice
// (message, then encoding; decoding, then corev1.Pod) was most of the cost
// of a sync at scale.
//
// Both are exactly the generated path's: AppendPod writes the bytes of
// kubeconv.PodFromKube's message under protobuf-go's deterministic
// marshaling; a pod decodes to what vtprotobuf's decoder (with the codec's
// UTF-8 check) and kubeconv.KubePodConverter with SkipContainers give. The
// decoder's fast path takes the encoding the encoders write (each field
// known, each singular message at most once, valid UTF-8); anything else is
// decoded by that slow path, errors included. The field numbers are
// fields.go's, held to the contract's descriptors.
package podwire
