//go:build tools

// Package testbin pins the Kubernetes and etcd binaries that the
// integration tests (test/apiserver) and the real-cluster end-to-end tests
// (test/cluster) run. It is a separate module so that the project's own
// client-go version is untouched and the root module's go test ./... never
// builds Kubernetes. build.sh compiles the binaries from here.
package testbin

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/test/images/agnhost"

	// e2e.test is built with go test -c from ./e2edns (upstream's
	// sig-network specs alone); its test file imports these, which the
	// module graph must therefore resolve.
	_ "k8s.io/kubernetes/test/e2e"
	_ "k8s.io/kubernetes/test/e2e/feature"
	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	_ "k8s.io/kubernetes/test/e2e/framework/metrics/init"
	_ "k8s.io/kubernetes/test/e2e/framework/node/init"
	_ "k8s.io/kubernetes/test/e2e/network"
	_ "k8s.io/kubernetes/test/e2e/testing-manifests"
	_ "k8s.io/kubernetes/test/fixtures"
)
