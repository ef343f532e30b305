package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodesettings"
)

// TestNodeSettings gets /node-settings from an agent's metrics handler:
// the JSON shape (field names), the config, and the host snapshot after
// the node's resolver file changes; the health paths are still served.
func TestNodeSettings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(path, []byte("nameserver 192.0.2.1\nsearch corp.example\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := hostresolv.Watch(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	ndots := 2
	node := v1alpha1.NodeDNS{ClusterDNS: []string{"10.96.0.10"}, NodeOS: "linux"}
	pp := v1alpha1.PodPolicy{DefaultDNSPolicy: v1alpha1.DNSPolicyClusterFirstWithAutopath, NamespaceLabels: true, Ndots: &ndots}
	agent := v1alpha1.NodeAgent{NodeDNS: node, PodPolicy: pp, NodeName: "node-a", Limits: v1alpha1.LimitsTrim}
	srv := httptest.NewServer(agentHandler(nil, agentSettings(nodesettings.KindShim, &agent, nil, w)))
	defer srv.Close()

	raw := getJSON(t, srv.URL+nodesettings.Path)
	for _, k := range []string{"kind", "version", "nodeName", "clusterDNS", "clusterDomain", "nodeLocalDNS", "nodeOS", "limits", "podPolicy", "host"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("no %q in %v", k, raw)
		}
	}
	wantPolicy := map[string]any{"defaultDNSPolicy": "ClusterFirstWithAutopath", "namespaceLabels": true, "ndots": 2.0}
	if !reflect.DeepEqual(raw["podPolicy"], wantPolicy) {
		t.Errorf("podPolicy = %v, want %v", raw["podPolicy"], wantPolicy)
	}
	s := getSettings(t, srv.URL)
	if s.Kind != "shim" || s.NodeName != "node-a" || s.Host.Path != path || !s.Host.Healthy || s.Host.Generation != 1 ||
		!reflect.DeepEqual(s.Host.Nameservers, []string{"192.0.2.1"}) || !reflect.DeepEqual(s.NodeLocalDNS, []string{}) {
		t.Errorf("settings = %+v", s)
	}

	ch, unsub := w.Subscribe()
	defer unsub()
	if err := os.WriteFile(path, []byte("nameserver 192.0.2.2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(10 * time.Second)
	for w.Current().Generation < 2 {
		select {
		case <-ch:
		case <-timeout:
			t.Fatal("the watcher published no new snapshot within 10s")
		}
	}
	s = getSettings(t, srv.URL)
	if s.Host.Generation < 2 || !reflect.DeepEqual(s.Host.Nameservers, []string{"192.0.2.2"}) || len(s.Host.Searches) != 0 {
		t.Errorf("after the change: host = %+v", s.Host)
	}
	if resp, err := http.Get(srv.URL + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz: %v %v", resp, err)
	}
}

func getJSON(t *testing.T, url string) map[string]any {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func getSettings(t *testing.T, base string) nodesettings.Settings {
	t.Helper()
	resp, err := http.Get(base + nodesettings.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s nodesettings.Settings
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAgentClusterDomainEmpty runs the real `dnsconfigurer shim` and
// `dnsconfigurer nri` (this test binary re-executed into main) with an
// empty cluster domain, from the flag and from the config file, and reads
// it back from their /node-settings: "" is none, as in kubelet and render,
// not the default. Unset is still cluster.local. The shim fronts a fake
// runtime; the nri plugin's socket does not exist, so it keeps retrying
// while it serves its settings.
func TestAgentClusterDomainEmpty(t *testing.T) {
	if args := os.Getenv("DNSCONFIGURER_AGENT_CHILD"); args != "" {
		os.Args = append([]string{"dnsconfigurer"}, strings.Split(args, "\n")...)
		main() // exits
	}
	dir := t.TempDir()
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 192.0.2.53\nsearch corp.example\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rtSock := filepath.Join(dir, "rt.sock")
	rl, err := net.Listen("unix", rtSock)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(gs, &sandboxRuntime{})
	go gs.Serve(rl)
	defer gs.Stop()
	config := func(kind, domain string) string {
		path := filepath.Join(dir, kind+".yaml")
		if err := os.WriteFile(path, []byte("apiVersion: dnsconfigurer.io/v1alpha1\nkind: "+kind+"\nclusterDNS: [10.96.0.10]\n"+domain), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"shim flag", []string{"shim", "--cluster-domain", ""}, ""},
		{"shim config", []string{"shim", "--config", config("ShimConfiguration", "clusterDomain: \"\"\n")}, ""},
		{"shim unset", []string{"shim"}, "cluster.local"},
		{"nri flag", []string{"nri", "--cluster-domain", ""}, ""},
		{"nri config", []string{"nri", "--config", config("NRIConfiguration", "clusterDomain: \"\"\n")}, ""},
		{"nri unset", []string{"nri"}, "cluster.local"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ml, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			metrics := ml.Addr().String()
			ml.Close()
			args := append(tc.args, "--resolv-conf", resolv, "--metrics-listen", metrics, "--log-level", "error")
			if tc.args[0] == "shim" {
				args = append(args, "--listen", filepath.Join(t.TempDir(), "shim.sock"), "--runtime-endpoint", "unix://"+rtSock)
			} else {
				args = append(args, "--socket", filepath.Join(t.TempDir(), "nri.sock"), "--state-dir", filepath.Join(t.TempDir(), "state"))
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestAgentClusterDomainEmpty$")
			cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "KUBERNETES_SERVICE_HOST=") }),
				"DNSCONFIGURER_AGENT_CHILD="+strings.Join(args, "\n"))
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() { cmd.Wait(); close(exited) }()
			defer func() {
				cmd.Process.Signal(syscall.SIGTERM)
				<-exited
			}()
			var s nodesettings.Settings
			testkit.WaitFor(t, 20*time.Second, func() error {
				select {
				case <-exited:
					t.Fatalf("%s exited: %s", tc.args[0], stderr.String())
				default:
				}
				resp, err := http.Get("http://" + metrics + nodesettings.Path)
				if err != nil {
					return fmt.Errorf("no %s: %w", nodesettings.Path, err)
				}
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return fmt.Errorf("%s: %s", nodesettings.Path, resp.Status)
				}
				return json.NewDecoder(resp.Body).Decode(&s)
			})
			if s.ClusterDomain != tc.want || s.Kind != tc.args[0] {
				t.Errorf("%s %s: kind %q clusterDomain %q, want %q", tc.args[0], nodesettings.Path, s.Kind, s.ClusterDomain, tc.want)
			}
		})
	}
}
