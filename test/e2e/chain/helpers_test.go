package chain

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
	"github.com/dnsconfigurer/dnsconfigurer/test/e2e/containerd"
)

func TestMain(m *testing.M) { os.Exit(buildbin.Main(m)) }

// startProc starts the built binary with args inside h's network namespace
// and stops it (SIGTERM, SIGKILL after 10s) on cleanup, logging its output
// when the test failed.
func startProc(t *testing.T, h *containerd.Harness, name string, args ...string) *buildbin.Proc {
	t.Helper()
	// nsenter execs the binary (it does not fork for a network namespace
	// alone), so the process and its death signal are the binary's. The
	// death signal follows the thread that forked, not the process, and
	// h.Do ends the threads it switches into the namespace: StartCommand
	// forks from a thread kept until the process has exited.
	cmd := h.Command(context.Background(), buildbin.Dnsconfigurer(t), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return buildbin.StartCommand(t, name, cmd, 10*time.Second)
}

// scrape reads the /metrics of addr (inside the namespace, through c).
func scrape(c *http.Client, addr string) (testkit.Metrics, error) {
	return testkit.Scrape(c, "http://"+addr+"/metrics")
}

// waitReady waits until GET /readyz on addr (inside the namespace)
// answers 200, failing at once if the process exits.
func waitReady(t *testing.T, c *http.Client, p *buildbin.Proc, addr string) {
	t.Helper()
	testkit.WaitFor(t, 30*time.Second, func() error {
		if p.HasExited() {
			t.Fatalf("%s exited: %v\n%s", p.Name, p.Cmd.ProcessState, p.Output.String())
		}
		if err := testkit.GetOK(c, "http://"+addr+"/readyz"); err != nil {
			return fmt.Errorf("%s not ready on %s: %v\n%s", p.Name, addr, err, p.Output.String())
		}
		return nil
	})
}

// byType counts the queries up got, by type.
func byType(up *testkit.Upstream) map[uint16]int {
	n := map[uint16]int{}
	for _, q := range up.Queries() {
		n[q.Msg.Question[0].Qtype]++
	}
	return n
}

// upstreamStub answers the names in records (fully qualified, lower case)
// with their addresses, A or AAAA by family, with TTL 1 so that nothing on
// the path keeps an answer across the resolv.conf rewrite; NXDOMAIN for
// any other name.
func upstreamStub(records map[string][]string) dns.Handler {
	return dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if len(r.Question) != 1 {
			m.Rcode = dns.RcodeFormatError
			_ = w.WriteMsg(m)
			return
		}
		q := r.Question[0]
		addrs, ok := records[strings.ToLower(q.Name)]
		if !ok {
			m.Rcode = dns.RcodeNameError
			soa, _ := dns.NewRR(". 1 IN SOA a.root. b.root. 1 1 1 1 1")
			m.Ns = []dns.RR{soa}
			_ = w.WriteMsg(m)
			return
		}
		for _, a := range addrs {
			ip := net.ParseIP(a)
			hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: 1}
			switch {
			case ip.To4() != nil && q.Qtype == dns.TypeA:
				hdr.Rrtype = dns.TypeA
				m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: ip})
			case ip.To4() == nil && q.Qtype == dns.TypeAAAA:
				hdr.Rrtype = dns.TypeAAAA
				m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr, AAAA: ip})
			}
		}
		_ = w.WriteMsg(m)
	})
}

// serveStub serves h on addr (UDP and TCP) on sockets bound inside the
// harness's namespace. A server only answers on the socket it bound, so
// nothing it sends leaves the namespace.
func serveStub(t *testing.T, hs *containerd.Harness, addr string, h dns.Handler) *testkit.Upstream {
	t.Helper()
	return testkit.NewUpstream(t, h, testkit.At(addr), testkit.ListenIn(hs.Do))
}

// kubeletView is the pod as kubelet sees it: kubelet does not know the
// autopath annotation.
func kubeletView(pod *corev1.Pod) *corev1.Pod {
	k := pod.DeepCopy()
	delete(k.Annotations, policy.AnnotationDNSPolicy)
	return k
}
