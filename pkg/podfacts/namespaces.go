package podfacts

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// NamespacePolicies gives the policy.AnnotationDNSPolicy label of a pod's
// namespace (issue 18: pod annotation > namespace label > cluster
// default).
type NamespacePolicies interface {
	// NamespacePolicy returns the label's value on namespace, "" when it
	// has none or is not known. It may wait until ctx is done for a
	// first sync.
	NamespacePolicy(ctx context.Context, namespace string) string
}

// NamespaceInformer is a NamespacePolicies fed by a metadata-only informer
// on the namespaces that carry the label (label selector
// "dnsconfigurer.io/dns-policy"): a namespace whose label is removed
// leaves the cache, and only names and that label are stored. It needs
// list and watch on namespaces, which kubelet's node credentials do not
// have (the Node authorizer): run it with a ServiceAccount.
//
// Without that permission (kubelet's node credentials, or the optional
// ClusterRole not bound) the first list is forbidden: the informer logs it
// with the fix, stays unsynced (not ready), and lookups stop waiting for
// it, so pods get the cluster default without delay.
type NamespaceInformer struct {
	informer  cache.SharedIndexInformer
	log       *slog.Logger
	forbidden atomic.Bool // the last list or watch was refused
}

var _ NamespacePolicies = (*NamespaceInformer)(nil)

// NewNamespaceInformer watches the labelled namespaces through client.
// Call Run.
func NewNamespaceInformer(client metadata.Interface, log *slog.Logger) (*NamespaceInformer, error) {
	if log == nil {
		log = slog.Default()
	}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	inf := metadatainformer.NewFilteredMetadataInformer(client, gvr, metav1.NamespaceAll, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.LabelSelector = policy.AnnotationDNSPolicy }).Informer()
	if err := inf.SetTransform(slimNamespace); err != nil {
		return nil, fmt.Errorf("podfacts: namespace informer: %w", err)
	}
	n := &NamespaceInformer{informer: inf, log: log.With("component", "cri")}
	if err := inf.SetWatchErrorHandlerWithContext(n.watchError); err != nil {
		return nil, fmt.Errorf("podfacts: namespace informer: %w", err)
	}
	return n, nil
}

// watchError records a refused list or watch and logs every failure (the
// reflector retries with a backoff).
func (n *NamespaceInformer) watchError(_ context.Context, _ *cache.Reflector, err error) {
	forbidden := apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)
	n.forbidden.Store(forbidden)
	if forbidden {
		n.log.Warn("namespace labels: list/watch namespaces refused; pods get the cluster default policy. "+
			"Grant list/watch on namespaces (the rule commented in deploy/shim/rbac.yaml) to a ServiceAccount "+
			"(kubelet's node credentials cannot list namespaces) or unset namespaceLabels", "err", err)
		return
	}
	n.log.Warn("namespace labels: list/watch namespaces failed; retrying", "err", err)
}

// slimNamespace keeps a namespace's name, version and dns-policy label.
func slimNamespace(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil // a DeletedFinalStateUnknown tombstone
	}
	slim := &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: m.Name, ResourceVersion: m.ResourceVersion}}
	if v, ok := m.Labels[policy.AnnotationDNSPolicy]; ok {
		slim.Labels = map[string]string{policy.AnnotationDNSPolicy: v}
	}
	return slim, nil
}

// waitSynced waits until the first list is done (true), the list is
// refused or ctx is done (false), polling as cache.WaitForCacheSync does.
func (n *NamespaceInformer) waitSynced(ctx context.Context) bool {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if n.informer.HasSynced() {
			return true
		}
		if n.forbidden.Load() {
			return false
		}
		select {
		case <-ctx.Done():
			return n.informer.HasSynced()
		case <-tick.C:
		}
	}
}

// Run runs the informer until ctx is done.
func (n *NamespaceInformer) Run(ctx context.Context) { n.informer.RunWithContext(ctx) }

// HasSynced reports the first list done.
func (n *NamespaceInformer) HasSynced() bool { return n.informer.HasSynced() }

// NamespacePolicy returns the label of namespace, waiting until ctx is done
// for the first list; unsynced, it returns "" (only the cluster default
// applies) and logs it.
func (n *NamespaceInformer) NamespacePolicy(ctx context.Context, namespace string) string {
	if !n.waitSynced(ctx) {
		n.log.Warn("namespace labels not synced yet; the pod gets the cluster default policy", "namespace", namespace)
		return ""
	}
	obj, ok, err := n.informer.GetStore().GetByKey(namespace)
	if err != nil || !ok {
		return ""
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return ""
	}
	return m.Labels[policy.AnnotationDNSPolicy]
}
