// Package nriplugin is dnsconfigurer's NRI plugin: it gives every container
// of a pod the resolver config the policy engine computes for the pod.
//
// It registers on the container runtime's NRI socket (containerd 2.x,
// github.com/containerd/nri v0.12.3). It needs no kubelet change and puts
// nothing on kubelet's call path.
//
// README.md is the manual: what it does, live update, metrics,
// connection.
//
// The package imports the NRI stub and API, client_golang (metrics),
// pkg/hostresolv (the node config and its changes), pkg/podfacts (the pod
// lookup, the inverse, the Events and the reject message), pkg/policy,
// pkg/resolvconf and api/v1alpha1 (its defaults). It does not import
// pkg/cri or the CRI API: the shim is a sibling. pkg/policy, pkg/podfacts,
// pkg/cri and api/ must not import it.
package nriplugin
