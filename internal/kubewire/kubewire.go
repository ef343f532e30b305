// Package kubewire decodes the API server's protobuf Pods and Nodes to
// the few fields the cluster DNS reads, and a watch event's object in
// place.
//
// client-go decodes a watch event in three copies: the event's object
// bytes, the runtime.Unknown around them, then the whole typed object. A
// Pod as a kubelet leaves it decodes to 4.6 KB in 56 allocations, of
// which the DNS keeps a name, a node and an address. At 150,000 Pods a
// relist after an API server restart allocated 2-3 GB (a heap profile of
// TestScale's relist: 95 % of it in decoding), and the collector kept
// pace only by running every 150 ms near the memory limit (issue 71).
//
// Here a watch event's object is read from the stream's frame, and a Pod
// or a Node is decoded to a *corev1.Pod or *corev1.Node holding only
// what Keep lists: 1.8 KB in 14 allocations for that Pod, of which the
// corev1.Pod struct is 1.2 KB (BenchmarkDecodePod). Every other kind, a
// decode into an object (a Get, a List), and JSON decode as client-go
// decodes them. The typed clients of CoreV1 and DiscoveryV1 work on top,
// so a reflector sees the types it expects.
package kubewire

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	discoveryv1client "k8s.io/client-go/kubernetes/typed/discovery/v1"
	"k8s.io/client-go/rest"
)

// Keep is what a decoded Pod or Node holds; every other field is left
// zero. The metadata's annotations hold metav1.InitialEventsAnnotationKey
// alone (a reflector reads it on the bookmark that ends a streamed list),
// and a Node's labels corev1.LabelTopologyZone alone.
const Keep = "Pod: metadata.name, namespace, uid, resourceVersion, spec.nodeName, status.phase, status.podIP, status.podIPs; " +
	"Node: metadata.name, uid, resourceVersion, the topology zone label"

// CoreV1 is c's core/v1 client, with Pods and Nodes decoded as Keep says;
// c's own when it has no REST client of its own (a fake clientset).
func CoreV1(c kubernetes.Interface) (corev1client.CoreV1Interface, error) {
	rc, err := derive(c.CoreV1().RESTClient(), "/api", corev1.SchemeGroupVersion)
	if err != nil || rc == nil {
		return c.CoreV1(), err
	}
	return corev1client.New(rc), nil
}

// DiscoveryV1 is c's discovery/v1 client, whose watch events are read in
// place; c's own when it has no REST client of its own.
func DiscoveryV1(c kubernetes.Interface) (discoveryv1client.DiscoveryV1Interface, error) {
	rc, err := derive(c.DiscoveryV1().RESTClient(), "/apis", schema.GroupVersion{Group: "discovery.k8s.io", Version: "v1"})
	if err != nil || rc == nil {
		return c.DiscoveryV1(), err
	}
	return discoveryv1client.New(rc), nil
}

// derive is a REST client for gv at the API server of from, with its HTTP
// client and rate limiter, that decodes through Serializer; nil when from
// is not a *rest.RESTClient.
func derive(from rest.Interface, apiPath string, gv schema.GroupVersion) (*rest.RESTClient, error) {
	rc, ok := from.(*rest.RESTClient)
	if !ok || rc == nil {
		return nil, nil
	}
	versioned := apiPath + "/" + gv.String()
	base := rc.Get().URL() // the server, any path before it, and versioned
	base.Path = strings.TrimSuffix(base.Path, versioned)
	gen := rest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion()
	out, err := rest.NewRESTClient(base, versioned, rest.ClientContentConfig{
		AcceptContentTypes: runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON,
		ContentType:        runtime.ContentTypeProtobuf,
		GroupVersion:       gv,
		Negotiator:         runtime.NewClientNegotiator(Serializer(gen), gv),
	}, rc.GetRateLimiter(), rc.Client)
	if err != nil {
		return nil, fmt.Errorf("%s client: %w", gv, err)
	}
	return out, nil
}

// Serializer is base with its protobuf decoders replaced: a watch event's
// object is read in place from the frame, and a Pod or a Node decodes as
// Keep says. Encoding and the other media types are base's.
func Serializer(base runtime.NegotiatedSerializer) runtime.NegotiatedSerializer {
	infos := slices.Clone(base.SupportedMediaTypes())
	for i, in := range infos {
		if in.MediaType != runtime.ContentTypeProtobuf {
			continue
		}
		in.Serializer = objects{Serializer: in.Serializer, full: in.Serializer}
		if in.StreamSerializer != nil {
			s := *in.StreamSerializer
			s.Serializer = events{s.Serializer}
			in.StreamSerializer = &s
		}
		infos[i] = in
	}
	return negotiated{base, infos}
}

type negotiated struct {
	runtime.NegotiatedSerializer
	infos []runtime.SerializerInfo
}

func (n negotiated) SupportedMediaTypes() []runtime.SerializerInfo { return n.infos }

// DecoderToVersion keeps the slim decoding of objects in front of base's
// decoder to gv.
func (n negotiated) DecoderToVersion(d runtime.Decoder, gv runtime.GroupVersioner) runtime.Decoder {
	if o, ok := d.(objects); ok {
		o.full = n.NegotiatedSerializer.DecoderToVersion(o.Serializer, gv)
		return o
	}
	return n.NegotiatedSerializer.DecoderToVersion(d, gv)
}

// protoPrefix starts every protobuf object the API server sends (the
// "k8s\x00" of apimachinery's protobuf serializer).
var protoPrefix = []byte("k8s\x00")

var (
	podKind  = corev1.SchemeGroupVersion.WithKind("Pod")
	nodeKind = corev1.SchemeGroupVersion.WithKind("Node")
)

// objects decodes a protobuf Pod or Node alone (into nil, as a watch
// event's object is decoded) as Keep says, and everything else with full.
type objects struct {
	runtime.Serializer                 // encodes, and names the serializer
	full               runtime.Decoder // decodes the rest
}

func (o objects) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if into != nil || !bytes.HasPrefix(data, protoPrefix) {
		return o.full.Decode(data, defaults, into)
	}
	var apiVersion, kind, raw []byte
	plain := true // no content encoding or type of its own
	err := fields(data[len(protoPrefix):], func(num protowire.Number, v []byte) error {
		switch num {
		case 1:
			return fields(v, func(num protowire.Number, v []byte) error {
				switch num {
				case 1:
					apiVersion = v
				case 2:
					kind = v
				}
				return nil
			})
		case 2:
			raw = v
		case 3, 4:
			plain = plain && len(v) == 0
		}
		return nil
	})
	if err != nil || !plain || string(apiVersion) != "v1" {
		return o.full.Decode(data, defaults, into)
	}
	switch string(kind) {
	case podKind.Kind:
		p, err := Pod(raw)
		if err != nil {
			return nil, nil, err
		}
		return p, &podKind, nil
	case nodeKind.Kind:
		n, err := Node(raw)
		if err != nil {
			return nil, nil, err
		}
		return n, &nodeKind, nil
	}
	return o.full.Decode(data, defaults, into)
}

// events decodes a metav1.WatchEvent frame leaving its object's bytes in
// the frame: client-go's watch decoder decodes them before it reads the
// next frame into the same buffer, and every decoder copies what it
// keeps.
type events struct{ runtime.Serializer }

var watchEventKind = metav1.SchemeGroupVersion.WithKind("WatchEvent")

func (e events) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	ev, ok := into.(*metav1.WatchEvent)
	if !ok {
		return e.Serializer.Decode(data, defaults, into)
	}
	*ev = metav1.WatchEvent{}
	err := fields(data, func(num protowire.Number, v []byte) error {
		switch num {
		case 1:
			ev.Type = constant(v, "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR")
		case 2:
			raw, err := field(v, 1) // RawExtension.raw
			ev.Object.Raw = raw
			return err
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("watch event: %w", err)
	}
	return ev, &watchEventKind, nil
}

// constant is v as a T: the one of known it equals, without an
// allocation, else a copy.
func constant[T ~string](v []byte, known ...T) T {
	for _, k := range known {
		if string(v) == string(k) {
			return k
		}
	}
	return T(v)
}

// field is the last length-delimited field num of the protobuf message
// b, as a decoder reads a repeated scalar's last value; nil when b has
// none.
func field(b []byte, num protowire.Number) ([]byte, error) {
	var v []byte
	err := fields(b, func(n protowire.Number, x []byte) error {
		if n == num {
			v = x
		}
		return nil
	})
	return v, err
}

// fields calls f with the number and the bytes of each length-delimited
// field of the protobuf message b (a string, bytes, a message or a map
// entry), and skips the others.
func fields(b []byte, f func(num protowire.Number, v []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := f(num, v); err != nil {
			return err
		}
	}
	return nil
}
