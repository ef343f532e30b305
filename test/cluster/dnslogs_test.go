package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// dnsLogPods are the pod log directories (namespace_pod_uid) of the
// components that answer the pods' lookups: ours, CoreDNS and node-cache.
var dnsLogPods = []string{"dnsconfigurer-dns", "node-local-dns", "coredns", "node-cache"}

// dnsLogKeep bounds the lines a dnsLogs keeps.
const dnsLogKeep = 50000

// dnsLogs keeps what the DNS components' containers log, read from
// kubelet's pod log directory while the test runs: kubelet removes a
// pod's logs with the pod, so a pod replaced in a step is gone by the
// time a failure is reported.
type dnsLogs struct {
	dirs []string

	mu    sync.Mutex
	read  map[string]int64 // bytes read of each file
	lines []dnsLogLine
}

// dnsLogLine is one line a container logged.
type dnsLogLine struct {
	at   time.Time
	text string // "pod: text"
}

// span is a time span [from, to].
type span struct{ from, to time.Time }

// keepDNSLogs reads the DNS components' logs on every node every 200 ms
// until ctx ends, and once more then.
func (c *Cluster) keepDNSLogs(ctx context.Context) *dnsLogs {
	l := &dnsLogs{read: map[string]int64{}}
	for _, n := range c.Nodes {
		l.dirs = append(l.dirs, n.podLogs())
	}
	go func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			l.poll()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return l
}

// poll reads what the files got since the last poll.
func (l *dnsLogs) poll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, dir := range l.dirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*", "*", "*.log"))
		for _, f := range files {
			pod := filepath.Base(filepath.Dir(filepath.Dir(f)))
			if !slices.ContainsFunc(dnsLogPods, func(p string) bool { return strings.Contains(pod, p) }) {
				continue
			}
			l.readFile(f, pod)
		}
	}
}

// readFile reads f's whole lines from where the last read stopped.
func (l *dnsLogs) readFile(f, pod string) {
	fh, err := os.Open(f)
	if err != nil {
		return
	}
	defer fh.Close()
	if _, err := fh.Seek(l.read[f], io.SeekStart); err != nil {
		return
	}
	b, err := io.ReadAll(io.LimitReader(fh, 8<<20))
	if err != nil {
		return
	}
	end := bytes.LastIndexByte(b, '\n')
	if end < 0 {
		return
	}
	l.read[f] += int64(end + 1)
	for _, s := range strings.Split(string(b[:end]), "\n") {
		// The CRI log format: RFC 3339 time, stream, tag, text.
		ts, rest, ok := strings.Cut(s, " ")
		if !ok {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			continue
		}
		if f := strings.SplitN(rest, " ", 3); len(f) == 3 {
			rest = f[2]
		}
		// Logged queries only when they failed.
		if strings.Contains(rest, "msg=query ") && !strings.Contains(rest, "rcode=SERVFAIL") && !strings.Contains(rest, "rcode=REFUSED") {
			continue
		}
		if len(l.lines) == dnsLogKeep {
			l.lines = slices.Delete(l.lines, 0, dnsLogKeep/10)
		}
		l.lines = append(l.lines, dnsLogLine{at, pod + ": " + rest})
	}
}

// first returns when a pod whose log directory contains pod first logged
// a line containing text.
func (l *dnsLogs) first(pod, text string) (time.Time, bool) {
	l.poll()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range l.lines {
		p, t, _ := strings.Cut(x.text, ": ")
		if strings.Contains(p, pod) && strings.Contains(t, text) {
			return x.at, true
		}
	}
	return time.Time{}, false
}

// around returns the lines logged within margin of each span, oldest
// first, at most limit.
func (l *dnsLogs) around(spans []span, margin time.Duration, limit int) string {
	l.poll()
	l.mu.Lock()
	var lines []dnsLogLine
	for _, x := range l.lines {
		if slices.ContainsFunc(spans, func(s span) bool { return !x.at.Before(s.from.Add(-margin)) && !x.at.After(s.to.Add(margin)) }) {
			lines = append(lines, x)
		}
	}
	l.mu.Unlock()
	slices.SortStableFunc(lines, func(a, b dnsLogLine) int { return a.at.Compare(b.at) })
	var b strings.Builder
	for i, x := range lines {
		if i == limit {
			fmt.Fprintf(&b, "... %d more\n", len(lines)-limit)
			break
		}
		fmt.Fprintf(&b, "%s %s\n", x.at.Local().Format("15:04:05.000"), x.text)
	}
	return b.String()
}

func TestDNSLogs(t *testing.T) {
	dir := t.TempDir()
	write := func(pod, text string) {
		d := filepath.Join(dir, "pod-logs", pod, "c")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(filepath.Join(d, "0.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(text); err != nil {
			t.Fatal(err)
		}
	}
	nodeLocal := "dnsconfigurer-node_dnsconfigurer-node-local-dns-x_u1"
	write(nodeLocal, "2026-11-29T23:13:14.000000000Z stderr F too early\n"+
		"2026-11-29T23:13:15.050000000Z stderr F msg=\"notrack table removed\"\n"+
		"2026-11-29T23:13:15.060000000Z stderr F msg=query rcode=NOERROR\n"+
		"not a log line\n"+
		"2026-11-29T23:13:15.070000000Z stderr P half a li")
	write("kube-system_coredns-1_u2", "2026-11-29T23:13:15.040000000Z stdout F [INFO] SIGTERM\n")
	write("default_web-1_u3", "2026-11-29T23:13:15.050000000Z stdout F not DNS\n")
	c := &Cluster{Nodes: []*Node{{Dir: dir}}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // one poll now; around polls again
	l := c.keepDNSLogs(ctx)
	l.poll()
	// The rest of the line comes after a poll; the pod is then removed.
	write(nodeLocal, "ne\n2026-11-29T23:13:15.080000000Z stderr F msg=query rcode=SERVFAIL\n")
	l.poll()
	if err := os.RemoveAll(filepath.Join(dir, "pod-logs", nodeLocal)); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 29, 23, 13, 15, 500e6, time.UTC)
	got := l.around([]span{{at, at}}, time.Second, 10)
	var texts []string
	for _, x := range strings.Split(strings.TrimSpace(got), "\n") {
		_, text, _ := strings.Cut(x, ": ")
		texts = append(texts, text)
	}
	want := []string{"[INFO] SIGTERM", `msg="notrack table removed"`, "half a line", "msg=query rcode=SERVFAIL"}
	if !slices.Equal(texts, want) {
		t.Errorf("got\n%s\nwant the texts %q", got, want)
	}
	if got := l.around([]span{{at, at}}, time.Second, 1); !strings.HasSuffix(got, "... 3 more\n") {
		t.Errorf("limit 1: got\n%s", got)
	}
	if at, ok := l.first("node-local-dns-x_u1", "rcode=SERVFAIL"); !ok || at.Nanosecond() != 80e6 {
		t.Errorf("first SERVFAIL of the node-local pod: %v %v", at, ok)
	}
	if _, ok := l.first("coredns", "rcode=SERVFAIL"); ok {
		t.Error("a SERVFAIL found in CoreDNS's lines")
	}
}
