package forward_test

import (
	"context"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"go.uber.org/goleak"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
)

// TestMain fails the run if a test leaves goroutines behind (servers not
// shut down, exchanges or probes still running).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newForwarder is forward.New(cfg), closed when the test ends.
func newForwarder(t *testing.T, cfg forward.Config) *forward.Forwarder {
	t.Helper()
	f, err := forward.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// answer is the right reply to req: 192.0.2.1.
func answer(req *dns.Msg) *dns.Msg {
	r := new(dns.Msg)
	r.SetReply(req)
	r.Answer = []dns.RR{testkit.A(req.Question[0].Name, 30, "192.0.2.1")}
	return r
}

// answering is an upstream handler that answers every query with answer.
var answering = dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) { _ = w.WriteMsg(answer(req)) })

// runStub is a UDP upstream whose replies a function chooses: none (it
// hangs), a wrong one then the right one, and so on.
func runStub(t *testing.T, replies func(req *dns.Msg) []*dns.Msg) *testkit.Upstream {
	t.Helper()
	return testkit.NewUpstream(t, dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		for _, r := range replies(req) {
			_ = w.WriteMsg(r)
		}
	}), testkit.UDPOnly())
}

// asked counts the queries up got, loop probes left out.
func asked(up *testkit.Upstream) int {
	n := 0
	for _, q := range up.Queries() {
		if !strings.HasSuffix(q.Msg.Question[0].Name, ".loop-probe.dnsconfigurer.") {
			n++
		}
	}
	return n
}

// clients counts the client addresses up got queries from.
func clients(up *testkit.Upstream) int {
	seen := map[string]bool{}
	for _, q := range up.Queries() {
		seen[q.From.String()] = true
	}
	return len(seen)
}

func ask(f *forward.Forwarder, ctx context.Context, name string) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	return f.Exchange(ctx, m)
}
