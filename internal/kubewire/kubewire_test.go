package kubewire

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// fullPod is a Pod as a kubelet leaves it, with every field Keep lists
// set and many it does not.
func fullPod() *corev1.Pod {
	yes := true
	now := metav1.Now()
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-5d4f8b7c9-x2x7k", Namespace: "prod", UID: "4f9c2a1e-0000-4000-8000-000000000001", ResourceVersion: "81234",
			GenerateName: "web-5d4f8b7c9-", Labels: map[string]string{"app": "web", corev1.LabelTopologyZone: "a"},
			Annotations:       map[string]string{"kubectl.kubernetes.io/restartedAt": "now", metav1.InitialEventsAnnotationKey: "true"},
			CreationTimestamp: now, Finalizers: []string{"example.com/f"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d4f8b7c9", UID: "u", Controller: &yes}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{}}`)}}},
		},
		Spec: corev1.PodSpec{
			NodeName: "node-0042", Hostname: "web", Subdomain: "sub", ServiceAccountName: "default",
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}}}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, HostIP: "192.0.2.42", PodIP: "10.244.1.7",
			PodIPs:     []corev1.PodIP{{IP: "10.244.1.7"}, {IP: "fd00:10:244::7"}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		},
	}
}

// kept is what Pod and Node keep of obj (Keep).
func kept(obj runtime.Object) runtime.Object {
	meta := func(m metav1.ObjectMeta, label string) metav1.ObjectMeta {
		out := metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion}
		if v, ok := m.Annotations[metav1.InitialEventsAnnotationKey]; ok {
			out.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: v}
		}
		if v, ok := m.Labels[label]; ok && label != "" {
			out.Labels = map[string]string{label: v}
		}
		return out
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		return &corev1.Pod{ObjectMeta: meta(o.ObjectMeta, ""), Spec: corev1.PodSpec{NodeName: o.Spec.NodeName},
			Status: corev1.PodStatus{Phase: o.Status.Phase, PodIP: o.Status.PodIP, PodIPs: o.Status.PodIPs}}
	case *corev1.Node:
		return &corev1.Node{ObjectMeta: meta(o.ObjectMeta, corev1.LabelTopologyZone)}
	}
	return obj
}

// encode is obj as the API server sends it in protobuf.
func encode(t testing.TB, obj runtime.Object) []byte {
	t.Helper()
	obj = obj.DeepCopyObject()
	gvks, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil {
		t.Fatal(err)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvks[0])
	var b bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(obj, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func decoders(t testing.TB) (slim, full runtime.Decoder) {
	t.Helper()
	gen := rest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion()
	var err error
	if slim, err = runtime.NewClientNegotiator(Serializer(gen), corev1.SchemeGroupVersion).Decoder(runtime.ContentTypeProtobuf, nil); err != nil {
		t.Fatal(err)
	}
	if full, err = runtime.NewClientNegotiator(gen, corev1.SchemeGroupVersion).Decoder(runtime.ContentTypeProtobuf, nil); err != nil {
		t.Fatal(err)
	}
	return slim, full
}

func TestDecode(t *testing.T) {
	bare := fullPod()
	bare.Namespace, bare.Annotations, bare.Status = "", nil, corev1.PodStatus{PodIP: "10.244.1.8", Phase: "Custom"}
	done := fullPod()
	done.Status.Phase, done.Status.PodIPs = corev1.PodSucceeded, nil
	bookmark := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "9", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-0042", UID: "n1", ResourceVersion: "77",
			Labels: map[string]string{corev1.LabelTopologyZone: "zone-b", corev1.LabelHostname: "node-0042"}},
		Spec:   corev1.NodeSpec{PodCIDR: "10.244.42.0/24"},
		Status: corev1.NodeStatus{Images: []corev1.ContainerImage{{Names: []string{"registry.k8s.io/pause:3.10"}, SizeBytes: 1}}},
	}
	unzoned := node.DeepCopy()
	unzoned.Labels = map[string]string{"other": "x"}
	tests := []struct {
		name string
		obj  runtime.Object
		slim bool // decoded to Keep's fields
	}{
		{"running pod, dual-stack", fullPod(), true},
		{"pod without namespace or podIPs, a phase of its own", bare, true},
		{"succeeded pod", done, true},
		{"bookmark", bookmark, true},
		{"empty pod", &corev1.Pod{}, true},
		{"node", node, true},
		{"node without a zone", unzoned, true},
		{"service", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10"}}, false},
		{"status", &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired}, false},
		{"endpoint slice", &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "web-x", Namespace: "prod"}, AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.1.7"}}}}, false},
	}
	slim, full := decoders(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := encode(t, tc.obj)
			got, err := runtime.Decode(slim, data)
			if err != nil {
				t.Fatal(err)
			}
			all, err := runtime.Decode(full, data)
			if err != nil {
				t.Fatal(err)
			}
			want := all
			if tc.slim {
				want = kept(all)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("decoded:\n%#v\nwant:\n%#v", got, want)
			}
		})
	}
}

// TestDecodeInto leaves a decode into an object (a Get, a List) to
// client-go's decoder.
func TestDecodeInto(t *testing.T) {
	slim, _ := decoders(t)
	into := &corev1.Pod{}
	if _, _, err := slim.Decode(encode(t, fullPod()), nil, into); err != nil {
		t.Fatal(err)
	}
	if into.Spec.Hostname != "web" || len(into.ObjectMeta.ManagedFields) != 1 {
		t.Errorf("decode into a Pod dropped fields: %+v", into)
	}
	list := &corev1.PodList{}
	if _, _, err := slim.Decode(encode(t, &corev1.PodList{Items: []corev1.Pod{*fullPod()}}), nil, list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Spec.Hostname != "web" {
		t.Errorf("list decoded as %+v", list.Items)
	}
}

func TestDecodeErrors(t *testing.T) {
	pod := encode(t, fullPod())
	raw := pod[len(protoPrefix):]
	tests := []struct {
		name string
		raw  []byte
		want string
	}{
		{"cut in the status", raw[:len(raw)-3], "pod: "},
		{"a tag that does not end", []byte{0x80}, "pod: "},
		{"metadata cut", []byte{0x0a, 0x03, 0x0a, 0x09, 'a'}, "pod: metadata: field 1"},
		{"podIPs entry cut", []byte{0x1a, 0x04, 0x62, 0x02, 0x0a, 0x05}, "pod: status: podIPs[0]: field 1"},
		{"annotation entry cut", []byte{0x0a, 0x04, 0x62, 0x02, 0x0a, 0x05}, "pod: metadata: annotations: field 1"},
	}
	slim, _ := decoders(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Pod(tc.raw); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("Pod() error = %v, want one starting %q", err, tc.want)
			}
			// In its envelope, through the client's decoder.
			if _, err := runtime.Decode(slim, envelope(t, "Pod", tc.raw)); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("runtime.Decode() error = %v, want one starting %q", err, tc.want)
			}
		})
	}
	if _, err := Node([]byte{0x0a, 0x03, 0x5a, 0x09, 'x'}); err == nil || !strings.HasPrefix(err.Error(), "node: metadata: ") {
		t.Errorf("Node() error = %v", err)
	}
}

// envelope is raw in a runtime.Unknown of kind, as the API server sends
// it.
func envelope(t *testing.T, kind string, raw []byte) []byte {
	t.Helper()
	unk := &runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: kind}, Raw: raw}
	b, err := unk.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return append(append([]byte(nil), protoPrefix...), b...)
}

// TestWatch runs a typed client's watch of Pods and Nodes against an HTTP
// server that streams protobuf watch events, and checks that each object
// keeps its fields after the later frames reuse the buffer.
func TestWatch(t *testing.T) {
	pods := []*corev1.Pod{fullPod(), fullPod(), fullPod()}
	pods[1].Name, pods[1].Status.PodIPs = "second", []corev1.PodIP{{IP: "10.244.9.9"}}
	pods[2].Name, pods[2].Spec.NodeName = "third-with-a-longer-name-than-the-others", "node-7"
	status := &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old"}
	stream := []struct {
		typ string
		obj runtime.Object
	}{{"ADDED", pods[0]}, {"MODIFIED", pods[1]}, {"DELETED", pods[2]}, {"ERROR", status}}
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.Path)
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf;stream=watch")
		fw := protobuf.LengthDelimitedFramer.NewFrameWriter(w)
		raw := protobuf.NewRawSerializer(scheme.Scheme, scheme.Scheme)
		for _, e := range stream {
			var b bytes.Buffer
			if err := raw.Encode(&metav1.WatchEvent{Type: e.typ, Object: runtime.RawExtension{Raw: encode(t, e.obj)}}, &b); err != nil {
				t.Error(err)
				return
			}
			if _, err := fw.Write(b.Bytes()); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	c, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL + "/behind/a/proxy"})
	if err != nil {
		t.Fatal(err)
	}
	core, err := CoreV1(c)
	if err != nil {
		t.Fatal(err)
	}
	w, err := core.Pods("").Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var got []runtime.Object
	for e := range w.ResultChan() {
		if string(e.Type) != stream[len(got)].typ {
			t.Errorf("event %d: type %s, want %s", len(got), e.Type, stream[len(got)].typ)
		}
		got = append(got, e.Object)
		if len(got) == len(stream) {
			break
		}
	}
	if len(got) != len(stream) {
		t.Fatalf("got %d events, want %d", len(got), len(stream))
	}
	for i, e := range stream {
		want := kept(e.obj)
		if i == 3 {
			want = &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old"}
		}
		if !reflect.DeepEqual(got[i], want) {
			t.Errorf("event %d after the stream:\n%#v\nwant:\n%#v", i, got[i], want)
		}
	}
	if len(paths) == 0 || paths[0] != "/behind/a/proxy/api/v1/pods" {
		t.Errorf("requests went to %q, want /behind/a/proxy/api/v1/pods", paths)
	}
}

// TestFakeClient keeps a fake clientset's own clients.
func TestFakeClient(t *testing.T) {
	c := fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{Hostname: "h"}})
	core, err := CoreV1(c)
	if err != nil {
		t.Fatal(err)
	}
	p, err := core.Pods("ns").Get(context.Background(), "p", metav1.GetOptions{})
	if err != nil || p.Spec.Hostname != "h" {
		t.Errorf("Get = %+v, %v", p, err)
	}
	if _, err := DiscoveryV1(c); err != nil {
		t.Error(err)
	}
}

func FuzzPod(f *testing.F) {
	f.Add(encode(f, fullPod())[len(protoPrefix):])
	f.Add([]byte{0x1a, 0x04, 0x62, 0x02, 0x0a, 0x05})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Pod(b)
		if (p == nil) == (err == nil) {
			t.Fatalf("Pod() = %v, %v: want one of them", p, err)
		}
		if _, err := Node(b); err != nil && !strings.HasPrefix(err.Error(), "node: ") {
			t.Fatalf("Node() error %q does not name the kind", err)
		}
	})
}

// BenchmarkDecodePod decodes a watch event's Pod (fullPod) as client-go
// does and as the cluster feed's client does:
//
//	go test -run '^$' -bench BenchmarkDecodePod -benchmem ./internal/kubewire/
func BenchmarkDecodePod(b *testing.B) {
	slim, full := decoders(b)
	data := encode(b, fullPod())
	for _, bc := range []struct {
		name string
		dec  runtime.Decoder
	}{{"client-go", full}, {"kubewire", slim}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := runtime.Decode(bc.dec, data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
