package attack

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

// The addresses on loopback: the servers, the legitimate clients, and the
// pool the attacks draw their sources from (127.0.0.100-131).
const (
	stubIP      = "127.0.0.81"
	clusterIP   = "127.0.0.82"
	nodeLocalIP = "127.0.0.83"
	webhookIP   = "127.0.0.84"
	legitPod    = "127.0.0.90" // a pod asking node-local over UDP
	legitTCP    = "127.0.0.91" // fresh TCP clients
	legitAPI    = "127.0.0.92" // the API server's reviews
	poolFirst   = 100
	poolSize    = 32
)

// boundFlags are the DNS servers' bounds: a fifth of the defaults, so an
// attack within 250 qps reaches each one (2 s per silent name: 500 in
// flight against 200 slots; 50 connections a client, 200 in all).
var boundFlags = []string{"--max-concurrent", "200", "--max-tcp-conns", "200", "--max-tcp-conns-per-client", "50"}

// The objects of the cluster DNS: Services in prod that legitimate clients
// ask, and a tenant's ExternalNames, each to a name whose servers never
// answer.
const (
	services      = 400
	externalNames = 64
)

// env is one scenario's processes: the cluster DNS on the objects,
// node-local in front of it, a stub upstream, and the webhook.
type env struct {
	bin       string
	stub      *testkit.Upstream
	cluster   *buildbin.Serve
	nodeLocal *buildbin.Serve
	webhook   *webhookProc
}

type webhookProc struct {
	*buildbin.Proc
	url string // https://host:port/validate
	tls *tls.Config
}

// target is a DNS server an attack or a client asks.
type target string

const (
	toCluster   target = "cluster"
	toNodeLocal target = "node-local"
)

func (e *env) addr(tg target) string {
	if tg == toNodeLocal {
		return e.nodeLocal.DNS
	}
	return e.cluster.DNS
}

// The stub listens on UDP and TCP: the cluster DNS forwards a query that
// came over TCP (node-local's) over TCP.

// startEnv starts the processes of a scenario; they stop when t ends.
func startEnv(t *testing.T) *env {
	t.Helper()
	e := &env{bin: buildbin.Dnsconfigurer(t)}
	// A 192.0.2.1 (other types: no data) but for silent names, which it
	// never answers.
	e.stub = testkit.NewUpstream(t, testkit.AnswerA(30, "192.0.2.1", silent), testkit.CountOnly(), testkit.At(stubIP+":0"))
	args := append([]string{"--objects", writeObjects(t), "--upstream", e.stub.Addr}, boundFlags...)
	e.cluster = buildbin.StartServeArgs(t, clusterIP+":0", args...)
	args = append([]string{"--mode", "node-local", "--cluster-upstream", e.cluster.DNS, "--resolv-conf", ""}, boundFlags...)
	e.nodeLocal = buildbin.StartServeArgs(t, nodeLocalIP+":0", args...)
	e.webhook = e.startWebhook(t)
	return e
}

// silent reports whether the stub leaves name unanswered: a name with a
// label holding "silent", and every reverse name.
func silent(name string) bool {
	name = strings.ToLower(name)
	return strings.Contains(name, "silent") || strings.HasSuffix(name, ".arpa.")
}

// writeObjects writes the cluster DNS's manifests and returns their
// directory.
func writeObjects(t *testing.T) string {
	t.Helper()
	return buildbin.Objects(t, buildbin.ClusterIPServices("prod", services)+buildbin.ExternalNames("tenant", externalNames, externalTarget))
}

// externalTarget is ExternalName k's target: one of 16 silent domains.
func externalTarget(k int) string { return fmt.Sprintf("e%d.tenant%d-silent.example.net", k, k%16) }

var webhookAddrRe = regexp.MustCompile(`msg="serving admission reviews".* addr=([0-9.:]+)`)

// startWebhook runs `dnsconfigurer webhook` with a certificate of a CA
// made for the test.
func (e *env) startWebhook(t *testing.T) *webhookProc {
	t.Helper()
	ca := testkit.NewCA(t)
	cert, key, _ := ca.Serving(t, "dnsconfigurer-webhook")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for f, data := range map[string][]byte{certFile: cert, keyFile: key} {
		if err := os.WriteFile(f, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(e.bin, "webhook", "--listen", webhookIP+":0", "--tls-cert-file", certFile, "--tls-private-key-file", keyFile,
		"--cluster-dns", testkit.ClusterDNS, "--log-format", "text")
	// As deploy/webhook sets it: the container's memory limit.
	cmd.Env = append(os.Environ(), fmt.Sprintf("GOMEMLIMIT=%dMiB", maxWebhook>>20))
	p := buildbin.StartCommand(t, "webhook", cmd, 0)
	addr := p.WaitLog(t, webhookAddrRe)[1]
	return &webhookProc{Proc: p, url: "https://" + addr + "/validate",
		tls: &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", MinVersion: tls.VersionTLS12}}
}

// peakRSS is a process's peak resident set (VmHWM), in bytes.
func peakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

// canBindAliases reports whether this host lets a process bind the
// loopback aliases the scenarios use (Linux routes 127/8 to lo).
func canBindAliases() error {
	for _, ip := range []string{stubIP, legitPod, poolAddr(0).String(), poolAddr(poolSize - 1).String()} {
		c, err := net.ListenPacket("udp", ip+":0")
		if err != nil {
			return err
		}
		c.Close()
	}
	return nil
}

// poolAddr is the i-th address of the attack pool.
func poolAddr(i int) netip.Addr { return netip.AddrFrom4([4]byte{127, 0, 0, byte(poolFirst + i)}) }
