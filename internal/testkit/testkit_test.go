package testkit

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fatalTB records Fatalf (or Fatal) and panics instead of ending the test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f)
}
func (f *fatalTB) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	panic(f)
}

func TestWaitFor(t *testing.T) {
	n := 0
	WaitFor(t, time.Second, func() error {
		if n++; n < 5 {
			return fmt.Errorf("n=%d", n)
		}
		return nil
	})
	if n != 5 {
		t.Errorf("cond ran %d times, want 5", n)
	}

	f := &fatalTB{TB: t}
	start := time.Now()
	func() {
		defer func() { _ = recover() }()
		WaitFor(f, 50*time.Millisecond, func() error { return errors.New("never") })
	}()
	if f.msg != "timed out after 50ms: never" {
		t.Errorf("failure message %q", f.msg)
	}
	if d := time.Since(start); d < 50*time.Millisecond || d > 2*time.Second {
		t.Errorf("gave up after %v, want 50ms", d)
	}
}

func TestWaitEvery(t *testing.T) {
	var polls []time.Time
	WaitEvery(t, time.Second, 20*time.Millisecond, func() error {
		if polls = append(polls, time.Now()); len(polls) < 4 {
			return errors.New("not yet")
		}
		return nil
	})
	if d := polls[3].Sub(polls[0]); d < 60*time.Millisecond {
		t.Errorf("4 polls within %v, want 20ms apart", d)
	}
}

func TestHolds(t *testing.T) {
	start := time.Now()
	n := 0
	Holds(t, 50*time.Millisecond, func() error { n++; return nil })
	// At least the first check and one after the wait: under load a
	// single sleep can take the whole 50ms.
	if d := time.Since(start); d < 50*time.Millisecond || n < 2 {
		t.Errorf("held for %v with %d polls, want 50ms and at least two", d, n)
	}
	f := &fatalTB{TB: t}
	start = time.Now()
	func() {
		defer func() { _ = recover() }()
		Holds(f, time.Minute, func() error {
			if time.Since(start) > 20*time.Millisecond {
				return errors.New("broke")
			}
			return nil
		})
	}()
	if f.msg != "within 1m0s: broke" || time.Since(start) > 10*time.Second {
		t.Errorf("failure %q after %v, want at the first error", f.msg, time.Since(start))
	}
}

func TestPoll(t *testing.T) {
	start, n := time.Now(), 0
	if !Poll(time.Second, 10*time.Millisecond, func() bool { n++; return n == 3 }) || time.Since(start) < 30*time.Millisecond {
		t.Errorf("Poll: %d calls in %v, want true after 3 intervals", n, time.Since(start))
	}
	if Poll(30*time.Millisecond, 10*time.Millisecond, func() bool { return false }) {
		t.Error("Poll of a condition that never holds = true")
	}
}

func TestWaitEqual(t *testing.T) {
	n := 0
	WaitEqual(t, time.Second, "n", func() int { n++; return n }, 3)
	f := &fatalTB{TB: t}
	func() {
		defer func() { _ = recover() }()
		WaitEqual(f, 10*time.Millisecond, "the answer", func() int { return 41 }, 42)
	}()
	if f.msg != "timed out after 10ms: the answer = 41, want 42" {
		t.Errorf("failure message %q", f.msg)
	}
}

func TestBufferWaitMatch(t *testing.T) {
	var b Buffer
	go fmt.Fprint(&b, "starting\nlisten=127.0.0.1:53\n")
	if m := b.WaitMatch(t, time.Second, regexp.MustCompile(`listen=(\S+)`), nil); m[1] != "127.0.0.1:53" {
		t.Errorf("match %q", m)
	}
	exited := make(chan struct{})
	close(exited)
	f := &fatalTB{TB: t}
	start := time.Now()
	func() {
		defer func() { _ = recover() }()
		b.WaitMatch(f, time.Minute, regexp.MustCompile(`never`), exited)
	}()
	if !strings.HasPrefix(f.msg, `exited before its output matched "never"`) || time.Since(start) > 10*time.Second {
		t.Errorf("after the writer exited: %q after %v", f.msg, time.Since(start))
	}
}

func TestUpstream(t *testing.T) {
	u := NewUpstream(t, Reply(func(q dns.Question, r *dns.Msg) {
		if q.Name == "nx.example." {
			r.Rcode = dns.RcodeNameError
			return
		}
		r.Answer = []dns.RR{A(q.Name, 30, "192.0.2.1")}
	}))
	for _, tc := range []struct {
		net, name string
		rcode     int
		answers   int
	}{
		{"udp", "web.example.", dns.RcodeSuccess, 1},
		{"tcp", "web.example.", dns.RcodeSuccess, 1},
		{"udp", "nx.example.", dns.RcodeNameError, 0},
	} {
		c := &dns.Client{Net: tc.net, Timeout: 2 * time.Second}
		r, _, err := c.Exchange(new(dns.Msg).SetQuestion(tc.name, dns.TypeA), u.Addr)
		if err != nil || r.Rcode != tc.rcode || len(r.Answer) != tc.answers {
			t.Errorf("%s %s: %v %v", tc.net, tc.name, r, err)
		}
	}
	if u.Count() != 3 {
		t.Errorf("count %d, want 3", u.Count())
	}
	if q := u.Queries(); len(q) != 3 || q[1].Net != "tcp" || q[2].Msg.Question[0].Name != "nx.example." {
		t.Errorf("queries %v", q)
	}
}

func TestUpstreamSilentAndDelay(t *testing.T) {
	silent := NewUpstream(t, Silent, UDPOnly())
	c := &dns.Client{Timeout: 100 * time.Millisecond}
	if _, _, err := c.Exchange(new(dns.Msg).SetQuestion("a.example.", dns.TypeA), silent.Addr); err == nil {
		t.Error("a silent upstream answered")
	}
	if _, _, err := (&dns.Client{Net: "tcp", Timeout: time.Second}).Exchange(new(dns.Msg).SetQuestion("a.example.", dns.TypeA), silent.Addr); err == nil {
		t.Error("UDPOnly: TCP answered")
	}
	WaitEqual(t, time.Second, "queries the silent upstream read", silent.Count, 1)

	slow := NewUpstream(t, Reply(func(dns.Question, *dns.Msg) {}), Delay(200*time.Millisecond))
	start := time.Now()
	if _, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(new(dns.Msg).SetQuestion("a.example.", dns.TypeA), slow.Addr); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("answered after %v, want at least the 200ms delay", d)
	}
	// Stop ends a held answer at once.
	slow.SetDelay(time.Hour)
	asked := make(chan error)
	go func() {
		_, _, err := (&dns.Client{Timeout: time.Second}).Exchange(new(dns.Msg).SetQuestion("b.example.", dns.TypeA), slow.Addr)
		asked <- err
	}()
	WaitFor(t, time.Second, func() error {
		if slow.Count() != 2 {
			return fmt.Errorf("%d queries", slow.Count())
		}
		return nil
	})
	start = time.Now()
	slow.Stop()
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("Stop took %v", d)
	}
	if err := <-asked; err == nil {
		t.Error("a held query was answered after Stop")
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kit_total"}, []string{"b", "a"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kit_seconds"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "kit_up"})
	reg.MustRegister(c, h, g)
	c.WithLabelValues("2", "1").Add(3)
	c.WithLabelValues("4", "3").Add(4)
	h.Observe(0.5)
	h.Observe(1)
	g.Set(1)
	want := Metrics{`kit_total{a="1",b="2"}`: 3, `kit_total{a="3",b="4"}`: 4, "kit_seconds_count": 2, "kit_seconds_sum": 1.5, "kit_up": 1}

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	scraped, err := Scrape(nil, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]Metrics{"Gather": Gather(t, reg), "Scrape": scraped} {
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if k := Key("kit_total", "b", "2", "a", "1"); want[k] != 3 {
		t.Errorf("Key = %s, not a key of Gather", k)
	}
	if s := want.Sum("kit_total"); s != 7 {
		t.Errorf("Sum = %v, want 7", s)
	}
	if !want.Has("kit_up") || want.Has("kit") {
		t.Error("Has")
	}
	bad := httptest.NewServer(http.NotFoundHandler())
	defer bad.Close()
	if _, err := Scrape(nil, bad.URL); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("Scrape of a 404: %v", err)
	}
	if err := GetOK(nil, bad.URL); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("GetOK of a 404: %v", err)
	}
	if err := GetOK(nil, srv.URL); err != nil {
		t.Errorf("GetOK: %v", err)
	}
}

func TestClock(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewClock(start)
	c.Advance(time.Minute)
	if got := c.Now(); !got.Equal(start.Add(time.Minute)) {
		t.Errorf("Now after Advance(1m) = %v", got)
	}
}

func TestNode(t *testing.T) {
	n := Node()
	n.ClusterDNS[0] = "changed"
	if Node().ClusterDNS[0] != ClusterDNS || len(Node().NodeLocalDNS) != 0 {
		t.Errorf("Node shares its slices or has node-local DNS: %+v", Node())
	}
	if nl := NodeWithNodeLocal(); len(nl.NodeLocalDNS) != 1 || nl.NodeLocalDNS[0] != NodeLocalDNS {
		t.Errorf("NodeWithNodeLocal = %+v", nl)
	}
	path := WriteHostResolvConf(t, t.TempDir())
	if b, err := os.ReadFile(path); err != nil || string(b) != HostResolvConf {
		t.Errorf("WriteHostResolvConf: %q %v", b, err)
	}
	if f := NodeFlags(path); len(f) != 8 || f[5] != path {
		t.Errorf("NodeFlags = %q", f)
	}
}

// errorTB records Errorf calls.
type errorTB struct {
	testing.TB
	errs []string
}

func (e *errorTB) Helper() {}
func (e *errorTB) Errorf(format string, args ...any) {
	e.errs = append(e.errs, fmt.Sprintf(format, args...))
}

func TestWantSubstrings(t *testing.T) {
	for _, tc := range []struct {
		name string
		subs []string
		errs int
	}{
		{"all there", []string{"a", "bc"}, 0},
		{"none", nil, 0},
		{"one missing", []string{"a", "x"}, 1},
		{"two missing", []string{"x", "y"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &errorTB{}
			WantSubstrings(rec, "out", "abc", tc.subs...)
			if len(rec.errs) != tc.errs {
				t.Errorf("%d errors, want %d: %v", len(rec.errs), tc.errs, rec.errs)
			}
		})
	}
}

// TestWantErr: no error wanted and none is "go on"; an error wanted and
// got is "stop"; every other case fails the test (a failed check does not
// return here, so goOn is false).
func TestWantErr(t *testing.T) {
	broke := errors.New(`limits: "cut" must be trim or reject`)
	for _, tc := range []struct {
		name   string
		check  func(testing.TB, error, string) bool
		err    error
		want   string
		goOn   bool
		failed string
	}{
		{"none wanted, none got", WantErr, nil, "", true, ""},
		{"wanted and got", WantErr, broke, "must be", false, ""},
		{"none wanted, one got", WantErr, broke, "", false, broke.Error()},
		{"wanted, none got", WantErr, nil, "must be", false, `error <nil>, want one containing "must be"`},
		{"wanted, another got", WantErr, broke, "ndots", false, `error limits: "cut" must be trim or reject, want one containing "ndots"`},
		{"prefix got", WantErrPrefix, broke, "limits: ", false, ""},
		{"prefix only inside", WantErrPrefix, broke, "must be", false, `error limits: "cut" must be trim or reject, want one starting with "must be"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fatalTB{TB: t}
			goOn := func() bool {
				defer func() { _ = recover() }()
				return tc.check(f, tc.err, tc.want)
			}()
			if f.msg != tc.failed || goOn != tc.goOn {
				t.Errorf("failed with %q, went on %v; want %q, %v", f.msg, goOn, tc.failed, tc.goOn)
			}
		})
	}
}

// TestEnvBin: unset is the caller's search, set is that file, set to
// nothing there fails the test.
func TestEnvBin(t *testing.T) {
	const env = "DNSCONFIGURER_TESTKIT_BIN"
	bin := filepath.Join(t.TempDir(), "tool")
	WriteFile(t, bin, "")
	for _, tc := range []struct {
		name, value, want string
		ok                bool
		failed            string
	}{
		{name: "unset"},
		{name: "set", value: bin, want: bin, ok: true},
		{name: "missing", value: bin + ".gone", failed: "$" + env + ": stat " + bin + ".gone: no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(env, tc.value)
			f := &fatalTB{TB: t}
			var got string
			var ok bool
			func() {
				defer func() { _ = recover() }()
				got, ok = EnvBin(f, env)
			}()
			if got != tc.want || ok != tc.ok || f.msg != tc.failed {
				t.Errorf("EnvBin = %q, %v, failed %q; want %q, %v, %q", got, ok, f.msg, tc.want, tc.ok, tc.failed)
			}
		})
	}
}

func TestClosed(t *testing.T) {
	done := make(chan struct{})
	if Closed(done) {
		t.Error("Closed of an open channel = true")
	}
	close(done)
	if !Closed(done) {
		t.Error("Closed of a closed channel = false")
	}
}

// TestMetricsWant: a series with the value passes; another value, or
// none, is an error naming the series.
func TestMetricsWant(t *testing.T) {
	m := Metrics{`a_total{x="1"}`: 2, "b": 0}
	rec := &errorTB{TB: t}
	m.Want(rec, map[string]float64{`a_total{x="1"}`: 2, "b": 0})
	if len(rec.errs) != 0 {
		t.Errorf("matching series: %q", rec.errs)
	}
	m.Want(rec, map[string]float64{`a_total{x="1"}`: 3, "c": 0})
	slices.Sort(rec.errs)
	if want := []string{`a_total{x="1"} = 2 (present true), want 3`, "c = 0 (present false), want 0"}; !slices.Equal(rec.errs, want) {
		t.Errorf("errors %q, want %q", rec.errs, want)
	}
}
