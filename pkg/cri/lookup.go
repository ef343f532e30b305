package cri

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/podspec"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// PodLookup finds a pod's DNS facts by UID.
type PodLookup interface {
	// Pod returns the engine input of the pod with uid. For a pod it has
	// not seen yet it may wait until ctx is done.
	Pod(ctx context.Context, uid string) (policy.Input, bool)
}

const uidIndex = "uid"

// Annotations kubelet sets on static pods and their mirror pods
// (pkg/kubelet/types). A static pod's UID is its config hash; its mirror pod
// in the API server has a UID of its own and carries the hash in
// configMirrorAnnotation, so the informer indexes that too.
const (
	configMirrorAnnotation = "kubernetes.io/config.mirror"
	configSourceAnnotation = "kubernetes.io/config.source"
)

// PodInformer is a PodLookup fed by an informer on the pods bound to one
// node (spec.nodeName=<node>). Pods are slimmed to their DNS fields before
// they are stored.
type PodInformer struct {
	informer cache.SharedIndexInformer
	log      *slog.Logger

	mu      sync.Mutex
	changed chan struct{} // closed and replaced when a pod is added or updated
}

var _ PodLookup = (*PodInformer)(nil)

// NewPodInformer watches the pods of node through client. Call Run.
func NewPodInformer(client kubernetes.Interface, node string, log *slog.Logger) (*PodInformer, error) {
	if node == "" {
		return nil, fmt.Errorf("cri: pod lookup needs the node name")
	}
	if log == nil {
		log = slog.Default()
	}
	sel := fields.OneTermEqualSelector("spec.nodeName", node).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return client.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, o)
		},
	}
	p := &PodInformer{log: log.With("component", "cri", "node", node), changed: make(chan struct{})}
	// The wrapper lets the reflector use watch-list only where the client
	// supports it (the fake clientset of tests does not).
	p.informer = cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, client), &corev1.Pod{}, 0, cache.Indexers{uidIndex: func(obj any) ([]string, error) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return nil, nil
		}
		keys := []string{string(pod.UID)}
		if hash := pod.Annotations[configMirrorAnnotation]; hash != "" && hash != string(pod.UID) {
			keys = append(keys, hash)
		}
		return keys, nil
	}})
	if err := p.informer.SetTransform(slimPod); err != nil {
		return nil, fmt.Errorf("cri: pod informer: %w", err)
	}
	notify := func(any) {
		p.mu.Lock()
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
	}
	if _, err := p.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, obj any) { notify(obj) },
	}); err != nil {
		return nil, fmt.Errorf("cri: pod informer: %w", err)
	}
	return p, nil
}

// slimPod keeps what the engine (podspec's field list) and Events need;
// the rest of the pod is dropped before it reaches the store.
func slimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // a DeletedFinalStateUnknown tombstone
	}
	f := podspec.FieldsOf(pod)
	f.Metadata.GenerateName = "" // a pod on a node has its name
	f.Metadata.Annotations = nil
	slim := f.Pod()
	slim.ResourceVersion = pod.ResourceVersion
	slim.Spec.NodeName = pod.Spec.NodeName
	for _, key := range []string{policy.AnnotationDNSPolicy, configMirrorAnnotation} {
		if v, ok := pod.Annotations[key]; ok {
			if slim.Annotations == nil {
				slim.Annotations = map[string]string{}
			}
			slim.Annotations[key] = v
		}
	}
	return slim, nil
}

// Run runs the informer until ctx is done.
func (p *PodInformer) Run(ctx context.Context) {
	p.log.Info("watching pods of the node")
	p.informer.RunWithContext(ctx)
}

// HasSynced reports whether the first list has been stored.
func (p *PodInformer) HasSynced() bool { return p.informer.HasSynced() }

// Pod returns the pod with uid (or the mirror pod of the static pod with
// uid), waiting until ctx is done for one not seen yet (kubelet may create
// the sandbox before the shim's watch delivers the pod).
func (p *PodInformer) Pod(ctx context.Context, uid string) (policy.Input, bool) {
	for {
		p.mu.Lock()
		changed := p.changed
		p.mu.Unlock()
		if in, ok := p.get(uid); ok {
			return in, true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return policy.Input{}, false
		}
	}
}

func (p *PodInformer) get(uid string) (policy.Input, bool) {
	objs, err := p.informer.GetIndexer().ByIndex(uidIndex, uid)
	if err != nil || len(objs) == 0 {
		return policy.Input{}, false
	}
	pod, ok := objs[0].(*corev1.Pod)
	if !ok {
		return policy.Input{}, false
	}
	in := podspec.Input(pod)
	in.UID = uid // a static pod's, not its mirror's
	return in, true
}
