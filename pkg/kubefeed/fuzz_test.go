package kubefeed

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/kubewire"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// The test's own name rules (an oracle apart from the API server's code
// that convert.go calls): RFC 1123 labels, lowercase, of 1-63 bytes.
var (
	labelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	// A snapshot name's label: letters, digits, '_' (SRV owners) and '-'
	// (first or last too: the dashed IPv6 "fd00--", "--1").
	nameLabelRE = regexp.MustCompile(`^[-a-z0-9_]+$`)
)

func isLabel(s string) bool { return len(s) <= 63 && labelRE.MatchString(s) }

// isHostname is a DNS-1123 subdomain whose labels DNS can carry (63 bytes
// each), without the trailing dot.
func isHostname(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if !isLabel(l) {
			return false
		}
	}
	return true
}

// checkSnapshotNames fails unless every name of snap, and every name its
// records point at, is one a DNS message can carry: lowercase labels of
// 1-63 bytes, at most 254 bytes with the trailing dot.
func checkSnapshotNames(t *testing.T, snap *store.Snapshot) {
	t.Helper()
	valid := func(name string) bool {
		if len(name) > 254 || !strings.HasSuffix(name, ".") {
			return false
		}
		for _, l := range strings.Split(strings.TrimSuffix(name, "."), ".") {
			if len(l) > 63 || !nameLabelRE.MatchString(l) {
				return false
			}
		}
		return true
	}
	snap.Names(func(name string, n *store.Node) {
		if !valid(name) {
			t.Fatalf("snapshot holds the name %q", name)
		}
		targets := slices.Clone(n.PTR())
		if n.CNAME() != "" {
			targets = append(targets, n.CNAME())
		}
		for _, s := range n.SRV() {
			targets = append(targets, s.Target)
		}
		for _, tg := range targets {
			if !valid(tg) {
				t.Fatalf("%s points at %q", name, tg)
			}
		}
	})
}

// checkError fails unless err is a lowercase message naming the object
// (kind, namespace/name) and one of want's fields.
func checkError(t *testing.T, err error, object string, fields ...string) {
	t.Helper()
	msg := err.Error()
	if msg == "" || msg[0] < 'a' || msg[0] > 'z' || !strings.HasPrefix(msg, object) {
		t.Fatalf("error %q does not start with %q", msg, object)
	}
	for _, f := range fields {
		if strings.Contains(msg, f) {
			return
		}
	}
	t.Fatalf("error %q names none of the fields %q", msg, fields)
}

// ingest is one set of tenant-controlled objects built from fuzz input.
type ingest struct {
	svc   *corev1.Service
	slice *discoveryv1.EndpointSlice
	pod   *corev1.Pod
}

// buildIngest makes a Service, one of its EndpointSlices and a Pod from
// the fuzzed fields: mode picks the Service type (bits 0-1), the slice's
// address type (2-3), the endpoint's ready condition (4-5) and the Pod's
// phase (6-7).
func buildIngest(ns, name, externalName, clusterIP, hostname, addr1, addr2, portName, proto string, port int32, mode uint8) ingest {
	meta := metav1.ObjectMeta{Name: name, Namespace: ns}
	svc := &corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{
		Ports: []corev1.ServicePort{{Name: portName, Protocol: corev1.Protocol(proto), Port: port}}}}
	switch mode & 3 {
	case 0:
		svc.Spec.ClusterIPs = []string{clusterIP}
	case 1:
		svc.Spec.ClusterIP = clusterIP
	case 2:
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	case 3:
		svc.Spec.Type, svc.Spec.ExternalName = corev1.ServiceTypeExternalName, externalName
	}
	svc.Spec.PublishNotReadyAddresses = mode&0x30 == 0x30
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name + "-abc", Namespace: ns, Labels: map[string]string{serviceNameLabel: name}},
		AddressType: []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN, "Other"}[mode>>2&3],
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Protocol: (*corev1.Protocol)(&proto), Port: &port}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{addr1, addr2},
			Conditions: discoveryv1.EndpointConditions{Ready: []*bool{nil, ptr(true), ptr(false), nil}[mode>>4&3]},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Name: hostname + "-pod", Namespace: ns}}},
	}
	if hostname != "" {
		slice.Endpoints[0].Hostname = &hostname
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: hostname + "-pod", Namespace: ns, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{NodeName: portName, Hostname: hostname}, Status: corev1.PodStatus{
			Phase:  []corev1.PodPhase{corev1.PodRunning, corev1.PodPending, corev1.PodSucceeded, ""}[mode>>6],
			PodIPs: []corev1.PodIP{{IP: addr1}, {IP: addr2}}}}
	return ingest{svc: svc, slice: slice, pod: pod}
}

// FuzzIngest converts a tenant's Service, EndpointSlice and Pod with
// arbitrary names, ExternalName target, addresses of both families,
// hostname, port name and protocol, as the informers and manifests do,
// and publishes what converts. An object is refused with an error naming
// it and the field, and an invalid name (Service, namespace, ExternalName,
// hostname, port name) or protocol is always refused, a Service name being
// a DNS-1123 label as since Kubernetes 1.36 (digits first); every name of the
// snapshot is one DNS can carry; each accepted record answers (the
// Service name with its ClusterIPs or CNAME, each served endpoint under
// its hostname, PTRs, each pod IP); and the snapshot's size is bounded by
// its input.
//
//	go test -run '^$' -fuzz '^FuzzIngest$' -fuzztime 50000x ./pkg/kubefeed/
func FuzzIngest(f *testing.F) {
	type seed struct {
		ns, name, ext, cip, host, a1, a2, pname, proto string
		port                                           int32
		mode                                           uint8
	}
	for _, s := range []seed{
		{"prod", "web", "", "10.96.0.10", "", "10.1.0.1", "10.1.0.2", "http", "TCP", 80, 0x00},
		{"prod", "1kubernetes", "", "10.96.0.1", "", "10.1.0.1", "", "https", "TCP", 443, 0x00},
		{"10-1-0-1", "10-1-0-2", "", "None", "", "10.1.0.2", "fd00::2", "", "", 80, 0x02},
		{"prod", "0", "1.example.com", "", "", "", "", "", "", 80, 0x03},
		{"prod", "db", "", "fd00::10", "db-0", "fd00::1", "fd00::2", "pg", "", 5432, 0x05},
		{"prod", "db", "", "None", "db-0", "10.1.1.1", "10.1.1.1", "", "UDP", 53, 0x12},
		{"00000000", "00000000", "", "None", "", "::", "fd00::1", "", "", 80, 0x06},
		{"prod", "hl", "", "", "web-1", "10.1.1.1", "fd00::1", "dns-tcp", "SCTP", 9000, 0x32},
		{"prod", "ext", "Example.COM.", "", "", "", "", "", "", 80, 0x03},
		{"prod", "ext", "db.prod.svc.cluster.local", "", "", "", "", "", "", 80, 0x03},
		{"prod", "ext", strings.Repeat("abcdefghi.", 30) + "com", "", "", "", "", "", "", 80, 0x03},
		{"prod", "ext", strings.Repeat("a", 70) + ".com", "", "", "", "", "", "", 80, 0x03},
		{"prod", "ext", "a..b", "", "", "", "", "", "", 80, 0x03},
		{"prod", "ext", "bad name.", "", "", "", "", "", "", 80, 0x03},
		{"prod", "hl", "", "", "a.b", "10.1.0.9", "10.1.0.8", "http", "TCP", 80, 0x02},
		{"prod", "hl", "", "", "X Y", "10.1.0.9", "::ffff:10.1.0.8", "http", "TCP", 80, 0x02},
		{"prod", "hl", "", "", strings.Repeat("h", 64), "10.1.0.9", "fe80::1%eth0", "http", "TCP", 80, 0x02},
		{"prod", "web", "", "10.96.0.1", "", "10.1.0.1", "", "Http.Alt", "tcp", 80, 0x00},
		{"prod", "web", "", "10.96.0.1", "", "10.1.0.1", "", "http", "quic.", 80, 0x00},
		{"prod", "web", "", "10.96.0.1", "", "10.1.0.1", "", "http", "TCP", 70000, 0x00},
		{"Prod", "Web", "", "10.96.0.1", "", "", "", "", "", 1, 0x00},
		{"a.b", "web.x", "", "10.96.0.1", "", "", "", "", "", 1, 0x40},
		{"", "", "", "", "", "", "", "", "", 0, 0xff},
	} {
		f.Add(s.ns, s.name, s.ext, s.cip, s.host, s.a1, s.a2, s.pname, s.proto, s.port, s.mode)
	}
	f.Fuzz(func(t *testing.T, ns, name, externalName, clusterIP, hostname, addr1, addr2, portName, proto string, port int32, mode uint8) {
		in := buildIngest(ns, name, externalName, clusterIP, hostname, addr1, addr2, portName, proto, port, mode)
		st, err := store.New(store.Options{Zone: "cluster.local", TTL: 5, Pods: store.PodsVerified, EndpointPodNames: mode&0x40 != 0})
		if err != nil {
			t.Fatal(err)
		}
		nsd := namespaceOf(&in.svc.ObjectMeta)
		validNS := isLabel(nsd)
		validProto := slices.Contains([]string{"", "tcp", "udp", "sctp"}, strings.ToLower(proto))
		validPortName := portName == "" || isLabel(portName)

		svc, svcErr := ToService(in.svc)
		if svcErr != nil {
			checkError(t, svcErr, "service", "metadata.name", "metadata.namespace", "spec.ports[0]", "spec.clusterIP", "spec.externalName")
		} else {
			st.SetService(svc)
			if !validNS || !isLabel(name) || !validProto || (mode&3 != 3 && !validPortName) {
				t.Fatalf("service %q/%q (port %q/%q) accepted", ns, name, portName, proto)
			}
			if mode&3 == 3 && !isHostname(strings.TrimSuffix(strings.ToLower(strings.TrimSpace(externalName)), ".")) {
				t.Fatalf("externalName %q accepted", externalName)
			}
		}
		slice, sliceErr := ToEndpointSlice(in.slice)
		if sliceErr != nil {
			checkError(t, sliceErr, "endpointslice", "metadata.name", "metadata.namespace", "ports[0]", "endpoints[0]")
		} else {
			st.SetEndpointSlice(slice)
			if !validNS || !validProto || !validPortName {
				t.Fatalf("endpointslice in %q (port %q/%q) accepted", ns, portName, proto)
			}
			if hostname != "" && !isLabel(hostname) && len(slice.Endpoints) > 0 {
				t.Fatalf("endpoint hostname %q accepted", hostname)
			}
		}
		pod, keep, podErr := ToPod(in.pod)
		checkSlimPod(t, in.pod, pod, keep, podErr)
		if podErr != nil {
			checkError(t, podErr, "pod", "metadata.name", "metadata.namespace", "status.podIPs")
		} else if keep {
			st.SetPod(pod)
			if !validNS {
				t.Fatalf("pod in namespace %q accepted", ns)
			}
		}
		snap := st.Publish()
		checkSnapshotNames(t, snap)
		if got := snap.Counts.Names; got > 16+6*len(in.slice.Endpoints[0].Addresses)+2*len(in.pod.Status.PodIPs)+4 {
			t.Fatalf("%d names from one Service, slice and pod", got)
		}
		if svcErr == nil {
			checkService(t, snap, svc, slice, sliceErr == nil)
		}
		if podErr == nil && keep {
			for _, ip := range pod.IPs {
				owner := store.DashedIP(ip) + "." + strings.ToLower(pod.Namespace) + ".pod.cluster.local."
				if n, ok := snap.Lookup(owner); !ok || !slices.Contains(append(slices.Clone(n.A()), n.AAAA()...), ip) {
					t.Fatalf("pod IP %s: %s has no record for it", ip, owner)
				}
			}
		}
	})
}

// checkService fails unless the accepted Service answers in snap: its
// name with its ClusterIPs (and their PTRs) or its CNAME, and each served
// endpoint of its slice (when one was accepted) under its label.
func checkService(t *testing.T, snap *store.Snapshot, svc store.Service, slice store.EndpointSlice, haveSlice bool) {
	t.Helper()
	base := svc.Name + "." + svc.Namespace + ".svc.cluster.local."
	n, ok := snap.Lookup(base)
	switch svc.Type {
	case store.ExternalName:
		if !ok || n.CNAME() != svc.ExternalName {
			t.Fatalf("%s: CNAME %+v, want %q", base, n, svc.ExternalName)
		}
		return
	case store.ClusterIP:
		if !ok {
			t.Fatalf("%s missing", base)
		}
		for _, ip := range svc.ClusterIPs {
			if !slices.Contains(append(slices.Clone(n.A()), n.AAAA()...), ip) {
				t.Fatalf("%s lacks its clusterIP %s", base, ip)
			}
			if p, ok := snap.Lookup(store.ReverseName(ip)); !ok || !slices.Contains(p.PTR(), base) {
				t.Fatalf("no PTR %s for %s", store.ReverseName(ip), base)
			}
		}
	}
	if !haveSlice {
		return
	}
	for _, ep := range slice.Endpoints {
		if !ep.Ready && !svc.PublishNotReadyAddresses {
			continue
		}
		for _, a := range ep.Addresses {
			label := store.EndpointDashedIP(a)
			if ep.Hostname != "" {
				label = ep.Hostname
			} else if snap.Options.EndpointPodNames && ep.PodName != "" && len(ep.PodName) <= 63 {
				label = ep.PodName
			}
			host := label + "." + base
			if h, ok := snap.Lookup(host); !ok || !slices.Contains(append(slices.Clone(h.A()), h.AAAA()...), a) {
				t.Fatalf("endpoint %s: %s has no record for it", a, host)
			}
		}
	}
}

// renderManifest writes objs back as a List manifest a user would apply.
func renderManifest(objs store.Objects) ([]byte, error) {
	var items []any
	for _, s := range objs.Services {
		v := corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace}}
		v.Spec.PublishNotReadyAddresses = s.PublishNotReadyAddresses
		switch s.Type {
		case store.ExternalName:
			v.Spec.Type, v.Spec.ExternalName = corev1.ServiceTypeExternalName, s.ExternalName
		case store.Headless:
			v.Spec.ClusterIP = corev1.ClusterIPNone
		default:
			for _, ip := range s.ClusterIPs {
				v.Spec.ClusterIPs = append(v.Spec.ClusterIPs, ip.String())
			}
		}
		for _, p := range s.Ports {
			v.Spec.Ports = append(v.Spec.Ports, corev1.ServicePort{Name: p.Name, Protocol: corev1.Protocol(strings.ToUpper(p.Protocol)), Port: int32(p.Port)})
		}
		items = append(items, v)
	}
	for _, s := range objs.EndpointSlices {
		v := discoveryv1.EndpointSlice{TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
			ObjectMeta:  metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, Labels: map[string]string{serviceNameLabel: s.Service}},
			AddressType: discoveryv1.AddressTypeIPv4}
		for _, p := range s.Ports {
			v.Ports = append(v.Ports, discoveryv1.EndpointPort{Name: ptr(p.Name), Protocol: ptr(corev1.Protocol(strings.ToUpper(p.Protocol))), Port: ptr(int32(p.Port))})
		}
		for _, e := range s.Endpoints {
			ep := discoveryv1.Endpoint{Conditions: discoveryv1.EndpointConditions{Ready: ptr(e.Ready)}}
			for _, a := range e.Addresses {
				ep.Addresses = append(ep.Addresses, a.String())
			}
			if e.Hostname != "" {
				ep.Hostname = ptr(e.Hostname)
			}
			if e.PodName != "" {
				ep.TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: e.PodName}
			}
			v.Endpoints = append(v.Endpoints, ep)
		}
		items = append(items, v)
	}
	for _, p := range objs.Pods {
		v := corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		for _, ip := range p.IPs {
			v.Status.PodIPs = append(v.Status.PodIPs, corev1.PodIP{IP: ip.String()})
		}
		items = append(items, v)
	}
	for _, n := range objs.Namespaces {
		items = append(items, corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: n.Name}})
	}
	return json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
}

// FuzzManifest loads arbitrary manifest files (YAML streams, JSON, Lists).
// What does not load is skipped, each as a *ManifestError naming the file
// and the document, with a kind and reason of the metric's vocabulary; what
// loads holds at most one object per 8 bytes, only names DNS can carry
// once published, and renders back to a manifest that loads to the same
// records without a skip.
//
//	go test -run '^$' -fuzz '^FuzzManifest$' -fuzztime 50000x ./pkg/kubefeed/
func FuzzManifest(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("..", "clusterdns", "testdata", "*", "*.yaml"))
	if err != nil || len(files) == 0 {
		f.Fatalf("seed manifests: %v", err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		svcA,
		svcA + "---\n" + strings.Replace(svcA, "clusterIP", "clusterIp", 1),
		"apiVersion: v1\nkind: Service\nmetadata: {name: ext, namespace: prod}\nspec: {type: ExternalName, externalName: " + strings.Repeat("a", 64) + ".example.com}\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: ext, namespace: prod}\nspec: {type: ExternalName, externalName: \"bad name..\"}\n",
		"apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: e, namespace: prod, labels: {kubernetes.io/service-name: hl}}\naddressType: IPv6\n" +
			"ports: [{name: Http, port: 80, protocol: udp}]\nendpoints:\n- addresses: ['fd00::1', '10.0.0.1']\n  hostname: a.b\n  conditions: {ready: false}\n",
		"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: List\n  items:\n  - {apiVersion: v1, kind: Namespace, metadata: {name: listed}}\n  - {apiVersion: v1, kind: Pod, metadata: {name: p, namespace: Listed}, status: {podIPs: [{ip: '::ffff:10.0.0.1'}]}}\n",
		`{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "j"}, "spec": {"clusterIPs": ["10.0.0.1", "fd00::1"], "ports": [{"port": 53, "protocol": "UDP", "name": "dns"}]}}`,
		"---\n--- # x\nnull\n---\n{kind: Service}\n",
		"kind: Service\nmetadata: {name: a}\nspec: {ports: [{port: 0}]}\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: 1kubernetes, namespace: prod}\nspec: {clusterIP: 10.96.0.1}\n---\nkind: Service\nmetadata: {name: Bad}\n",
		svcA + "--- {kind: Service}\n" + svcA,
		"\xff\xfe: [",
	} {
		f.Add([]byte(s))
	}
	path := filepath.Join(f.TempDir(), "objects.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		objs, err := LoadManifests(path)
		var skipped ManifestErrors
		if err != nil && !errors.As(err, &skipped) {
			t.Fatalf("error %v (%T), want ManifestErrors", err, err)
		}
		for _, me := range skipped {
			if me.File != path || me.Doc < 1 || !strings.HasPrefix(me.Error(), fmt.Sprintf("manifest %q document %d", path, me.Doc)) {
				t.Fatalf("error %v does not name the file %q and a document", me, path)
			}
			if !slices.Contains([]string{KindService, KindEndpointSlice, KindPod, KindNamespace, KindDocument}, me.Kind) ||
				!slices.Contains([]string{ReasonInvalidName, ReasonInvalidField, ReasonMissingLabel, ReasonDecode}, me.Reason) {
				t.Fatalf("error %v: kind %q reason %q", me, me.Kind, me.Reason)
			}
		}
		n := len(objs.Services) + len(objs.EndpointSlices) + len(objs.Pods) + len(objs.Namespaces)
		if n > len(data)/8 {
			t.Fatalf("%d objects from %d bytes", n, len(data))
		}
		for _, ns := range objs.Namespaces {
			if !isLabel(ns.Name) {
				t.Fatalf("namespace %q accepted", ns.Name)
			}
		}
		st, err := store.New(store.Options{Zone: "cluster.local", TTL: 5, Pods: store.PodsVerified, EndpointPodNames: true})
		if err != nil {
			t.Fatal(err)
		}
		st.Replace(objs)
		checkSnapshotNames(t, st.Publish())
		out, err := renderManifest(objs)
		if err != nil {
			t.Fatalf("render %+v: %v", objs, err)
		}
		var l loader
		l.json(path, 1, "", out)
		if len(l.skipped) > 0 {
			t.Fatalf("rendered manifest does not load: %v\n%s", l.skipped, out)
		}
		if back := l.objs; !reflect.DeepEqual(back, objs) {
			t.Fatalf("rendered manifest loads to\n%+v\nwant\n%+v\n%s", l.objs, objs, out)
		}
	})
}

// checkSlimPod fails unless ToPod of p as kubewire decodes it (what the
// cluster feed's client gives) returns what ToPod of p returned: ToPod
// reads only the fields kubewire keeps.
func checkSlimPod(t *testing.T, p *corev1.Pod, want store.Pod, wantKeep bool, wantErr error) {
	t.Helper()
	raw, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	slim, err := kubewire.Pod(raw)
	if err != nil {
		t.Fatalf("kubewire.Pod: %v", err)
	}
	got, keep, err := ToPod(slim)
	if fmt.Sprint(err) != fmt.Sprint(wantErr) || keep != wantKeep || !reflect.DeepEqual(got, want) {
		t.Fatalf("ToPod of the decoded pod = %+v, %v, %v; of the pod %+v, %v, %v", got, keep, err, want, wantKeep, wantErr)
	}
}
