// Command dns is the benchmark harness of the cluster DNS server
// (`dnsconfigurer serve`). It writes manifests for 10,000 ClusterIP
// Services in 100 namespaces plus 100 headless Services with 20 endpoints
// each, starts the server on them and, in the same run, a minimal miekg/dns
// responder answering from a fixed map (the ceiling for this machine), and
// drives both with a closed-loop UDP load generator on loopback:
//
//	(a) A queries for existing Services;
//	(b) the ndots:5 search-miss mix: a pod resolving "svc.ns" (one miss,
//	    one hit) and an external name (three in-zone misses), 80% NXDOMAIN;
//	(c) SRV queries, half ClusterIP (1 record), half headless (20 records
//	    and 20 additional addresses, EDNS0 1232);
//	(d) the miss mix of (b) over 87,000 distinct questions, every one in the
//	    cluster zone: more than the 16 MiB reply cache holds;
//	(f) A queries for 100 external names, forwarded to a stub upstream in
//	    this process and then answered from the answer cache.
//
// With -base-bin a second dnsconfigurer (an earlier build, say) is driven
// in the same alternating rounds, so a change is measured before and after
// against the same ceiling in one run.
//
// With -coredns, CoreDNS 1.15 is a third target: kubeadm's Corefile with
// multisocket. Its kubernetes plugin reads only from an API server, so the
// objects go into a real etcd and kube-apiserver (test/apiserver) through
// client-go, and serve watches the same API server (--kubeconfig) instead of
// reading manifests. Before the rounds of each case, a sample of its
// queries is asked of every target and the answers compared with the
// ceiling's.
//
// It prints queries per second, p50/p99 latency, the responder's CPU time per
// answered query (utime+stime from /proc/<pid>/stat, since the load
// generator shares the cores), its RSS (/proc/<pid>/status), and the ratio of
// each server's QPS and CPU per query to the ceiling's and, with -coredns,
// dnsconfigurer's to CoreDNS's.
//
// Run: go run ./test/bench/dns [-duration 5s] [-c 16] [-bin path/to/dnsconfigurer] [-base-bin path/to/older] [-serve-args "--udp-sockets 1"] [-coredns]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

const (
	zone        = "cluster.local."
	namespaces  = 100
	perNS       = 100 // ClusterIP Services per namespace: 10,000 in all
	headless    = 100
	endpointsHL = 20
)

func svcName(i int) (name, ns string) {
	return fmt.Sprintf("svc-%d", i%perNS), fmt.Sprintf("ns-%d", i/perNS)
}

// clusterIP is the i-th Service's address: from 10.96.1.1 on, clear of
// the API server's own Service ("kubernetes", 10.96.0.1).
func clusterIP(i int) string { return fmt.Sprintf("10.96.%d.%d", i/250+1, i%250+1) }
func hlName(j int) (name, ns string) {
	return fmt.Sprintf("hl-%d", j), fmt.Sprintf("ns-%d", j%namespaces)
}
func endpointIP(j, k int) string { return fmt.Sprintf("10.200.%d.%d", j, k+1) }

func main() {
	mode := flag.String("mode", "bench", "bench, or ceiling (internal: run the ceiling responder)")
	listen := flag.String("listen", "", "ceiling mode: address to serve")
	duration := flag.Duration("duration", 8*time.Second, "measurement time per case and target")
	warmup := flag.Duration("warmup", 300*time.Millisecond, "warm-up time before each round")
	conc := flag.Int("c", 16, "queries in flight (one UDP socket each)")
	bin := flag.String("bin", "", "dnsconfigurer binary (default: go build ./cmd/dnsconfigurer)")
	cases := flag.String("cases", "a,b,c", "cases to run (a, b, c, d, f)")
	baseBin := flag.String("base-bin", "", "a second dnsconfigurer binary driven in the same rounds (before/after)")
	rounds := flag.Int("rounds", 4, "alternating rounds per case (the duration is split between them)")
	serveArgs := flag.String("serve-args", "", "more flags for serve, split on spaces (\"--udp-sockets 1\")")
	coredns := flag.Bool("coredns", false, "also drive CoreDNS 1.15 (kubeadm's Corefile, multisocket) in the same rounds; the objects go into a real kube-apiserver that it and serve --kubeconfig watch (populating takes about 2 min)")
	flag.Parse()
	if *mode == "ceiling" {
		if err := runCeiling(*listen); err != nil {
			fmt.Fprintln(os.Stderr, "ceiling:", err)
			os.Exit(1)
		}
		return
	}
	s := settings{bin: *bin, baseBin: *baseBin, duration: *duration, warm: *warmup, conc: *conc, rounds: *rounds,
		cases: strings.Split(*cases, ","), serveArgs: strings.Fields(*serveArgs), coredns: *coredns}
	if err := bench(s); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// query is one prepared query and the rcode it must get.
type query struct {
	wire  []byte
	rcode int
}

func pack(name string, qtype uint16, edns uint16) []byte {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	if edns > 0 {
		m.SetEdns0(edns, false)
	}
	b, err := m.Pack()
	if err != nil {
		panic(err)
	}
	return b
}

// workload returns the query sequence of a case. Workers walk it from
// different offsets.
func workload(c string) []query {
	r := rand.New(rand.NewPCG(1, 2))
	var qs []query
	switch c {
	case "a":
		for range 20000 {
			name, ns := svcName(r.IntN(namespaces * perNS))
			qs = append(qs, query{pack(name+"."+ns+".svc."+zone, dns.TypeA, 0), dns.RcodeSuccess})
		}
	case "b":
		// A pod in namespace own resolves "svc.ns" (first search suffix
		// misses, the second hits) and an external name (every in-zone
		// suffix misses; the final absolute query leaves the zone and is
		// not part of this case): 4 NXDOMAIN for 1 answer.
		for i := range 5000 {
			name, ns := svcName(r.IntN(namespaces * perNS))
			own := fmt.Sprintf("ns-%d", r.IntN(namespaces))
			short := name + "." + ns
			qs = append(qs, query{pack(short+"."+own+".svc."+zone, dns.TypeA, 0), dns.RcodeNameError})
			qs = append(qs, query{pack(short+".svc."+zone, dns.TypeA, 0), dns.RcodeSuccess})
			ext := fmt.Sprintf("api-%d.example.com.", i%50)
			for _, suffix := range []string{own + ".svc." + zone, "svc." + zone, zone} {
				qs = append(qs, query{pack(strings.TrimSuffix(ext, ".")+"."+suffix, dns.TypeA, 0), dns.RcodeNameError})
			}
		}
	case "d":
		// The mix of b until 87,000 distinct questions: every lookup's
		// external name is its own, and "svc.ns" is asked from a random
		// namespace.
		seen := map[string]bool{}
		for i := 0; len(seen) < missMixDistinct; i++ {
			name, ns := svcName(r.IntN(namespaces * perNS))
			own := fmt.Sprintf("ns-%d", r.IntN(namespaces))
			short := name + "." + ns
			add := func(fq string, rcode int) {
				if len(seen) < missMixDistinct {
					seen[fq] = true
					qs = append(qs, query{pack(fq, dns.TypeA, 0), rcode})
				}
			}
			add(short+"."+own+".svc."+zone, dns.RcodeNameError)
			add(short+".svc."+zone, dns.RcodeSuccess)
			ext := fmt.Sprintf("api-%d.example.com", i)
			for _, suffix := range []string{own + ".svc." + zone, "svc." + zone, zone} {
				add(ext+"."+suffix, dns.RcodeNameError)
			}
		}
	case "f":
		for range 20000 {
			qs = append(qs, query{pack(externalName(r.IntN(externalNames)), dns.TypeA, 0), dns.RcodeSuccess})
		}
	case "c":
		for i := range 20000 {
			var name, ns string
			if i%2 == 0 {
				name, ns = svcName(r.IntN(namespaces * perNS))
			} else {
				name, ns = hlName(r.IntN(headless))
			}
			qs = append(qs, query{pack("_http._tcp."+name+"."+ns+".svc."+zone, dns.TypeSRV, 1232), dns.RcodeSuccess})
		}
	}
	return qs
}

// missMixDistinct is the number of distinct questions of case d (issue 28:
// more than the 16 MiB reply cache holds).
const missMixDistinct = 87000

// externalNames is the number of external names of case f; externalName
// is the i-th, which the upstream stub and the ceiling answer with
// externalAddr.
const externalNames = 100

func externalName(i int) string { return fmt.Sprintf("www-%d.example.com.", i) }

const externalAddr = "192.0.2.1"

// runUpstream serves every A question with externalAddr, TTL 300, and
// every other with NODATA: the stub upstream of case f.
func runUpstream() (addr string, stop func(), err error) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if len(r.Question) == 1 && r.Question[0].Qtype == dns.TypeA {
			m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300},
				A: net.ParseIP(externalAddr).To4()}}
		}
		_ = w.WriteMsg(m)
	})
	srv := &dns.Server{PacketConn: pc, Handler: h}
	go func() { _ = srv.ActivateAndServe() }()
	return pc.LocalAddr().String(), func() { _ = srv.Shutdown() }, nil
}

// ceilingTable is the fixed map of the ceiling responder: the same names
// and answer sizes as the server's.
type ceilingKey struct {
	name  string
	qtype uint16
}

type ceilingEntry struct{ answer, extra []dns.RR }

func ceilingTable() map[ceilingKey]ceilingEntry {
	t := map[ceilingKey]ceilingEntry{}
	hdr := func(name string, t uint16) dns.RR_Header {
		return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: 5}
	}
	for i := range namespaces * perNS {
		name, ns := svcName(i)
		fq := name + "." + ns + ".svc." + zone
		a := &dns.A{Hdr: hdr(fq, dns.TypeA), A: net.ParseIP(clusterIP(i)).To4()}
		t[ceilingKey{fq, dns.TypeA}] = ceilingEntry{answer: []dns.RR{a}}
		srv := &dns.SRV{Hdr: hdr("_http._tcp."+fq, dns.TypeSRV), Weight: 100, Port: 80, Target: fq}
		t[ceilingKey{"_http._tcp." + fq, dns.TypeSRV}] = ceilingEntry{answer: []dns.RR{srv}, extra: []dns.RR{a}}
	}
	for j := range headless {
		name, ns := hlName(j)
		fq := name + "." + ns + ".svc." + zone
		var e ceilingEntry
		for k := range endpointsHL {
			ip := endpointIP(j, k)
			target := strings.ReplaceAll(ip, ".", "-") + "." + fq
			e.answer = append(e.answer, &dns.SRV{Hdr: hdr("_http._tcp."+fq, dns.TypeSRV), Weight: 5, Port: 80, Target: target})
			e.extra = append(e.extra, &dns.A{Hdr: hdr(target, dns.TypeA), A: net.ParseIP(ip).To4()})
		}
		t[ceilingKey{"_http._tcp." + fq, dns.TypeSRV}] = e
	}
	for i := range externalNames {
		name := externalName(i)
		t[ceilingKey{name, dns.TypeA}] = ceilingEntry{answer: []dns.RR{&dns.A{Hdr: hdr(name, dns.TypeA), A: net.ParseIP(externalAddr).To4()}}}
	}
	return t
}

// runCeiling serves the fixed map: the least a miekg/dns server can do.
func runCeiling(addr string) error {
	table := ceilingTable()
	soa := []dns.RR{&dns.SOA{Hdr: dns.RR_Header{Name: zone, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 5},
		Ns: "ns.dns." + zone, Mbox: "hostmaster." + zone, Serial: 1, Refresh: 7200, Retry: 1800, Expire: 86400, Minttl: 5}}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Authoritative = true
		if len(r.Question) == 1 {
			q := r.Question[0]
			if e, ok := table[ceilingKey{q.Name, q.Qtype}]; ok {
				m.Answer, m.Extra = e.answer, e.extra
			} else {
				m.Rcode = dns.RcodeNameError
				m.Ns = soa
			}
		}
		if o := r.IsEdns0(); o != nil {
			m.Extra = append(m.Extra[:len(m.Extra):len(m.Extra)], &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT, Class: 1232}})
		}
		_ = w.WriteMsg(m)
	})
	srv := &dns.Server{Addr: addr, Net: "udp", Handler: h, UDPSize: 4096}
	return srv.ListenAndServe()
}

// freePort returns a port free for UDP and TCP on 127.0.0.1.
func freePort() (string, error) {
	for range 20 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		addr := pc.LocalAddr().String()
		ln, err := net.Listen("tcp", addr)
		pc.Close()
		if err == nil {
			ln.Close()
			return addr, nil
		}
	}
	return "", errors.New("no free port")
}

// waitAnswer polls addr until name resolves with NOERROR and an answer.
func waitAnswer(addr, name string, qtype uint16, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		m.SetEdns0(1232, false) // room for the SRV answer of a headless Service
		r, err := exchange(addr, m, 200*time.Millisecond)
		if err == nil && r.Rcode == dns.RcodeSuccess && len(r.Answer) > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer %s within %v (last: %v)", addr, name, limit, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// exchange asks addr m over UDP and reads the reply into a 64 KiB buffer:
// the ceiling answers without name compression and without regard to the
// EDNS0 size, so its SRV answers for headless Services outgrow 1232 bytes.
func exchange(addr string, m *dns.Msg, timeout time.Duration) (*dns.Msg, error) {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	co := &dns.Conn{Conn: c, UDPSize: dns.MaxMsgSize}
	_ = c.SetDeadline(time.Now().Add(timeout))
	if err := co.WriteMsg(m); err != nil {
		return nil, err
	}
	for {
		r, err := co.ReadMsg()
		if err != nil {
			return nil, err
		}
		if r.Id == m.Id {
			return r, nil
		}
	}
}

// procStat is a process's CPU time (clock ticks) and memory.
type procStat struct {
	ticks   uint64
	rssKiB  uint64
	hwmKiB  uint64
	anonKiB uint64
	fileKiB uint64
}

func readProc(pid int) (procStat, error) {
	var s procStat
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	// Fields after the ")" of comm: state is field 3; utime 14, stime 15.
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return s, fmt.Errorf("short /proc/%d/stat", pid)
	}
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	s.ticks = ut + st
	st2, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(st2), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseUint(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			s.rssKiB = v
		case "VmHWM:":
			s.hwmKiB = v
		case "RssAnon:":
			s.anonKiB = v
		case "RssFile:":
			s.fileKiB = v
		}
	}
	return s, nil
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// clockTick is USER_HZ, 100 on Linux.
const clockTick = 100

type result struct {
	qps      float64
	p50, p99 time.Duration
	cpuUS    float64
	rssMiB   float64
	hwmMiB   float64
	anonMiB  float64
	wrong    int64 // replies with another rcode than the case's
	lost     int64 // queries without a reply within 1 s
	answered int64

	elapsed time.Duration
	ticks   uint64
	lats    []time.Duration
}

// merge adds a round to r and recomputes the derived numbers.
func (r *result) merge(o result) {
	r.answered += o.answered
	r.wrong += o.wrong
	r.lost += o.lost
	r.elapsed += o.elapsed
	r.ticks += o.ticks
	r.lats = append(r.lats, o.lats...)
	r.rssMiB, r.hwmMiB, r.anonMiB = o.rssMiB, o.hwmMiB, o.anonMiB
	slices.Sort(r.lats)
	if n := len(r.lats); n > 0 {
		r.p50, r.p99 = r.lats[n/2], r.lats[n*99/100]
	}
	r.qps = float64(r.answered) / r.elapsed.Seconds()
	if r.answered > 0 {
		r.cpuUS = float64(r.ticks) / clockTick * 1e6 / float64(r.answered)
	}
}

// load drives addr with the workload for d after a warm-up and measures.
func load(addr string, pid int, qs []query, conc int, warm, d time.Duration) (result, error) {
	var res result
	var stop atomic.Bool
	var measuring atomic.Bool
	var answered, wrong, lost atomic.Int64
	lat := make([][]time.Duration, conc)
	var wg sync.WaitGroup
	for w := range conc {
		conn, err := net.Dial("udp", addr)
		if err != nil {
			return res, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Close()
			buf := make([]byte, 65535)
			out := make([]byte, 0, 512)
			i := w * len(qs) / conc
			id := uint16(w << 10)
			for !stop.Load() {
				q := qs[i%len(qs)]
				i++
				id++
				out = append(out[:0], q.wire...)
				out[0], out[1] = byte(id>>8), byte(id)
				start := time.Now()
				if _, err := conn.Write(out); err != nil {
					lost.Add(1)
					continue
				}
				_ = conn.SetReadDeadline(start.Add(time.Second))
				for {
					n, err := conn.Read(buf)
					if err != nil {
						lost.Add(1)
						break
					}
					if n < 12 || buf[0] != byte(id>>8) || buf[1] != byte(id) {
						continue // a late reply to an earlier query
					}
					if int(buf[3]&0x0f) != q.rcode {
						wrong.Add(1)
					}
					if measuring.Load() {
						answered.Add(1)
						lat[w] = append(lat[w], time.Since(start))
					}
					break
				}
			}
		}()
	}
	time.Sleep(warm)
	before, err := readProc(pid)
	if err != nil {
		return res, err
	}
	measuring.Store(true)
	t0 := time.Now()
	time.Sleep(d)
	measuring.Store(false)
	elapsed := time.Since(t0)
	after, err := readProc(pid)
	if err != nil {
		return res, err
	}
	stop.Store(true)
	wg.Wait()
	for _, l := range lat {
		res.lats = append(res.lats, l...)
	}
	res.answered = answered.Load()
	res.wrong, res.lost = wrong.Load(), lost.Load()
	res.elapsed = elapsed
	res.ticks = after.ticks - before.ticks
	res.rssMiB = float64(after.rssKiB) / 1024
	res.hwmMiB = float64(after.hwmKiB) / 1024
	res.anonMiB = float64(after.anonKiB) / 1024
	return res, nil
}

func start(name string, args ...string) (*exec.Cmd, error) {
	cmd := exec.Command(name, args...)
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return cmd, nil
}

// target is a responder the load generator drives.
type target struct {
	name string
	addr string
	pid  int
	res  result
}

// Target names: the ceiling, the dnsconfigurer builds and CoreDNS.
const (
	nameCeiling = "ceiling"
	nameServer  = "server"
	nameBase    = "base"
	nameCoreDNS = "coredns"
)

// waitReady waits until addr answers the first and the last Service and
// the SRV question of the last headless Service: the objects are loaded.
func waitReady(addr string, cmd *exec.Cmd) error {
	lastSvc, lastNS := svcName(namespaces*perNS - 1)
	lastHL, hlNS := hlName(headless - 1)
	for _, q := range []struct {
		name  string
		qtype uint16
	}{
		{"svc-0.ns-0.svc." + zone, dns.TypeA},
		{lastSvc + "." + lastNS + ".svc." + zone, dns.TypeA},
		{"_http._tcp." + lastHL + "." + hlNS + ".svc." + zone, dns.TypeSRV},
	} {
		if err := waitAnswer(addr, q.name, q.qtype, 2*time.Minute); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return err
		}
	}
	return nil
}

// startServer starts bin's serve on the objects source names (--objects
// or --kubeconfig), forwarding to upstream, and waits until it answers.
func startServer(bin string, source []string, upstream string, serveArgs []string) (*exec.Cmd, string, error) {
	addr, err := freePort()
	if err != nil {
		return nil, "", err
	}
	args := append([]string{"serve", "--listen", addr}, source...)
	args = append(args, "--upstream", upstream, "--ttl", "5", "--log-level", "warn")
	srv, err := start(bin, append(args, serveArgs...)...)
	if err != nil {
		return nil, "", err
	}
	if err := waitReady(addr, srv); err != nil {
		return nil, "", fmt.Errorf("server %s: %w", bin, err)
	}
	return srv, addr, nil
}

// startCoreDNS writes the Corefile into dir, starts bin on it and waits
// until it answers.
func startCoreDNS(bin, dir, kubeconfig, upstream string) (*exec.Cmd, string, error) {
	var p corednsPorts
	for _, a := range []*string{&p.dns, &p.health, &p.ready, &p.metrics} {
		var err error
		if *a, err = freePort(); err != nil {
			return nil, "", err
		}
	}
	path := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(path, []byte(renderCorefile(p, kubeconfig, upstream)), 0o644); err != nil {
		return nil, "", err
	}
	cmd, err := start(bin, "-conf", path)
	if err != nil {
		return nil, "", err
	}
	if err := waitReady(p.dns, cmd); err != nil {
		return nil, "", fmt.Errorf("coredns %s: %w", bin, err)
	}
	return cmd, p.dns, nil
}

// settings are the command line of a benchmark run.
type settings struct {
	bin, baseBin string
	duration     time.Duration
	warm         time.Duration
	conc, rounds int
	cases        []string
	serveArgs    []string
	coredns      bool
}

func bench(s settings) error {
	if s.rounds < 1 {
		s.rounds = 1
	}
	tmp, err := os.MkdirTemp("", "dnsbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if s.bin == "" {
		s.bin = filepath.Join(tmp, "dnsconfigurer")
		build := exec.Command("go", "build", "-o", s.bin, "./cmd/dnsconfigurer")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("go build ./cmd/dnsconfigurer (run from the module root, or pass -bin): %w", err)
		}
	}
	corednsBin := ""
	if s.coredns {
		if corednsBin, err = corednsPath(); err != nil {
			return err
		}
		out, err := exec.Command(corednsBin, "-version").CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s -version: %w", corednsBin, err)
		}
		fmt.Printf("%s: %s\n", corednsBin, strings.Join(strings.Fields(string(out)), " "))
	}
	objs := benchObjects()
	// source is where serve reads the objects: the manifests, or with
	// CoreDNS the API server both watch.
	var source []string
	kubeconfig := ""
	if s.coredns {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		cp, err := startCluster(ctx, objs)
		cancel()
		if err != nil {
			return err
		}
		defer func() { _ = cp.Close() }()
		kubeconfig = cp.Kubeconfig()
		source = []string{"--kubeconfig", kubeconfig, "--pods", "insecure"}
	} else {
		objects := filepath.Join(tmp, "objects")
		if err := os.Mkdir(objects, 0o755); err != nil {
			return err
		}
		if err := writeManifests(objects, objs); err != nil {
			return err
		}
		source = []string{"--objects", objects}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	upstream, stopUpstream, err := runUpstream()
	if err != nil {
		return err
	}
	defer stopUpstream()

	ceilAddr, err := freePort()
	if err != nil {
		return err
	}
	ceil, err := start(self, "-mode", "ceiling", "-listen", ceilAddr)
	if err != nil {
		return err
	}
	defer func() { _ = ceil.Process.Kill(); _ = ceil.Wait() }()
	if err := waitReady(ceilAddr, ceil); err != nil {
		return fmt.Errorf("ceiling: %w", err)
	}
	targets := []*target{{name: nameCeiling, addr: ceilAddr, pid: ceil.Process.Pid}}

	bins := []struct{ name, path string }{{nameServer, s.bin}}
	if s.baseBin != "" {
		bins = append(bins, struct{ name, path string }{nameBase, s.baseBin})
	}
	if s.coredns {
		bins = append(bins, struct{ name, path string }{nameCoreDNS, corednsBin})
	}
	for _, b := range bins {
		t0 := time.Now()
		var srv *exec.Cmd
		var addr string
		if b.name == nameCoreDNS {
			srv, addr, err = startCoreDNS(b.path, tmp, kubeconfig, upstream)
		} else {
			srv, addr, err = startServer(b.path, source, upstream, s.serveArgs)
		}
		if err != nil {
			return err
		}
		defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
		idle, _ := readProc(srv.Process.Pid)
		fmt.Printf("%s (%s) ready in %v with %d Services in %d namespaces + %d headless x %d endpoints; idle RSS %.1f MiB (anon %.1f, file %.1f)\n",
			b.name, b.path, time.Since(t0).Round(time.Millisecond), namespaces*perNS, namespaces, headless, endpointsHL,
			float64(idle.rssKiB)/1024, float64(idle.anonKiB)/1024, float64(idle.fileKiB)/1024)
		targets = append(targets, &target{name: b.name, addr: addr, pid: srv.Process.Pid})
	}
	fmt.Printf("load: %d UDP sockets in flight, %v per case and target in %d alternating rounds (+%v warm-up each); load average %s\n\n",
		s.conc, s.duration, s.rounds, s.warm, loadavg())
	var out strings.Builder
	for _, c := range s.cases {
		c = strings.TrimSpace(c)
		qs := workload(c)
		if len(qs) == 0 {
			return fmt.Errorf("unknown case %q", c)
		}
		for _, t := range targets[1:] {
			n, diffs, err := verify(t.addr, ceilAddr, qs, verifySample)
			if err != nil {
				return fmt.Errorf("verify case %s on %s: %w", c, t.name, err)
			}
			fmt.Printf("verify: case %s, %s: %d of %d sampled answers as the ceiling's\n", c, t.name, n-len(diffs), n)
			for i, d := range diffs {
				if i == 3 {
					fmt.Printf("  ... %d more\n", len(diffs)-i)
					break
				}
				fmt.Printf("  %s\n", d)
			}
		}
		// Alternate short rounds of the targets so that load from other
		// processes on the machine hits them alike; the servers' order
		// turns each round.
		for _, t := range targets {
			t.res = result{}
		}
		for round := range s.rounds {
			order := append([]*target{targets[0]}, targets[1:]...)
			if round%2 == 1 {
				slices.Reverse(order[1:])
			}
			for _, t := range order {
				r, err := load(t.addr, t.pid, qs, s.conc, s.warm, s.duration/time.Duration(s.rounds))
				if err != nil {
					return err
				}
				t.res.merge(r)
			}
		}
		var rows strings.Builder
		writeTable(&rows, c, targets)
		fmt.Print(tableHeader + rows.String())
		out.WriteString(rows.String())
	}
	fmt.Printf("\nall cases (load average %s):\n%s%s", loadavg(), tableHeader, out.String())
	return nil
}

// tableHeader heads writeTable's rows: q/ and cpu/ are a target's QPS and
// CPU µs per query over the ceiling's and (a dnsconfigurer build's) over
// CoreDNS's.
var tableHeader = fmt.Sprintf("%-4s %-7s %8s %9s %9s %8s %7s %8s %7s %6s %6s %6s %8s %6s %8s\n", "case", "target", "qps",
	"p50", "p99", "cpu_us/q", "rss_MiB", "anon_MiB", "hwm_MiB", "wrong", "lost", "q/ceil", "cpu/ceil", "q/cdns", "cpu/cdns")

// writeTable writes a row per target for case c.
func writeTable(w *strings.Builder, c string, targets []*target) {
	var ceiling, coredns *result
	for _, t := range targets {
		switch t.name {
		case nameCeiling:
			ceiling = &t.res
		case nameCoreDNS:
			coredns = &t.res
		}
	}
	for _, t := range targets {
		r := t.res
		var rs [4]string
		if t.name != nameCeiling && ceiling != nil {
			rs[0], rs[1] = ratio(r.qps, ceiling.qps), ratio(r.cpuUS, ceiling.cpuUS)
		}
		if t.name != nameCeiling && t.name != nameCoreDNS && coredns != nil {
			rs[2], rs[3] = ratio(r.qps, coredns.qps), ratio(r.cpuUS, coredns.cpuUS)
		}
		fmt.Fprintf(w, "%-4s %-7s %8.0f %9v %9v %8.1f %7.1f %8.1f %7.1f %6d %6d %6s %8s %6s %8s\n", c, t.name, r.qps,
			r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond), r.cpuUS, r.rssMiB, r.anonMiB, r.hwmMiB,
			r.wrong, r.lost, rs[0], rs[1], rs[2], rs[3])
	}
}

// ratio is a over b with two decimals, "-" when either is not positive.
func ratio(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}
