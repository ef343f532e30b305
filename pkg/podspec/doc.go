// Package podspec turns a Kubernetes Pod (k8s.io/api/core/v1), as a manifest
// or as an API object, into the policy engine's Input. It is the one adapter
// between k8s.io/api and the pure pkg/policy, shared by the render and
// validate commands, the webhook and the CRI shim's API lookup.
//
// Unmarshal, Templates and the bounded types of Meta and Spec read JSON as
// the API server does: names match case-sensitively and a repeated key is
// an error. Each list and map is counted before it is made (bounded.go),
// so a webhook caller gets a decode whose memory follows the bytes sent.
package podspec
