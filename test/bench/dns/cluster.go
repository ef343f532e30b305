package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/dnsconfigurer/dnsconfigurer/test/apiserver"
)

// objectSet is the benchmark's cluster: the namespaces, the ClusterIP and
// headless Services, and one EndpointSlice per headless Service. The
// manifests of --objects and the API server's objects are both made from it.
type objectSet struct {
	namespaces []*corev1.Namespace
	services   []*corev1.Service
	slices     []*discoveryv1.EndpointSlice
}

func benchObjects() objectSet {
	var s objectSet
	tm := func(kind, version string) metav1.TypeMeta { return metav1.TypeMeta{Kind: kind, APIVersion: version} }
	ports := []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}
	for n := range namespaces {
		s.namespaces = append(s.namespaces, &corev1.Namespace{TypeMeta: tm("Namespace", "v1"),
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ns-%d", n)}})
	}
	for i := range namespaces * perNS {
		name, ns := svcName(i)
		s.services = append(s.services, &corev1.Service{TypeMeta: tm("Service", "v1"),
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       corev1.ServiceSpec{ClusterIP: clusterIP(i), Ports: ports}})
	}
	for j := range headless {
		name, ns := hlName(j)
		s.services = append(s.services, &corev1.Service{TypeMeta: tm("Service", "v1"),
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: ports}})
		portName, port, proto, ready := "http", int32(80), corev1.ProtocolTCP, true
		slice := &discoveryv1.EndpointSlice{TypeMeta: tm("EndpointSlice", "discovery.k8s.io/v1"),
			ObjectMeta: metav1.ObjectMeta{Name: name + "-1", Namespace: ns,
				Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
		}
		for k := range endpointsHL {
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{endpointIP(j, k)},
				Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
		}
		s.slices = append(s.slices, slice)
	}
	return s
}

// writeManifests writes the objects into dir as one multi-document file.
func writeManifests(dir string, s objectSet) error {
	var b strings.Builder
	add := func(o any) error {
		y, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		b.WriteString("---\n")
		b.Write(y)
		return nil
	}
	for _, o := range s.namespaces {
		if err := add(o); err != nil {
			return err
		}
	}
	for _, o := range s.services {
		if err := add(o); err != nil {
			return err
		}
	}
	for _, o := range s.slices {
		if err := add(o); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, "objects.yaml"), []byte(b.String()), 0o644)
}

// populateWorkers is how many creates are in flight while populating.
const populateWorkers = 32

// startCluster starts etcd and kube-apiserver (test/apiserver) and creates
// the objects through client-go.
func startCluster(ctx context.Context, s objectSet) (*apiserver.ControlPlane, error) {
	t0 := time.Now()
	cp, err := apiserver.Start(ctx)
	if err != nil {
		return nil, err
	}
	fmt.Printf("kube-apiserver and etcd ready in %v; populating (about 2 min on an idle 2-core machine, 5-6 at load average 20)\n", time.Since(t0).Round(time.Millisecond))
	cfg := cp.Config()
	cfg.QPS, cfg.Burst = 5000, 5000
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		_ = cp.Close()
		return nil, err
	}
	t0 = time.Now()
	if err := populate(ctx, client, s); err != nil {
		_ = cp.Close()
		return nil, fmt.Errorf("populate: %w", err)
	}
	fmt.Printf("populated %d namespaces, %d Services and %d EndpointSlices in %v\n",
		len(s.namespaces), len(s.services), len(s.slices), time.Since(t0).Round(time.Millisecond))
	return cp, nil
}

// populate creates the namespaces, then the Services and EndpointSlices,
// populateWorkers at a time.
func populate(ctx context.Context, client kubernetes.Interface, s objectSet) error {
	for _, ns := range s.namespaces {
		if err := retry(ctx, func() error {
			_, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
			return err
		}); err != nil {
			return fmt.Errorf("namespace %s: %w", ns.Name, err)
		}
	}
	var creates []func() error
	for _, svc := range s.services {
		creates = append(creates, func() error {
			_, err := client.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{})
			return err
		})
	}
	for _, sl := range s.slices {
		creates = append(creates, func() error {
			_, err := client.DiscoveryV1().EndpointSlices(sl.Namespace).Create(ctx, sl, metav1.CreateOptions{})
			return err
		})
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, populateWorkers)
	for w := range populateWorkers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(creates) || ctx.Err() != nil {
					return
				}
				if err := retry(ctx, creates[i]); err != nil {
					errs[w] = err
					next.Store(int64(len(creates)))
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return ctx.Err()
}

// retry calls create until it succeeds (or the object exists already), fails
// for a reason that trying again cannot mend, or has failed 6 times.
func retry(ctx context.Context, create func() error) error {
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := create()
		switch {
		case err == nil, apierrors.IsAlreadyExists(err):
			return nil
		case attempt == 6, apierrors.IsInvalid(err), apierrors.IsForbidden(err), apierrors.IsBadRequest(err):
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// envCoreDNS and the test binaries' directory (apiserver.BinDir) name the
// coredns binary, as for the tests of test/bench.
const envCoreDNS = "DNSCONFIGURER_COREDNS"

func corednsPath() (string, error) {
	if p := os.Getenv(envCoreDNS); p != "" {
		return p, nil
	}
	dir, err := apiserver.BinDir()
	if err != nil {
		return "", fmt.Errorf("no coredns: set %s, or run test/testbin/build.sh: %w", envCoreDNS, err)
	}
	return filepath.Join(dir, "coredns"), nil
}

// corefile is kubeadm's Corefile (Kubernetes 1.34,
// cmd/kubeadm/app/phases/addons/dns/manifests.go) with multisocket added
// (CoreDNS 1.15; sockets: GOMAXPROCS), the API server of a kubeconfig, the
// stub upstream in place of /etc/resolv.conf, and every port on 127.0.0.1.
// Its cache keeps forwarded answers only: kubeadm disables it for the
// cluster zone.
const corefile = `.:%[1]s {
    bind 127.0.0.1
    errors
    health %[2]s {
       lameduck 5s
    }
    ready %[3]s
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       kubeconfig %[4]s test
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus %[5]s
    forward . %[6]s {
       max_concurrent 1000
    }
    cache 30 {
       disable success cluster.local
       disable denial cluster.local
    }
    loop
    reload
    loadbalance
    multisocket
}
`

// corednsPorts are the addresses of a CoreDNS instance.
type corednsPorts struct{ dns, health, ready, metrics string }

func renderCorefile(p corednsPorts, kubeconfig, upstream string) string {
	_, port, _ := net.SplitHostPort(p.dns)
	return fmt.Sprintf(corefile, port, p.health, p.ready, kubeconfig, p.metrics, upstream)
}
