// Package podspec turns a Kubernetes Pod (k8s.io/api/core/v1), as a manifest
// or as an API object, into the policy engine's Input. It is the one adapter
// between k8s.io/api and the pure pkg/policy, shared by the render and
// validate commands, the webhook and the CRI shim's API lookup.
package podspec
