package forward

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
)

// rawUpstream is an upstream on 127.0.0.1 that answers each query with the
// fuzzer's bytes: over UDP the datagram, then a valid reply (so the read
// ends without waiting for the deadline); over TCP the stream, then it
// closes the connection. With patchID the bytes get the query's ID first,
// so they are read as the reply and not skipped as noise.
type rawUpstream struct {
	addr    string
	payload atomic.Pointer[rawPayload]
}

type rawPayload struct {
	udp, tcp []byte
	patchID  bool
}

func startRawUpstream(tb testing.TB) *rawUpstream {
	tb.Helper()
	u := &rawUpstream{}
	u.payload.Store(&rawPayload{})
	pc, ln := testkit.ListenBoth(tb, "127.0.0.1:0")
	u.addr = pc.LocalAddr().String()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 4096)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			q := new(dns.Msg)
			if n < 12 || q.Unpack(buf[:n]) != nil {
				continue
			}
			p := u.payload.Load()
			_, _ = pc.WriteTo(withID(p.udp, q.Id, p.patchID, 0), from)
			r := new(dns.Msg)
			r.SetReply(q)
			if b, err := r.Pack(); err == nil {
				_, _ = pc.WriteTo(b, from)
			}
		}
	}()
	testkit.Accept(tb, ln, func(c net.Conn) {
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		var l [2]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return
		}
		b := make([]byte, binary.BigEndian.Uint16(l[:]))
		if _, err := io.ReadFull(c, b); err != nil || len(b) < 2 {
			return
		}
		p := u.payload.Load()
		_, _ = c.Write(withID(p.tcp, binary.BigEndian.Uint16(b), p.patchID, 2))
	})
	tb.Cleanup(func() {
		pc.Close()
		wg.Wait()
	})
	return u
}

// withID returns b with id at offset off when patch and b is long enough.
func withID(b []byte, id uint16, patch bool, off int) []byte {
	if !patch || len(b) < off+2 {
		return b
	}
	b = slices.Clone(b)
	binary.BigEndian.PutUint16(b[off:], id)
	return b
}

// FuzzUpstreamReply feeds arbitrary upstream replies to the Forwarder, a
// datagram over UDP and a stream over TCP (issue 27): Exchange never
// panics nor hangs, and a reply it returns has the query's ID and
// question, and is not truncated over UDP.
func FuzzUpstreamReply(f *testing.F) {
	for _, s := range upstreamReplySeeds() {
		f.Add(s.udp, s.tcp, s.patchID)
	}
	up := startRawUpstream(f)
	f.Fuzz(func(t *testing.T, udp, tcp []byte, patchID bool) {
		up.payload.Store(&rawPayload{udp: udp, tcp: tcp, patchID: patchID})
		fwd, err := New(Config{Upstreams: StaticUpstreams{up.addr}, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer fwd.Close()
		for _, o := range []dnsmsg.Origin{{}, {TCP: true}} {
			m := new(dns.Msg)
			m.SetQuestion("fuzz.example.", dns.TypeA)
			m.Id = 0x1234
			start := time.Now()
			r, err := fwd.Forward(context.Background(), m, o)
			if took := time.Since(start); took > 3*time.Second {
				t.Fatalf("Exchange took %v, over its 2s timeout", took)
			}
			if err != nil {
				continue
			}
			if r == nil || r.Id != m.Id || len(r.Question) > 1 {
				t.Fatalf("reply %v to %v", r, m)
			}
			if len(r.Question) == 1 {
				q := r.Question[0]
				if q.Qtype != dns.TypeA || q.Qclass != dns.ClassINET || !strings.EqualFold(q.Name, m.Question[0].Name) {
					t.Fatalf("reply to another question: %v", r)
				}
			}
			if !r.Response {
				t.Fatalf("reply without QR: %v", r)
			}
		}
	})
}

type upstreamReplySeed struct {
	udp, tcp []byte
	patchID  bool
}

func upstreamReplySeeds() []upstreamReplySeed {
	q := new(dns.Msg)
	q.SetQuestion("fuzz.example.", dns.TypeA)
	ok := new(dns.Msg)
	ok.SetReply(q)
	ok.Answer = []dns.RR{testkit.A("fuzz.example.", 30, "192.0.2.1")}
	okWire, _ := ok.Pack()
	tc := ok.Copy()
	tc.Truncated = true
	tcWire, _ := tc.Pack()
	other := ok.Copy()
	other.Question[0].Name = "other.example."
	otherWire, _ := other.Pack()
	stream := func(b []byte) []byte { return append(binary.BigEndian.AppendUint16(nil, uint16(len(b))), b...) }
	return []upstreamReplySeed{
		{okWire, stream(okWire), true},
		{tcWire, stream(okWire), true},
		{otherWire, stream(otherWire), true},
		{okWire[:20], stream(okWire)[:20], true},
		{nil, []byte{0xff, 0xff, 0, 0}, true},
		{okWire, stream(okWire), false},
	}
}

// FuzzPrepare feeds arbitrary client queries, their OPT options above all,
// to prepare (issue 27): it never panics nor modifies the query; the query
// sent has one OPT, of our size, whose options are the client's loop
// markers and relayed options in their order and then our marker; and a
// query that differs only by an option not relayed (a Client Subnet)
// coalesces with it.
func FuzzPrepare(f *testing.F) {
	for _, s := range prepareSeeds() {
		f.Add(s)
	}
	const relay = 65001
	fwd, err := New(Config{Upstreams: StaticUpstreams{"127.0.0.1:53"}, RelayOptions: []uint16{relay}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, wire []byte) {
		m := new(dns.Msg)
		if m.Unpack(wire) != nil {
			return
		}
		before := m.String()
		ob := fwd.prepare(m)
		up, mark, key := ob.msg, ob.mark, ob.key
		if m.String() != before {
			t.Fatalf("prepare modified the query:\n%v\nwas\n%v", m, before)
		}
		var opts []dns.EDNS0
		nopt := 0
		for _, rr := range up.Extra {
			if o, ok := rr.(*dns.OPT); ok {
				nopt++
				opts = o.Option
				if o.UDPSize() != dnsmsg.EDNSSize {
					t.Fatalf("OPT size %d, want %d", o.UDPSize(), dnsmsg.EDNSSize)
				}
			}
		}
		if nopt != 1 || len(opts) == 0 || opts[len(opts)-1] != mark {
			t.Fatalf("query sent has %d OPTs, options %v: want one ending with our marker", nopt, opts)
		}
		var want []uint16
		for _, rr := range m.Extra {
			if o, ok := rr.(*dns.OPT); ok {
				for _, e := range o.Option {
					if c := e.Option(); c == relay || c == fwd.cfg.LoopOptionCode {
						want = append(want, c)
					}
				}
			}
		}
		var got []uint16
		for _, e := range opts[:len(opts)-1] {
			got = append(got, e.Option())
		}
		if !slices.Equal(got, want) {
			t.Fatalf("options sent %v, want %v", got, want)
		}
		if key == "" || m.IsEdns0() == nil {
			return
		}
		m2 := m.Copy()
		o := m2.IsEdns0()
		o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.IPv4(203, 0, 113, 0).To4()})
		if key2 := fwd.prepare(m2).key; key2 != key {
			t.Fatalf("a Client Subnet option changed the coalescing key:\n%q\n%q", key, key2)
		}
	})
}

func prepareSeeds() [][]byte {
	var out [][]byte
	add := func(opts ...dns.EDNS0) {
		m := new(dns.Msg)
		m.SetQuestion("seed.example.", dns.TypeA)
		if opts != nil {
			m.SetEdns0(4096, true)
			m.IsEdns0().Option = opts
		}
		if b, err := m.Pack(); err == nil {
			out = append(out, b)
		}
	}
	add()
	add([]dns.EDNS0{}...)
	add(&dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.IPv4(198, 51, 100, 0).To4()})
	add(&dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"}, &dns.EDNS0_NSID{Code: dns.EDNS0NSID})
	add(&dns.EDNS0_LOCAL{Code: 65001, Data: []byte("ns.svc.cluster.local")}, &dns.EDNS0_LOCAL{Code: DefaultLoopOptionCode, Data: make([]byte, 12)})
	add(&dns.EDNS0_PADDING{Padding: make([]byte, 8)}, &dns.EDNS0_LOCAL{Code: 65010, Data: []byte{1}}, &dns.EDNS0_TCP_KEEPALIVE{Code: dns.EDNS0TCPKEEPALIVE})
	return out
}
