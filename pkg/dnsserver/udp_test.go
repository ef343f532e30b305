package dnsserver_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/goleak"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
)

// paths are the two ways a socket is read: batches (recvmmsg/sendmmsg)
// and one datagram at a time (where batching is unavailable).
var paths = []struct {
	name        string
	perDatagram bool
}{{"batch", false}, {"per-datagram", true}}

func newServer(h dns.Handler, sockets int, perDatagram bool) *dnsserver.Server {
	srv := &dnsserver.Server{Handler: h, UDPSockets: sockets}
	if perDatagram {
		dnsserver.PerDatagram(srv)
	}
	return srv
}

// TestUDPSockets: UDPSockets sockets bind the same address (without
// ReusePort), and each serves: queries from many source ports are all
// answered, from the wire and through ServeDNS, and the kernel spread them
// over every socket. A second server on the address fails at its TCP bind
// and takes none of the first one's UDP datagrams.
func TestUDPSockets(t *testing.T) {
	const sockets = 4
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			h := &wireHandler{}
			srv := newServer(h, sockets, p.perDatagram)
			addr := startServer(t, srv)
			if got := len(dnsserver.SocketReads(srv)); got != sockets {
				t.Fatalf("%d UDP sockets, want %d", got, sockets)
			}

			second := &dnsserver.Server{Handler: countingA(net.IPv4(192, 0, 2, 9), new(atomic.Int64)), UDPSockets: sockets}
			if err := startAt(t, second, addr); err == nil {
				t.Fatalf("a second server without ReusePort bound %s", addr)
			}

			// Each query from a socket of its own: a new source port.
			const clients = 200
			var wg sync.WaitGroup
			errs := make(chan error, clients)
			for i := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					name := "slow.example."
					if i%2 == 0 {
						name = "fast.example."
					}
					c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
					r, _, err := c.Exchange(new(dns.Msg).SetQuestion(name, dns.TypeA), addr)
					switch {
					case err != nil:
						errs <- fmt.Errorf("%s: %w", name, err)
					case len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "192.0.2.1":
						errs <- fmt.Errorf("%s: %v", name, r)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if w, s := h.wired.Load(), h.served.Load(); w != clients/2 || s != clients/2 {
				t.Errorf("answered %d from the wire and %d by ServeDNS, want %d each", w, s, clients/2)
			}
			reads := dnsserver.SocketReads(srv)
			var sum uint64
			for i, n := range reads {
				sum += n
				if n == 0 {
					t.Errorf("socket %d read nothing of %d queries from distinct ports: %v", i, clients, reads)
				}
			}
			if sum != clients {
				t.Errorf("the sockets read %d datagrams, want %d: %v", sum, clients, reads)
			}
			t.Logf("datagrams per socket: %v", reads)
		})
	}
}

// TestUDPSocketsDefault: UDPSockets 0 is GOMAXPROCS sockets; 1 is one
// socket without SO_REUSEPORT, which a second server cannot join.
func TestUDPSocketsDefault(t *testing.T) {
	srv := &dnsserver.Server{Handler: &wireHandler{}}
	startServer(t, srv)
	if got, want := len(dnsserver.SocketReads(srv)), runtimeProcs(); got != want {
		t.Errorf("UDPSockets 0: %d sockets, want GOMAXPROCS (%d)", got, want)
	}
	one := &dnsserver.Server{Handler: &wireHandler{}, UDPSockets: 1}
	addr := startServer(t, one)
	pc, err := net.ListenPacket("udp", addr)
	if err == nil {
		pc.Close()
		t.Errorf("a plain UDP socket bound %s next to a server of one socket", addr)
	}
}

// rawExchange sends every datagram of qs from one socket at once, then
// reads the replies until want of them came or wait passed; it returns them
// by ID (every query of a test has its own).
func rawExchange(t *testing.T, addr string, qs [][]byte, want int, wait time.Duration) map[uint16][]byte {
	t.Helper()
	return rawExchangeSent(t, addr, qs, want, wait, nil)
}

// rawExchangeSent is rawExchange calling sent, when set, once every
// datagram is written.
func rawExchangeSent(t *testing.T, addr string, qs [][]byte, want int, wait time.Duration, sent func()) map[uint16][]byte {
	t.Helper()
	conn, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range qs {
		if _, err := conn.Write(q); err != nil {
			t.Fatal(err)
		}
	}
	if sent != nil {
		sent()
	}
	got := map[uint16][]byte{}
	buf := make([]byte, 65535)
	deadline := time.Now().Add(wait)
	for len(got) < want {
		_ = conn.SetReadDeadline(deadline)
		n, err := conn.Read(buf)
		if err != nil {
			break
		}
		if n >= 2 {
			got[binary.BigEndian.Uint16(buf)] = append([]byte(nil), buf[:n]...)
		}
	}
	return got
}

// malformed are datagrams miekg/dns rejects, each with the ID in its
// first two bytes, and whether it answers them.
func malformed() []struct {
	name   string
	q      []byte
	answer bool
} {
	q := func(id uint16, f func(*dns.Msg)) []byte {
		m := new(dns.Msg).SetQuestion("bad.example.", dns.TypeA)
		m.Id = id
		if f != nil {
			f(m)
		}
		b, err := m.Pack()
		if err != nil {
			panic(err)
		}
		return b
	}
	twoQuestions := q(0x7001, func(m *dns.Msg) { m.Question = append(m.Question, m.Question[0]) })
	update := q(0x7002, func(m *dns.Msg) { m.Opcode = dns.OpcodeUpdate })
	response := q(0x7003, func(m *dns.Msg) { m.Response = true })
	badName := q(0x7004, nil)
	badName[12] = 0xc0 // a compression pointer to itself: does not unpack
	badName[13] = 12
	cutRR := q(0x7005, func(m *dns.Msg) { m.SetEdns0(1232, false) })
	cutRR = cutRR[:len(cutRR)-3] // the OPT record cut short
	// A query of 5000 bytes: the server reads 4096 of it, and the rest of
	// its padding option is missing.
	oversize := q(0x7006, func(m *dns.Msg) {
		m.SetEdns0(1232, false)
		o := m.IsEdns0()
		o.Option = append(o.Option, &dns.EDNS0_PADDING{Padding: make([]byte, 5000-12-16-4-11-4)})
	})
	return []struct {
		name   string
		q      []byte
		answer bool
	}{
		{"two questions", twoQuestions, true},
		{"UPDATE", update, true},
		{"a response", response, false},
		{"a name that does not unpack", badName, true},
		{"a record cut short", cutRR, true},
		{"5000 bytes", oversize, true},
		{"garbage", bytes.Repeat([]byte{0x70, 0x07, 0xff}, 20), false},
		{"short", []byte{0x70, 0x08, 1}, false},
	}
}

// TestUDPBatch: a burst of more datagrams than a batch, wire answers,
// ServeDNS queries, malformed and oversize datagrams mixed, gets every
// reply, on both paths: each good query its answer, each malformed one
// the reply miekg/dns's own server gives it (FORMERR or NOTIMP, the same
// bytes) or none when miekg/dns gives none. Nothing stalls the batch.
func TestUDPBatch(t *testing.T) {
	// miekg/dns's answers to the malformed datagrams, the reference.
	// It reads 4096 bytes of a datagram, as the server did with it.
	ref := &dns.Server{PacketConn: listenUDP(t), Handler: answerA, UDPSize: 4096}
	started := make(chan struct{})
	ref.NotifyStartedFunc = func() { close(started) }
	go func() { _ = ref.ActivateAndServe() }()
	<-started
	defer ref.Shutdown()
	bad := malformed()
	var badQs [][]byte
	wantBad := 0
	for _, b := range bad {
		badQs = append(badQs, b.q)
		if b.answer {
			wantBad++
		}
	}
	refReplies := rawExchange(t, ref.PacketConn.LocalAddr().String(), badQs, wantBad, 2*time.Second)
	if len(refReplies) != wantBad {
		t.Fatalf("miekg/dns answered %d malformed datagrams, the test expects %d", len(refReplies), wantBad)
	}

	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			// The first wire answer waits until the burst is sent, so
			// the batches that follow find it queued, however the
			// scheduler runs the reader.
			h := &wireHandler{gate: make(chan struct{})}
			srv := newServer(h, 1, p.perDatagram)
			addr := startServer(t, srv)
			var qs [][]byte
			good := map[uint16]string{}
			for i := range 100 {
				name := fmt.Sprintf("fast.q%d.example.", i)
				if i%3 == 0 {
					name = fmt.Sprintf("slow.q%d.example.", i)
				}
				m := new(dns.Msg).SetQuestion(name, dns.TypeA)
				m.Id = uint16(i + 1)
				b, _ := m.Pack()
				qs = append(qs, b)
				good[m.Id] = m.Question[0].Name
				if i%10 == 5 {
					qs = append(qs, bad[(i/10)%len(bad)].q)
				}
			}
			for _, b := range bad { // every one at least once
				qs = append(qs, b.q)
			}
			replies := rawExchangeSent(t, addr, qs, len(good)+wantBad, 5*time.Second, func() { close(h.gate) })
			for id, name := range good {
				r, ok := replies[id]
				if !ok {
					t.Errorf("query %d (%s): no reply", id, name)
					continue
				}
				var m dns.Msg
				if err := m.Unpack(r); err != nil || len(m.Answer) != 1 || m.Question[0].Name != name {
					t.Errorf("query %d (%s): %v %v", id, name, &m, err)
				}
			}
			for _, b := range bad {
				id := binary.BigEndian.Uint16(b.q)
				got, want := replies[id], refReplies[id]
				if !bytes.Equal(got, want) {
					t.Errorf("%s: reply %x, miekg/dns's %x", b.name, got, want)
				}
			}
			if extra := len(replies) - len(good) - wantBad; extra != 0 {
				t.Errorf("%d replies to datagrams miekg/dns does not answer", extra)
			}
			// Every good query was read; the wire ones answered there.
			if w := h.wired.Load(); w != 66 {
				t.Errorf("answered %d from the wire, want 66", w)
			}
			// Counted once their batch is done, after its replies left.
			headers := uint64(0)
			for _, q := range qs {
				if len(q) >= 12 {
					headers++
				}
			}
			testkit.WaitEqual(t, 5*time.Second, "datagrams read", func() uint64 { return dnsserver.SocketReads(srv)[0] }, headers)
			reads, batches := dnsserver.SocketReads(srv)[0], dnsserver.SocketBatches(srv)[0]
			t.Logf("%d datagrams of a header or more (and %d shorter) in %d reads", reads, uint64(len(qs))-reads, batches)
			if p.perDatagram && batches != uint64(len(qs)) || !p.perDatagram && reads < 2*batches {
				t.Errorf("%d datagrams in %d reads: want one a read one at a time, several a read in batches", reads, batches)
			}
		})
	}
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

func listenUDP(t *testing.T) net.PacketConn {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return pc
}

// TestUDPWildcardSource: on a wildcard address a reply leaves from the
// address its query was sent to, from the wire and through ServeDNS, on
// both paths: the client's connected socket takes replies from there only.
func TestUDPWildcardSource(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			h := &wireHandler{}
			srv := newServer(h, 2, p.perDatagram)
			srv.Listen = []string{"0.0.0.0:0"}
			_, port, _ := net.SplitHostPort(testkit.StartServer(t, srv))
			targets := []string{"127.0.0.1", "127.0.0.2"}
			if pc, err := net.ListenPacket("udp", "[::1]:0"); err == nil {
				pc.Close()
				targets = append(targets, "::1")
			}
			for _, ip := range targets {
				for _, name := range []string{"fast.example.", "slow.example."} {
					exchange(t, "udp", net.JoinHostPort(ip, port), name)
				}
			}
		})
	}
}

// TestUDPShutdown: Shutdown waits for the queries being served (their
// replies still leave), ends the reads at once on every socket, and leaves
// no goroutine; a second Start serves again.
func TestUDPShutdown(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			release := make(chan struct{})
			var held atomic.Int64
			srv := newServer(holding(release, &held), 3, p.perDatagram)
			srv.Listen = []string{"127.0.0.1:0"}
			if err := srv.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			addr := srv.Addrs()[0]
			exchange(t, "udp", addr, "a.example.")
			answered := make(chan error, 1)
			go func() {
				c := &dns.Client{Net: "udp", Timeout: 5 * time.Second}
				_, _, err := c.Exchange(new(dns.Msg).SetQuestion("hold.example.", dns.TypeA), addr)
				answered <- err
			}()
			testkit.WaitEqual(t, 5*time.Second, "held", held.Load, 1)
			done := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				done <- srv.Shutdown(ctx)
			}()
			select {
			case err := <-done:
				t.Fatalf("Shutdown returned (%v) with a query being served", err)
			case <-time.After(100 * time.Millisecond):
			}
			close(release)
			if err := <-done; err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			if err := <-answered; err != nil {
				t.Errorf("the query served during Shutdown: %v", err)
			}

			// Started again, on the same port.
			srv.Listen = []string{addr}
			if err := srv.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			exchange(t, "udp", addr, "b.example.")
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestUDPWorkers: a datagram for ServeDNS goes to a goroutine that
// served one before and waits, when one does; at most MaxIdleWorkers wait
// once a burst is over; and Shutdown ends them (goleak).
func TestUDPWorkers(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	release := make(chan struct{})
	var held atomic.Int64
	srv := newServer(holding(release, &held), 1, false)
	srv.Listen = []string{"127.0.0.1:0"}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	addr := srv.Addrs()[0]
	if n := dnsserver.IdleWorkers(srv); n != 0 {
		t.Fatalf("%d goroutines wait before any query", n)
	}

	// A burst of held queries: one goroutine each, then MaxIdleWorkers
	// of them stay.
	const burst = dnsserver.MaxIdleWorkers + 24
	errs := make(chan error, burst)
	ask := func(name string) {
		c := &dns.Client{Net: "udp", Timeout: 5 * time.Second}
		_, _, err := c.Exchange(new(dns.Msg).SetQuestion(name, dns.TypeA), addr)
		errs <- err
	}
	for range burst {
		go ask("hold.example.")
	}
	testkit.WaitEqual(t, 5*time.Second, "held", held.Load, burst)
	close(release)
	for range burst {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitEqual(t, 5*time.Second, "idle workers", func() int { return dnsserver.IdleWorkers(srv) }, dnsserver.MaxIdleWorkers)

	// The next datagram goes to one of them: one fewer waits while it is
	// served, and it waits again after. A goroutine counts itself idle a
	// moment before it waits on the channel; a datagram that comes in that
	// moment gets a new goroutine, which is right. So a few tries are
	// allowed; a server that never hands one to a waiting goroutine fails
	// them all.
	reused := false
	for try := 0; try < 5 && !reused; try++ {
		release2 := make(chan struct{})
		srv.SetHandler(holding(release2, &held))
		before := held.Load()
		go ask("hold.example.")
		testkit.WaitEqual(t, 5*time.Second, "held", held.Load, before+1)
		n := dnsserver.IdleWorkers(srv)
		reused = n == dnsserver.MaxIdleWorkers-1
		if !reused {
			t.Logf("try %d: %d goroutines wait while one serves, want %d", try, n, dnsserver.MaxIdleWorkers-1)
		}
		close(release2)
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		testkit.WaitEqual(t, 5*time.Second, "idle workers", func() int { return dnsserver.IdleWorkers(srv) }, dnsserver.MaxIdleWorkers)
	}
	if !reused {
		t.Errorf("no datagram of 5 went to a waiting goroutine")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestUDPShutdownBounded: a query that is never answered does not hold
// Shutdown past its context; the sockets are closed all the same.
func TestUDPShutdownBounded(t *testing.T) {
	release := make(chan struct{})
	var held atomic.Int64
	h := dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		held.Add(1)
		<-release
	})
	srv := newServer(h, 2, false)
	addr := startServer(t, srv)
	defer close(release)
	conn, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	b, _ := new(dns.Msg).SetQuestion("hold.example.", dns.TypeA).Pack()
	if _, err := conn.Write(b); err != nil {
		t.Fatal(err)
	}
	testkit.WaitEqual(t, 5*time.Second, "held", held.Load, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := srv.Shutdown(ctx); err == nil {
		t.Fatal("Shutdown returned nil with a query held past its context")
	}
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatalf("the address is still bound after Shutdown: %v", err)
	}
	pc.Close()
}

// TestListenBothWildcards: "0.0.0.0:P" and "[::]:P" together bind (Go
// would make each a socket of both families, and the second bind fail)
// and split the families: IPv4 queries reach the first, IPv6 ones the
// second, over UDP and TCP, on both read paths.
func TestListenBothWildcards(t *testing.T) {
	if pc, err := net.ListenPacket("udp6", "[::1]:0"); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	} else {
		pc.Close()
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			srv := newServer(answerA, 1, p.perDatagram)
			_, port, _ := net.SplitHostPort(testkit.FreeAddr(t, "::"))
			srv.Listen = []string{"0.0.0.0:" + port, "[::]:" + port}
			testkit.StartServer(t, srv)
			for _, ip := range []string{"127.0.0.1", "::1", "127.0.0.1"} {
				for _, network := range []string{"udp", "tcp"} {
					exchange(t, network, net.JoinHostPort(ip, port), "a.example.")
				}
			}
			for l, want := range map[string]float64{"0.0.0.0:" + port: 4, "[::]:" + port: 2} {
				if got := metric(t, srv, `dnsconfigurer_dnsserver_listen_queries_total{listen="`+l+`"}`); got != want {
					t.Errorf("listen %s answered %v queries, want %v", l, got, want)
				}
			}
		})
	}
}
