package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// controlFileBytes is where dumpServices starts a new manifest file: under
// the server's per-file cap (feed.MaxManifestSize, 64 MiB).
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
	n, err := dumpServices(ctx, client, objects)
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
// files of dir, and returns how many it wrote.
func dumpServices(ctx context.Context, client kubernetes.Interface, dir string) (int, error) {
	var f *os.File
	written, files, n := 0, 0, 0
	next := func() error {
		if f != nil {
			if err := f.Close(); err != nil {
				return err
			}
		}
		files++
		var err error
		f, err = os.Create(filepath.Join(dir, fmt.Sprintf("services-%03d.yaml", files)))
		written = 0
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
			if written+len(doc) > controlFileBytes {
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
			break
		}
	}
	return n, f.Close()
}
