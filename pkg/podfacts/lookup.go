package podfacts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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

// SandboxPod is the pod a sandbox is for, as kubelet names it in the
// sandbox metadata. Static is set for a pod kubelet did not get from the
// API server (annotation kubernetes.io/config.source other than "api"):
// a static pod, whose UID is its config hash.
type SandboxPod struct {
	Namespace, Name, UID string
	Static               bool
}

// SandboxLookup is a PodLookup that checks what it finds against the
// sandbox: the shim uses PodFor when its PodLookup has it.
type SandboxLookup interface {
	// PodFor returns the engine input of sb's pod: the API pod with sb's
	// UID, or for a static pod its mirror pod, whose namespace and name
	// are sb's. More than one candidate is no match. For a pod it has
	// not seen yet it may wait until ctx is done.
	PodFor(ctx context.Context, sb SandboxPod) (policy.Input, bool)
}

const uidIndex = "uid"

// Annotations kubelet sets on static pods and their mirror pods
// (pkg/kubelet/types). A static pod's UID is its config hash; its mirror pod
// in the API server has a UID of its own and carries the hash in
// configMirrorAnnotation, so the informer indexes that too. Any pod's
// author can set these annotations: they are followed only as match
// describes.
const (
	configMirrorAnnotation = "kubernetes.io/config.mirror"
	configSourceAnnotation = "kubernetes.io/config.source"
)

// PodInformer is a PodLookup fed by an informer on the pods bound to one
// node (spec.nodeName=<node>). Pods are slimmed to their DNS fields before
// they are stored.
//
// A lookup trusts the sandbox metadata (kubelet's) and nothing a pod's
// author can set: a pod matches a sandbox only if it is bound to this node
// and its namespace and name are the sandbox's, and the mirror annotation
// (which any pod may carry) is followed only for a static pod's sandbox.
// The API server keeps namespace/name unique, so at most one pod can pass.
type PodInformer struct {
	informer cache.SharedIndexInformer
	node     string
	log      *slog.Logger
	rejected *prometheus.CounterVec // reason
	// namespaces, when set, gives each pod's namespace label
	// (policy.Input.NamespacePolicy).
	namespaces NamespacePolicies

	mu      sync.Mutex
	changed chan struct{} // closed and replaced when a pod is added or updated
}

var (
	_ PodLookup     = (*PodInformer)(nil)
	_ SandboxLookup = (*PodInformer)(nil)
)

// InformerOption tunes a PodInformer.
type InformerOption func(*PodInformer)

// InformerRegistry registers the informer's metric
// (dnsconfigurer_cri_pod_lookup_rejected_total) on reg.
func InformerRegistry(reg prometheus.Registerer) InformerOption {
	return func(p *PodInformer) {
		if reg != nil {
			reg.MustRegister(p.rejected)
		}
	}
}

// WithNamespaces makes every pod found carry its namespace's
// dnsconfigurer.io/dns-policy label from n, read when the pod is looked
// up (so a label change reaches the pods created after it).
func WithNamespaces(n NamespacePolicies) InformerOption {
	return func(p *PodInformer) { p.namespaces = n }
}

// Reasons a lookup refused candidates, as the metric labels them.
const (
	rejectNode       = "other_node" // bound to another node (or none)
	rejectIdentity   = "identity"   // namespace/name differ from the sandbox's
	rejectNotStatic  = "not_static" // a mirror pod for an API pod's sandbox, or the reverse
	rejectAmbiguous  = "ambiguous"  // more than one pod passed
	rejectedHelpText = "Pods a lookup that found nothing refused although their UID or mirror annotation matched the sandbox UID, by reason: other_node, identity (namespace/name differ from the sandbox metadata), not_static (a mirror pod for an API pod's sandbox, or the reverse), ambiguous (more than one pod passed; none is used)."
)

// NewPodInformer watches the pods of node through client, always with the
// field selector spec.nodeName=<node>. Call Run.
func NewPodInformer(client kubernetes.Interface, node string, log *slog.Logger, opts ...InformerOption) (*PodInformer, error) {
	if node == "" {
		return nil, errors.New("podfacts: pod lookup needs the node name")
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
	p := &PodInformer{node: node, log: log.With("component", "cri", "node", node), changed: make(chan struct{}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "dnsconfigurer", Subsystem: "cri",
			Name: "pod_lookup_rejected_total", Help: rejectedHelpText}, []string{"reason"})}
	for _, o := range opts {
		o(p)
	}
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
		return nil, fmt.Errorf("podfacts: pod informer: %w", err)
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
		return nil, fmt.Errorf("podfacts: pod informer: %w", err)
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

// Pod is PodFor without the sandbox's namespace and name: the pod on this
// node with uid, or else the one mirror pod on this node of the static pod
// with uid (two or more: no match). Callers that have the sandbox metadata
// use PodFor, which also checks the namespace and name.
func (p *PodInformer) Pod(ctx context.Context, uid string) (policy.Input, bool) {
	return p.wait(ctx, SandboxPod{UID: uid}, true)
}

// PodFor returns sb's pod (see SandboxLookup), waiting until ctx is done
// for one not seen yet (kubelet may create the sandbox before the shim's
// watch delivers the pod).
func (p *PodInformer) PodFor(ctx context.Context, sb SandboxPod) (policy.Input, bool) {
	return p.wait(ctx, sb, false)
}

func (p *PodInformer) wait(ctx context.Context, sb SandboxPod, anyName bool) (policy.Input, bool) {
	for {
		p.mu.Lock()
		changed := p.changed
		p.mu.Unlock()
		pod, refused := p.match(sb, anyName)
		if pod != nil {
			in := podspec.Input(pod)
			in.UID = sb.UID // a static pod's, not its mirror's
			if p.namespaces != nil {
				in.NamespacePolicy = p.namespaces.NamespacePolicy(ctx, in.Namespace)
			}
			return in, true
		}
		if slices.Contains(refused, rejectAmbiguous) {
			p.refuse(sb, refused)
			return policy.Input{}, false
		}
		select {
		case <-changed:
		case <-ctx.Done():
			p.refuse(sb, refused)
			return policy.Input{}, false
		}
	}
}

// refuse counts and logs the candidates a lookup that found nothing
// refused.
func (p *PodInformer) refuse(sb SandboxPod, reasons []string) {
	if len(reasons) == 0 {
		return
	}
	for _, r := range reasons {
		p.rejected.WithLabelValues(r).Inc()
	}
	p.log.Warn("pods claiming the sandbox's UID refused; using the sandbox config",
		"pod", sb.Namespace+"/"+sb.Name, "uid", sb.UID, "static", sb.Static, "reasons", strings.Join(reasons, ","))
}

// match is the one pod that may stand for sb, or nil and why each
// candidate was refused (rejectAmbiguous alone when several passed). A candidate is bound to this node
// and has sb's namespace and name; it is the API pod with sb's UID when sb
// is not static, and a mirror pod whose annotation is sb's UID when it is.
// With anyName, names are not checked and the API pod with the UID wins
// over mirror pods.
func (p *PodInformer) match(sb SandboxPod, anyName bool) (*corev1.Pod, []string) {
	objs, err := p.informer.GetIndexer().ByIndex(uidIndex, sb.UID)
	if err != nil {
		return nil, nil
	}
	var own, mirrors []*corev1.Pod
	var refused []string
	for _, obj := range objs {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			continue
		}
		isOwn := string(pod.UID) == sb.UID
		isMirror := !isOwn && pod.Annotations[configMirrorAnnotation] == sb.UID
		switch {
		case !isOwn && !isMirror:
			continue
		case pod.Spec.NodeName != p.node:
			refused = append(refused, rejectNode)
			continue
		case anyName:
		case isOwn == sb.Static:
			refused = append(refused, rejectNotStatic)
			continue
		case pod.Namespace != sb.Namespace || pod.Name != sb.Name:
			refused = append(refused, rejectIdentity)
			continue
		}
		if isOwn {
			own = append(own, pod)
		} else {
			mirrors = append(mirrors, pod)
		}
	}
	cands := own
	if len(cands) == 0 {
		cands = mirrors
	}
	switch len(cands) {
	case 0:
		return nil, refused
	case 1:
		return cands[0], nil
	default:
		return nil, []string{rejectAmbiguous}
	}
}

// LookupWait is how long an agent waits for sb's pod, given its lookup
// timeout: not at all for a static pod, whose mirror pod may come later
// or never.
func (sb SandboxPod) LookupWait(timeout time.Duration) time.Duration {
	if sb.Static {
		return 0
	}
	return timeout
}

// StaticPod reports, from the pod annotations kubelet hands the runtime
// (the sandbox config's, or NRI's PodSandbox.Annotations), a pod kubelet
// did not get from the API server: a static pod, whose UID is its config
// hash (SandboxPod.Static).
func StaticPod(annotations map[string]string) bool {
	src := annotations[configSourceAnnotation]
	return src != "" && src != "api"
}
