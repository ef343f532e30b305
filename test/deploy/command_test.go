package deploy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"

	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/netns"
)

func TestMain(m *testing.M) { os.Exit(buildbin.Main(m)) }

// TestCommandFlags: the binary knows every flag the manifests pass it.
// Each container's arguments are parsed up to a final -h, which stops the
// command before it does anything; an unknown or malformed flag fails the
// parse first.
func TestCommandFlags(t *testing.T) {
	o := loadSources(t)
	bin := buildbin.Dnsconfigurer(t)
	n := 0
	for _, w := range o.workloads() {
		for _, c := range w.spec.Containers {
			if len(c.Args) == 0 {
				t.Errorf("%s %s container %s: no args (the image's entrypoint is the binary: args start with the subcommand)", w.kind, w.name, c.Name)
				continue
			}
			n++
			// Help exits 0 or 2 depending on the subcommand; a bad flag
			// is told by the flag package's messages.
			out, _ := exec.CommandContext(t.Context(), bin, append(c.Args, "-h")...).CombinedOutput()
			if !strings.Contains(string(out), "usage:") || strings.Contains(string(out), "provided but not defined") ||
				strings.Contains(string(out), "invalid value") || strings.Contains(string(out), "bad flag syntax") {
				t.Errorf("%s %s: dnsconfigurer %s -h:\n%s", w.kind, w.name, strings.Join(c.Args, " "), out)
			}
		}
	}
	if n != 4 {
		t.Errorf("checked %d dnsconfigurer containers, want 4", n)
	}
}

// TestNodeLocalDaemonSet runs the node-local DaemonSet's pod in a network
// namespace standing in for a node: its init container's script (with
// iproute2's ip, twice, as after a restart), then the container's exact
// arguments, with a stub cluster DNS at the --cluster-upstream address.
// The probes' URLs answer 200 and queries to 169.254.20.10 over UDP and TCP
// are answered through the stub. Needs root and ip(8).
func TestNodeLocalDaemonSet(t *testing.T) {
	netns.Require(t)
	o := loadSources(t)
	w := o.workload(t, "DaemonSet", "dnsconfigurer-node-local-dns")
	if len(w.spec.InitContainers) != 1 || len(w.spec.Containers) != 1 {
		t.Fatalf("node-local: %d init containers and %d containers, want 1 each", len(w.spec.InitContainers), len(w.spec.Containers))
	}
	ic, c := w.spec.InitContainers[0], w.spec.Containers[0]
	bin := buildbin.Dnsconfigurer(t)
	ns := netns.New(t)
	ns.SetResolvConf(t, "nameserver 192.0.2.53\nsearch node.example\n")

	// The init container, twice (as after a restart): the address lands
	// on the dummy interface nodelocaldns, or on lo where the kernel has
	// no dummy link type (no module to load, as in some sandboxes).
	if len(ic.Command) < 3 || ic.Command[0] != "/bin/sh" || ic.Command[1] != "-c" {
		t.Fatalf("node-local init container: command %q, want /bin/sh -c SCRIPT", ic.Command)
	}
	dev := "nodelocaldns"
	if out, err := ns.Exec(t.Context(), "ip", "link", "add", "dummyprobe", "type", "dummy").CombinedOutput(); err != nil {
		t.Logf("this kernel has no dummy interfaces (%v: %s): %s must go on lo", err, strings.TrimSpace(string(out)), nodeLocalIP)
		dev = "lo"
	} else {
		ns.IP(t, "link", "del", "dummyprobe")
	}
	for i := range 2 {
		if out, err := ns.Exec(t.Context(), "/bin/sh", "-c", ic.Command[2]).CombinedOutput(); err != nil {
			t.Fatalf("init script, run %d: %v\n%s", i+1, err, out)
		}
	}
	out, err := ns.Exec(t.Context(), "ip", "-o", "addr", "show", "dev", dev).CombinedOutput()
	if err != nil || strings.Count(string(out), " "+nodeLocalIP+"/32 ") != 1 {
		t.Fatalf("%s after two runs of the init script: %v\n%s", dev, err, out)
	}

	// The cluster DNS Service address, answered by a stub.
	upstream, _ := flag(c.Args, "cluster-upstream")
	host, _, err := net.SplitHostPort(upstream)
	if err != nil {
		t.Fatalf("--cluster-upstream %q: %v", upstream, err)
	}
	ns.AddAddress(t, host+"/32")
	const name, answer = "kubernetes.default.svc.cluster.local.", "10.96.0.1"
	stub := dns.HandlerFunc(func(rw dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg).SetReply(r)
		if q := r.Question[0]; strings.EqualFold(q.Name, name) && q.Qtype == dns.TypeA {
			rr, _ := dns.NewRR(name + " 5 IN A " + answer)
			m.Answer = append(m.Answer, rr)
		} else {
			m.Rcode = dns.RcodeNameError
		}
		rw.WriteMsg(m)
	})
	for _, proto := range []string{"udp", "tcp"} {
		srv := &dns.Server{Net: proto, Handler: stub}
		err := ns.Do(func() error {
			if proto == "udp" {
				pc, err := net.ListenPacket("udp", upstream)
				srv.PacketConn = pc
				return err
			}
			l, err := net.Listen("tcp", upstream)
			srv.Listener = l
			return err
		})
		if err != nil {
			t.Fatalf("stub cluster DNS on %s/%s: %v", upstream, proto, err)
		}
		go srv.ActivateAndServe()
		t.Cleanup(func() { srv.Shutdown() })
	}

	// The container.
	ctx, cancel := context.WithCancel(t.Context())
	cmd := ns.Exec(ctx, bin, c.Args...)
	logs, err := os.Create(filepath.Join(t.TempDir(), "node-local.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logs.Name())
			t.Logf("dnsconfigurer %s:\n%s", strings.Join(c.Args, " "), b)
		}
	})

	probe := func(p *corev1.Probe) (int, error) {
		cp, ok := port(c, p.HTTPGet.Port.StrVal)
		if !ok {
			return 0, fmt.Errorf("no port %q", p.HTTPGet.Port.StrVal)
		}
		return httpGet(ns, net.JoinHostPort(p.HTTPGet.Host, fmt.Sprint(cp.ContainerPort)), p.HTTPGet.Path)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, err := probe(c.ReadinessProbe)
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readiness probe %s: %d %v", c.ReadinessProbe.HTTPGet.Path, code, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, err := probe(c.LivenessProbe); code != http.StatusOK {
		t.Errorf("liveness probe %s: %d %v", c.LivenessProbe.HTTPGet.Path, code, err)
	}

	listen, _ := flag(c.Args, "listen")
	for _, proto := range []string{"udp", "tcp"} {
		var r *dns.Msg
		err := ns.Do(func() error {
			var err error
			r, _, err = (&dns.Client{Net: proto, Timeout: 2 * time.Second}).Exchange(new(dns.Msg).SetQuestion(name, dns.TypeA), listen)
			return err
		})
		if err != nil {
			t.Errorf("%s query to %s: %v", proto, listen, err)
			continue
		}
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || !strings.HasSuffix(r.Answer[0].String(), "\t"+answer) {
			t.Errorf("%s query to %s: rcode %s, answer %v; want %s from the stub cluster DNS", proto, listen, dns.RcodeToString[r.Rcode], r.Answer, answer)
		}
	}
}

// httpGet asks for path at addr from inside ns with a plain HTTP/1.0
// request (the connection is opened on a thread in the namespace) and
// returns the status code.
func httpGet(ns *netns.NS, addr, path string) (int, error) {
	var conn net.Conn
	err := ns.Do(func() error {
		var err error
		conn, err = net.DialTimeout("tcp", addr, time.Second)
		return err
	})
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", path, addr); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	if resp.StatusCode == 0 {
		return 0, errors.New("no status")
	}
	return resp.StatusCode, nil
}
