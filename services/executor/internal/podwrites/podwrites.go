// Package podwrites is the executor's client for writing pods: the API
// server answers every creation and patch with the whole pod, which the
// executor reads only the metadata of (its name for the event, its
// resourceVersion and controller for the cache's expectations). Decoding
// the rest cost about as much as the request's own encoding.
package podwrites

import (
	"context"
	"fmt"
	"net/url"
	"reflect"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
)

// NewClient is a core/v1 client of cfg whose pods, as answered in
// protobuf, carry their metadata only: name, namespace, uid,
// resourceVersion and owner references. Everything else it answers is
// decoded whole. Its pods' creations and patches encode options left unset
// as no parameters at once.
func NewClient(cfg *rest.Config) (corev1client.PodsGetter, error) {
	c := rest.CopyConfig(cfg)
	gv := corev1.SchemeGroupVersion
	c.GroupVersion = &gv
	c.APIPath = "/api"
	c.NegotiatedSerializer = newMetadataOfPods(scheme.Codecs.WithoutConversion())
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, err
	}
	return podsGetter{corev1client.New(rc), rc}, nil
}

// podsGetter's pods are client-go's, but for their creations and patches,
// whose options are encoded by unsetOptions.
type podsGetter struct {
	corev1client.PodsGetter
	rc rest.Interface
}

func (g podsGetter) Pods(namespace string) corev1client.PodInterface {
	return pods{
		PodInterface: g.PodsGetter.Pods(namespace),
		writes: gentype.NewClient[*corev1.Pod]("pods", g.rc, unsetOptions{scheme.ParameterCodec}, namespace,
			func() *corev1.Pod { return &corev1.Pod{} }, gentype.PrefersProtobuf[*corev1.Pod]()),
	}
}

type pods struct {
	corev1client.PodInterface
	writes *gentype.Client[*corev1.Pod]
}

func (p pods) Create(ctx context.Context, pod *corev1.Pod, opts metav1.CreateOptions) (*corev1.Pod, error) {
	return p.writes.Create(ctx, pod, opts)
}

func (p pods) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Pod, error) {
	return p.writes.Patch(ctx, name, pt, data, opts, subresources...)
}

// unsetOptions encodes options left at their zero value as no parameters,
// as client-go's parameter codec does, but without converting them and
// walking their fields by reflection (a tenth of a pod write's own CPU,
// profiled).
type unsetOptions struct{ runtime.ParameterCodec }

func (c unsetOptions) EncodeParameters(obj runtime.Object, to schema.GroupVersion) (url.Values, error) {
	if v := reflect.ValueOf(obj); v.Kind() == reflect.Pointer && !v.IsNil() && v.Elem().IsZero() {
		return url.Values{}, nil
	}
	return c.ParameterCodec.EncodeParameters(obj, to)
}

// metadataOfPods is a NegotiatedSerializer whose protobuf decoder decodes
// a pod's metadata only.
type metadataOfPods struct {
	runtime.NegotiatedSerializer
	infos []runtime.SerializerInfo // built once: the client asks at every answer
}

func newMetadataOfPods(ns runtime.NegotiatedSerializer) metadataOfPods {
	infos := slices.Clone(ns.SupportedMediaTypes())
	for i, info := range infos {
		if info.MediaType == runtime.ContentTypeProtobuf {
			infos[i].Serializer = podMetadataDecoder{info.Serializer}
		}
	}
	return metadataOfPods{ns, infos}
}

func (m metadataOfPods) SupportedMediaTypes() []runtime.SerializerInfo { return m.infos }

// podMetadataDecoder decodes into a *corev1.Pod the pod's metadata only;
// anything else (a Status, JSON) as its Serializer does.
type podMetadataDecoder struct{ runtime.Serializer }

// protobufMagic starts every protobuf body of the API server: an envelope
// (runtime.Unknown) follows.
var protobufMagic = []byte{0x6b, 0x38, 0x73, 0x00}

func (d podMetadataDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	pod, ok := into.(*corev1.Pod)
	if !ok || len(data) < len(protobufMagic) || string(data[:len(protobufMagic)]) != string(protobufMagic) {
		return d.Serializer.Decode(data, defaults, into)
	}
	raw, isPod, err := podOf(data[len(protobufMagic):])
	if err != nil {
		return nil, nil, err
	}
	if !isPod {
		return d.Serializer.Decode(data, defaults, into)
	}
	meta, err := metadataOf(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("decoding a pod's metadata: %w", err)
	}
	*pod = corev1.Pod{}
	if err := pod.ObjectMeta.Unmarshal(meta); err != nil {
		return nil, nil, fmt.Errorf("decoding a pod's metadata: %w", err)
	}
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	return pod, &gvk, nil
}

// podOf reads the envelope b (runtime.Unknown: typeMeta 1, raw 2,
// contentEncoding 3) without copying: the raw pod, if it holds one
// unencoded.
func podOf(b []byte) (raw []byte, isPod bool, err error) {
	var v1, pod, encoded bool
	err = eachField(b, func(num protowire.Number, typ protowire.Type, v, _ []byte) error {
		switch {
		case typ != protowire.BytesType:
		case num == 1:
			return eachField(v, func(num protowire.Number, typ protowire.Type, v, _ []byte) error {
				switch {
				case typ == protowire.BytesType && num == 1:
					v1 = string(v) == "v1"
				case typ == protowire.BytesType && num == 2:
					pod = string(v) == "Pod"
				}
				return nil
			})
		case num == 2:
			raw = v
		case num == 3:
			encoded = len(v) > 0
		}
		return nil
	})
	return raw, err == nil && v1 && pod && !encoded, err
}

// Pod's field 1 is its ObjectMeta; of that, the fields kept: name (1),
// namespace (3), uid (5), resourceVersion (6) and ownerReferences (13).
const podMetadata = 1

var keptMetadata = [...]bool{1: true, 3: true, 5: true, 6: true, 13: true}

// metadataOf is the encoded ObjectMeta of the encoded pod b with the kept
// fields only.
func metadataOf(b []byte) ([]byte, error) {
	meta := make([]byte, 0, 256)
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v, _ []byte) error {
		if num != podMetadata || typ != protowire.BytesType {
			return nil
		}
		// A repeated message merges, as a decoder would: the kept fields
		// of each, in order.
		return eachField(v, func(num protowire.Number, _ protowire.Type, _, field []byte) error {
			if int(num) < len(keptMetadata) && keptMetadata[num] {
				meta = append(meta, field...)
			}
			return nil
		})
	})
	return meta, err
}

// eachField calls f with each field of the encoded message b: its number,
// wire type, value (the bytes of a length-delimited one) and the whole
// field as encoded, tag and all.
func eachField(b []byte, f func(num protowire.Number, typ protowire.Type, v, field []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return protowire.ParseError(m)
		}
		v := b[n : n+m]
		if typ == protowire.BytesType {
			v, _ = protowire.ConsumeBytes(v)
		}
		if err := f(num, typ, v, b[:n+m]); err != nil {
			return err
		}
		b = b[n+m:]
	}
	return nil
}
