package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/kubefeed"
)

// controlFileBytes is where dumpServices starts a new manifest file: under
// the server's per-file cap (kubefeed.MaxManifestSize, 64 MiB).
const controlFileBytes = 32 << 20

// startControl runs dnsconfigurer serve from a manifest of the cluster's
// Services as they are now, and waits until it answers every one of
// services. It watches nothing, so a change costs it no work. Its query
// p99 under churn is what the churn costs a server through the CPU it
// shares with the control plane, the writer and the poller.
func startControl(ctx context.Context, t *testing.T, dir, bin string, client kubernetes.Interface, upstream string, services []expect) *server {
	t.Helper()
	objects := filepath.Join(dir, "control-objects")
	if err := os.Mkdir(objects, 0o755); err != nil {
		t.Fatal(err)
	}
	n, err := dumpServices(ctx, client, objects, controlFileBytes)
	if err != nil {
		t.Fatalf("control: %v", err)
	}
	addr := testkit.FreeAddr(t, "127.0.0.1")
	maddr := testkit.FreeAddr(t, "127.0.0.1")
	s := startServer(t, "control", dir, addr, "http://"+maddr+"/metrics", bin,
		"serve", "--listen", addr, "--objects", objects, "--upstream", upstream, "--metrics-listen", maddr)
	took := awaitAll(t, s, services, time.Now())
	t.Logf("control: %d Services from a file answered %v after its start", n, took.Round(time.Millisecond))
	return s
}

// dumpServices writes every Service of the cluster to JSON documents in
// files of dir, a new file before one would pass fileBytes, and returns
// how many it wrote.
func dumpServices(ctx context.Context, client kubernetes.Interface, dir string, fileBytes int) (n int, err error) {
	var f *os.File
	written, files := 0, 0
	defer func() {
		if f != nil {
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
	}()
	next := func() error {
		if f != nil {
			err := f.Close()
			f = nil
			if err != nil {
				return err
			}
		}
		files++
		written = 0
		var err error
		f, err = os.Create(filepath.Join(dir, fmt.Sprintf("services-%03d.yaml", files)))
		return err
	}
	if err := next(); err != nil {
		return 0, err
	}
	opts := metav1.ListOptions{Limit: 5000}
	for {
		list, err := client.CoreV1().Services("").List(ctx, opts)
		if err != nil {
			return n, fmt.Errorf("list services: %w", err)
		}
		for i := range list.Items {
			svc := &list.Items[i]
			svc.APIVersion, svc.Kind = "v1", "Service"
			svc.ManagedFields = nil
			doc, err := json.Marshal(svc)
			if err != nil {
				return n, err
			}
			if written > 0 && written+len(doc) > fileBytes {
				if err := next(); err != nil {
					return n, err
				}
			}
			m, err := fmt.Fprintf(f, "---\n%s\n", doc)
			if err != nil {
				return n, err
			}
			written += m
			n++
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return n, nil
		}
	}
}

// TestDumpServices: the control's manifest is what serve --objects reads,
// split over files as they fill.
func TestDumpServices(t *testing.T) {
	var objs []runtime.Object
	for i := range 5 {
		objs = append(objs, directService(fmt.Sprintf("svc-%d", i), "churn-0", fmt.Sprintf("10.96.0.%d", i+10), 80, metav1.Now()))
	}
	dir := t.TempDir()
	n, err := dumpServices(t.Context(), fake.NewClientset(objs...), dir, 600)
	if err != nil || n != 5 {
		t.Fatalf("dumpServices = %d, %v; want 5, nil", n, err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "services-*.yaml"))
	if err != nil || len(files) < 2 {
		t.Fatalf("files %v (%v): want the Services split over several", files, err)
	}
	got, err := kubefeed.LoadManifests(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Services) != 5 {
		t.Fatalf("serve --objects would read %d Services, want 5", len(got.Services))
	}
	for _, svc := range got.Services {
		var i int
		if _, err := fmt.Sscanf(svc.Name, "svc-%d", &i); err != nil || svc.Namespace != "churn-0" ||
			!slices.Equal(svc.ClusterIPs, []netip.Addr{netip.AddrFrom4([4]byte{10, 96, 0, byte(i + 10)})}) {
			t.Errorf("Service %s/%s: ClusterIPs %v", svc.Namespace, svc.Name, svc.ClusterIPs)
		}
	}
}
