package containerd_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
)

// TestPodResolves shows the path issue 9 needs: a server in the harness's
// namespace on a Service-like address, routed to from the pods, answering
// the Go stub resolver in a container, with the queries counted.
func TestPodResolves(t *testing.T) {
	clusterDNS := netip.MustParseAddr("10.96.0.10")
	h := containerd.Start(t, containerd.Options{Routes: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.AddAddress(ctx, netip.PrefixFrom(clusterDNS, 32)); err != nil {
		t.Fatal(err)
	}
	srv := &stubDNS{answers: map[string]netip.Addr{
		"web.ns.svc.cluster.local.": netip.MustParseAddr("10.96.3.4"),
		"example.org.":              netip.MustParseAddr("192.0.2.7"),
	}}
	var conn net.PacketConn
	if err := h.Do(func() (err error) {
		conn, err = net.ListenPacket("udp", netip.AddrPortFrom(clusterDNS, 53).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	go srv.serve(conn)

	c := h.Client()
	pod, err := c.RunPod(ctx, containerd.PodSpec{Name: "client", Namespace: "ns", Hostname: "client", DNS: &runtimeapi.DNSConfig{
		Servers:  []string{clusterDNS.String()},
		Searches: []string{"ns.svc.cluster.local", "svc.cluster.local", "cluster.local"},
		Options:  []string{"ndots:5", "timeout:1", "attempts:1"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctr, err := c.StartContainer(ctx, pod, "main")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, want string
		queries    int
	}{
		{"web", "10.96.3.4", 1},         // first search suffix answers
		{"example.org", "192.0.2.7", 4}, // three NXDOMAINs, then as is
	} {
		srv.reset()
		got, err := c.Testbin(ctx, ctr.ID, "lookup", tt.name, "A")
		if err != nil {
			t.Fatalf("lookup %s: %v", tt.name, err)
		}
		if strings.TrimSpace(got) != tt.want {
			t.Errorf("lookup %s = %q, want %q", tt.name, got, tt.want)
		}
		if n := srv.count(); n != tt.queries {
			t.Errorf("lookup %s: server got %d queries (%v), want %d", tt.name, n, srv.seen(), tt.queries)
		}
	}

	// Ports coming and going (pods) must not change the bridge's MAC: a
	// running pod's ARP entry for the bridge address would go stale, and
	// its packets would be lost for about 30 s (a CI failure of the chain
	// test). A port with the lowest possible MAC is what changes the MAC
	// of a bridge that has none of its own.
	ipn := func(args ...string) string {
		out, err := exec.CommandContext(ctx, "ip", append([]string{"-n", h.NetNS}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	mac := func() string {
		f := strings.Fields(ipn("-o", "link", "show", containerd.BridgeName))
		for i, w := range f {
			if w == "link/ether" && i+1 < len(f) {
				return f[i+1]
			}
		}
		t.Fatalf("no MAC in %q", f)
		return ""
	}
	before := mac()
	ipn("link", "add", "lowmac0", "address", "00:00:00:00:00:01", "type", "veth", "peer", "name", "lowmac1")
	ipn("link", "set", "lowmac0", "master", containerd.BridgeName, "up")
	ipn("link", "set", "lowmac1", "up")
	if after := mac(); after != before {
		t.Errorf("bridge MAC changed from %s to %s when a port was added", before, after)
	}
	ipn("link", "del", "lowmac0")
	if after := mac(); after != before {
		t.Errorf("bridge MAC changed from %s to %s when a port was removed", before, after)
	}
	srv.reset()
	if got, err := c.Testbin(ctx, ctr.ID, "lookup", "web", "A"); err != nil || strings.TrimSpace(got) != "10.96.3.4" {
		t.Errorf("lookup web after other pods came and went = %q, %v", got, err)
	}
}

// stubDNS answers A questions from a map and NXDOMAIN otherwise. It is
// just enough DNS for a stub resolver; the project's server is elsewhere.
type stubDNS struct {
	answers map[string]netip.Addr
	mu      sync.Mutex
	names   []string
}

func (s *stubDNS) reset()     { s.mu.Lock(); s.names = nil; s.mu.Unlock() }
func (s *stubDNS) count() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.names) }
func (s *stubDNS) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.names...)
}

func (s *stubDNS) serve(conn net.PacketConn) {
	buf := make([]byte, 1500)
	for {
		n, from, err := conn.ReadFrom(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		if resp, ok := s.answer(buf[:n]); ok {
			_, _ = conn.WriteTo(resp, from)
		}
	}
}

// answer builds the reply to a one-question query.
func (s *stubDNS) answer(q []byte) ([]byte, bool) {
	if len(q) < 12 || binary.BigEndian.Uint16(q[4:6]) != 1 {
		return nil, false
	}
	var labels []string
	off := 12
	for {
		if off >= len(q) {
			return nil, false
		}
		l := int(q[off])
		off++
		if l == 0 {
			break
		}
		if l > 63 || off+l > len(q) {
			return nil, false
		}
		labels = append(labels, strings.ToLower(string(q[off:off+l])))
		off += l
	}
	if off+4 > len(q) {
		return nil, false
	}
	qtype := binary.BigEndian.Uint16(q[off : off+2])
	name := strings.Join(labels, ".") + "."
	s.mu.Lock()
	s.names = append(s.names, name)
	s.mu.Unlock()

	resp := append([]byte(nil), q[:off+4]...)
	flags := uint16(0x8400) | binary.BigEndian.Uint16(q[2:4])&0x0100 // QR, AA, copy RD
	binary.BigEndian.PutUint16(resp[6:8], 0)                         // ANCOUNT
	binary.BigEndian.PutUint16(resp[8:10], 0)                        // NSCOUNT
	binary.BigEndian.PutUint16(resp[10:12], 0)                       // ARCOUNT
	addr, ok := s.answers[name]
	switch {
	case !ok:
		flags |= 3 // NXDOMAIN
	case qtype == 1 && addr.Is4():
		binary.BigEndian.PutUint16(resp[6:8], 1)
		resp = append(resp, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 30, 0, 4)
		resp = append(resp, addr.AsSlice()...)
	}
	binary.BigEndian.PutUint16(resp[2:4], flags)
	return resp, true
}
