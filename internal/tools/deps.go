//go:build tools

// Package tools pins the module's dependencies before the code using them lands.
package tools

import (
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/miekg/dns"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "go.uber.org/goleak"
	_ "google.golang.org/grpc"
	_ "k8s.io/api/admission/v1"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/cri-api/pkg/apis/runtime/v1"
	_ "sigs.k8s.io/yaml"
)
