package podfacts

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// metadataClient is a fake metadata client holding objs.
func metadataClient(objs ...*metav1.PartialObjectMetadata) *metadatafake.FakeMetadataClient {
	scheme := metadatafake.NewTestScheme()
	metav1.AddMetaToScheme(scheme)
	list := make([]runtime.Object, len(objs))
	for i, o := range objs {
		list[i] = o
	}
	return metadatafake.NewSimpleMetadataClient(scheme, list...)
}

func testNamespace(name string, labels map[string]string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// The pod lookup carries the namespace label of the pod's namespace, as
// the metadata informer sees it, and a label change reaches later lookups.
func TestPodInformerNamespaceLabel(t *testing.T) {
	ap := string(policy.ClusterFirstWithAutopath)
	meta := metadataClient(
		testNamespace("team", map[string]string{policy.AnnotationDNSPolicy: ap, "other": "x"}),
		testNamespace("plain", map[string]string{"other": "x"}))
	ns, err := NewNamespaceInformer(meta, testkit.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	updated := make(chan struct{}, 1)
	if _, err := ns.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, _ any) {
		select {
		case updated <- struct{}{}:
		default:
		}
	}}); err != nil {
		t.Fatal(err)
	}
	plainPod := testPod("p2", "uid-2", "node-1")
	plainPod.Namespace = "plain"
	client := fake.NewClientset(testPod("p1", "uid-1", "node-1"), plainPod)
	p, err := NewPodInformer(client, "node-1", testkit.Logger(t), WithNamespaces(ns))
	if err != nil {
		t.Fatal(err)
	}
	testkit.Start(t, p.Run)
	testkit.Start(t, ns.Run)
	ctx := context.Background()

	lookup := func(uid string) policy.Input {
		t.Helper()
		lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
		defer lcancel()
		in, ok := p.Pod(lctx, uid)
		if !ok {
			t.Fatalf("pod %s not found", uid)
		}
		return in
	}
	if got := lookup("uid-1").NamespacePolicy; got != ap {
		t.Errorf("team's pod: NamespacePolicy = %q, want %q", got, ap)
	}
	if got := lookup("uid-2").NamespacePolicy; got != "" {
		t.Errorf("plain's pod: NamespacePolicy = %q, want none", got)
	}
	// Only the label is kept.
	obj, _, _ := ns.informer.GetStore().GetByKey("team")
	if m := obj.(*metav1.PartialObjectMetadata); len(m.Labels) != 1 {
		t.Errorf("stored labels %v, want only %s", m.Labels, policy.AnnotationDNSPolicy)
	}
	// Opting the namespace out reaches the next lookup.
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	if _, err := meta.Resource(gvr).Patch(ctx, "team", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"dnsconfigurer.io/dns-policy":"ClusterFirst"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-updated:
	case <-time.After(5 * time.Second):
		t.Fatal("label change not seen")
	}
	if got := lookup("uid-1").NamespacePolicy; got != "ClusterFirst" {
		t.Errorf("after the change: NamespacePolicy = %q", got)
	}
}

// Unsynced, a lookup whose context ends gets no label (the cluster default).
func TestNamespaceInformerUnsynced(t *testing.T) {
	meta := metadataClient()
	ns, err := NewNamespaceInformer(meta, testkit.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := ns.NamespacePolicy(ctx, "team"); got != "" {
		t.Errorf("unsynced: %q", got)
	}
}

// A refused list (node credentials, no ClusterRole) makes lookups stop
// waiting for the namespace labels: the cluster default, at once.
func TestNamespaceInformerForbidden(t *testing.T) {
	meta := metadataClient(testNamespace("team", map[string]string{policy.AnnotationDNSPolicy: "ClusterFirstWithAutopath"}))
	refused := make(chan struct{}, 1)
	meta.PrependReactor("list", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		select {
		case refused <- struct{}{}:
		default:
		}
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "", errors.New("node credentials"))
	})
	ns, err := NewNamespaceInformer(meta, testkit.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	testkit.Start(t, ns.Run)
	<-refused
	// A lookup stops waiting once the refusal is recorded, long before
	// its context ends.
	lctx, lcancel := context.WithTimeout(context.Background(), time.Minute)
	defer lcancel()
	if got := ns.NamespacePolicy(lctx, "team"); got != "" {
		t.Errorf("forbidden: %q", got)
	}
	if lctx.Err() != nil {
		t.Error("the lookup waited until its context ended")
	}
	if ns.HasSynced() {
		t.Error("synced without a list")
	}
}
