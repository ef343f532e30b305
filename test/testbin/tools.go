//go:build tools

// Package testbin pins the kube-apiserver and etcd that the integration
// tests run against. It is a separate module so that the project's own
// client-go version is untouched and the root module's go test ./... never
// builds Kubernetes. build.sh compiles the two binaries from here.
package testbin

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
