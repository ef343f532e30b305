package cluster

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
)

// External answers of the upstream stub: every name under the external
// zones has these addresses (documentation ranges: nothing is ever sent to
// them); every other name does not exist, as the internet's answer for a
// pod's search-list candidates such as "web.node.test" would be.
var (
	ExternalA    = netip.MustParseAddr("192.0.2.10")
	ExternalAAAA = netip.MustParseAddr("2001:db8::10")
)

// Stub is the node's upstream resolver (the nameserver of the node's
// resolv.conf), on NodeIP:53 over UDP and TCP inside the namespace. It
// answers A and AAAA questions for names in ExternalZones with ExternalA
// and ExternalAAAA, and NXDOMAIN for every other name.
type Stub struct {
	servers []*dns.Server
	zones   []string
	a, aaaa netip.Addr
}

// startStub starts the node's upstream stub on port 53 of the first node's
// addresses.
func startStub(h *containerd.Harness, addrs ...netip.Addr) (*Stub, error) {
	s, err := startStubAt(h, 53, ExternalZones, ExternalA, ExternalAAAA)
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if a == NodeIP {
			continue
		}
		if err := s.listen(h, netip.AddrPortFrom(a, 53)); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// startStubAt starts a stub on NodeIP:port that answers A and AAAA
// questions for names under zones with a and aaaa, and NXDOMAIN for every
// other name.
func startStubAt(h *containerd.Harness, port int, zones []string, a, aaaa netip.Addr) (*Stub, error) {
	s := &Stub{zones: zones, a: a, aaaa: aaaa}
	if err := s.listen(h, netip.AddrPortFrom(NodeIP, uint16(port))); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// listen serves the stub on UDP and TCP at ap too.
func (s *Stub) listen(h *containerd.Harness, ap netip.AddrPort) error {
	addr := ap.String()
	var pc net.PacketConn
	var l net.Listener
	if err := h.Do(func() error {
		var err error
		if pc, err = net.ListenPacket("udp", addr); err != nil {
			return err
		}
		l, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		if pc != nil {
			pc.Close()
		}
		return err
	}
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: s}, {Listener: l, Handler: s}} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go func() { _ = srv.ActivateAndServe() }()
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			return fmt.Errorf("stub on %s did not start", addr)
		}
		s.servers = append(s.servers, srv)
	}
	return nil
}

// ServeDNS answers one question.
func (s *Stub) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(r)
	m.RecursionAvailable = true
	if len(r.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		_ = w.WriteMsg(m)
		return
	}
	q := r.Question[0]
	name := strings.ToLower(q.Name)
	switch {
	case !inZones(s.zones, name):
		m.Rcode = dns.RcodeNameError
	case q.Qtype == dns.TypeA:
		m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}, A: s.a.AsSlice()})
	case q.Qtype == dns.TypeAAAA:
		m.Answer = append(m.Answer, &dns.AAAA{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: 30}, AAAA: s.aaaa.AsSlice()})
	}
	_ = w.WriteMsg(m)
}

// ExternalZones are the zones the stub has names in.
var ExternalZones = []string{"example.com.", "example.org."}

func inZones(zones []string, name string) bool {
	for _, z := range zones {
		if dns.IsSubDomain(z, name) {
			return true
		}
	}
	return false
}

// Close stops the stub.
func (s *Stub) Close() {
	for _, srv := range s.servers {
		_ = srv.Shutdown()
	}
}
