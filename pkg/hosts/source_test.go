package hosts

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

func newTestSource(t *testing.T, path string, cfg Config, opts ...Option) (*Source, *testkit.Buffer) {
	t.Helper()
	logs := &testkit.Buffer{}
	opts = append([]Option{WithLogger(slog.New(slog.NewTextHandler(logs, nil)))}, opts...)
	s, err := NewSource(context.Background(), path, cfg, opts...)
	if err != nil {
		t.Fatalf("NewSource: %v", err)
	}
	return s, logs
}

// metrics gathers the Source's metrics as testkit.Key → value.
func metrics(t *testing.T, s *Source) testkit.Metrics {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(s); err != nil {
		t.Fatal(err)
	}
	return testkit.Gather(t, reg)
}

func wantMetrics(t *testing.T, s *Source, want map[string]float64) {
	t.Helper()
	got := metrics(t, s)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

func a(t *testing.T, s *Source, name string) []string {
	t.Helper()
	rrs, _ := s.Lookup(name, dns.TypeA)
	return values(rrs)
}

// TestSourceReloads drives the checks by hand (check is what Run calls at
// each tick), so that every step is deterministic.
func TestSourceReloads(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "NodeHosts")
	testkit.WriteAtomic(t, path, "10.0.0.1 node-1\n")
	s, logs := newTestSource(t, path, Config{})

	steps := []struct {
		name    string
		change  func(t *testing.T)
		node1   []string // A records of node-1.
		gen     uint64
		err     error // errors.Is Status().Err
		errText string
		metrics map[string]float64
	}{
		{
			name:  "first read",
			node1: []string{"10.0.0.1"}, gen: 1,
			metrics: map[string]float64{"dnsconfigurer_hosts_entries": 1, "dnsconfigurer_hosts_reloads_total": 1, "dnsconfigurer_hosts_file_healthy": 1},
		},
		{
			name:   "a new file renamed over it",
			change: func(t *testing.T) { testkit.WriteAtomic(t, path, "10.0.0.2 node-1\n10.0.0.3 node-2\nbad line\n") },
			node1:  []string{"10.0.0.2"}, gen: 2,
			metrics: map[string]float64{"dnsconfigurer_hosts_entries": 2, "dnsconfigurer_hosts_reloads_total": 2, "dnsconfigurer_hosts_warnings": 1},
		},
		{
			name:   "the same content again keeps the table",
			change: func(t *testing.T) { testkit.WriteAtomic(t, path, "10.0.0.2 node-1\n10.0.0.3 node-2\nbad line\n") },
			node1:  []string{"10.0.0.2"}, gen: 2,
			metrics: map[string]float64{"dnsconfigurer_hosts_reloads_total": 2},
		},
		{
			name:   "removed: the last good table stays",
			change: func(t *testing.T) { os.Remove(path) },
			node1:  []string{"10.0.0.2"}, gen: 2, err: fs.ErrNotExist,
			metrics: map[string]float64{testkit.Key("dnsconfigurer_hosts_reload_errors_total", "reason", "missing"): 1, "dnsconfigurer_hosts_file_healthy": 0,
				"dnsconfigurer_hosts_entries": 2},
		},
		{
			name:   "still missing: counted once",
			change: func(t *testing.T) {},
			node1:  []string{"10.0.0.2"}, gen: 2, err: fs.ErrNotExist,
			metrics: map[string]float64{testkit.Key("dnsconfigurer_hosts_reload_errors_total", "reason", "missing"): 1},
		},
		{
			name: "a directory in its place",
			change: func(t *testing.T) {
				if err := os.Mkdir(path, 0o755); err != nil {
					t.Fatal(err)
				}
			},
			node1: []string{"10.0.0.2"}, gen: 2, err: ErrNotRegular, errText: "a directory",
			metrics: map[string]float64{testkit.Key("dnsconfigurer_hosts_reload_errors_total", "reason", "not_regular"): 1},
		},
		{
			name: "over MaxFileSize: refused from its size",
			change: func(t *testing.T) {
				os.Remove(path)
				f, err := os.Create(path)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if err := f.Truncate(MaxFileSize + 1); err != nil { // sparse
					t.Fatal(err)
				}
			},
			node1: []string{"10.0.0.2"}, gen: 2, err: ErrTooLarge, errText: "(16777217 bytes)",
			metrics: map[string]float64{testkit.Key("dnsconfigurer_hosts_reload_errors_total", "reason", "too_large"): 1},
		},
		{
			name: "a line over the bound",
			change: func(t *testing.T) {
				testkit.WriteAtomic(t, path, "10.0.0.9 node-1 "+strings.Repeat("x ", MaxLineLength))
			},
			node1: []string{"10.0.0.2"}, gen: 2, err: ErrLineTooLong, errText: "line 1",
			metrics: map[string]float64{testkit.Key("dnsconfigurer_hosts_reload_errors_total", "reason", "line_too_long"): 1},
		},
		{
			name:   "good again",
			change: func(t *testing.T) { testkit.WriteAtomic(t, path, "10.0.0.4 node-1\n") },
			node1:  []string{"10.0.0.4"}, gen: 3,
			metrics: map[string]float64{"dnsconfigurer_hosts_entries": 1, "dnsconfigurer_hosts_reloads_total": 3,
				"dnsconfigurer_hosts_file_healthy": 1, "dnsconfigurer_hosts_warnings": 0},
		},
	}
	for i, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if i > 0 {
				st.change(t)
				s.check()
			}
			if got := a(t, s, "node-1."); !equal(got, st.node1) {
				t.Errorf("node-1. A = %v, want %v", got, st.node1)
			}
			status := s.Status()
			if status.Generation != st.gen {
				t.Errorf("Generation %d, want %d", status.Generation, st.gen)
			}
			if status.Reads != uint64(i+1) {
				t.Errorf("Reads %d, want %d", status.Reads, i+1)
			}
			switch {
			case st.err == nil && status.Err != nil:
				t.Errorf("Err %v, want nil", status.Err)
			case st.err != nil && !errors.Is(status.Err, st.err):
				t.Errorf("Err %v, want %v", status.Err, st.err)
			case st.err != nil && (!strings.Contains(status.Err.Error(), st.errText) || !strings.Contains(status.Err.Error(), path)):
				t.Errorf("Err %q does not name the file or say %q", status.Err, st.errText)
			}
			wantMetrics(t, s, st.metrics)
		})
	}
	if n := strings.Count(logs.String(), "the last good entries stay in service"); n != 4 {
		t.Errorf("%d problems logged, want 4 (one per distinct problem):\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), "hosts file is good again"); n != 1 {
		t.Errorf("recovery logged %d times, want 1", n)
	}
	if m := metrics(t, s); m["dnsconfigurer_hosts_last_reload_success_timestamp_seconds"] < float64(time.Now().Add(-time.Hour).Unix()) {
		t.Errorf("last success timestamp %v", m["dnsconfigurer_hosts_last_reload_success_timestamp_seconds"])
	}
}

func equal(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

// TestSourceStamp: a file whose inode, size and mtime are unchanged is not
// read again; a file renamed over it is, even with the same size and mtime.
func TestSourceStamp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hosts")
	old := time.Now().Add(-time.Hour)
	put := func(content string) {
		testkit.WriteAtomic(t, path, content)
		if err := os.Chtimes(path, old, old); err != nil {
			t.Fatal(err)
		}
	}
	put("10.0.0.1 a\n")
	s, _ := newTestSource(t, path, Config{})
	s.check()
	if r := s.Status().Reads; r != 1 {
		t.Fatalf("an unchanged file was read again: Reads %d", r)
	}
	put("10.0.0.2 a\n") // same size, same mtime, another inode
	s.check()
	if got := a(t, s, "a."); !equal(got, []string{"10.0.0.2"}) || s.Status().Reads != 2 {
		t.Fatalf("after a rename: a. A = %v, Reads %d", got, s.Status().Reads)
	}
}

// TestSourceEmptyFileConfirmed: an in-place writer's truncation is not
// served; an emptied file is, once a second read confirms it.
func TestSourceEmptyFileConfirmed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	testkit.WriteAtomic(t, path, "10.0.0.1 a\n")
	s, _ := newTestSource(t, path, Config{})
	if err := os.WriteFile(path, nil, 0o644); err != nil { // truncated in place
		t.Fatal(err)
	}
	s.check()
	if got := a(t, s, "a."); !equal(got, []string{"10.0.0.1"}) || s.Status().Generation != 1 || s.Status().Err != nil {
		t.Fatalf("after the truncation: a. A = %v, %+v", got, s.Status())
	}
	if err := os.WriteFile(path, []byte("10.0.0.2 a\n"), 0o644); err != nil { // the writer finishes
		t.Fatal(err)
	}
	s.check()
	if got := a(t, s, "a."); !equal(got, []string{"10.0.0.2"}) || s.Status().Generation != 2 {
		t.Fatalf("after the write: a. A = %v, %+v", got, s.Status())
	}
	if err := os.WriteFile(path, []byte("# all gone\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.check()
	if s.Status().Entries != 1 {
		t.Fatalf("an emptied file was served at once: %+v", s.Status())
	}
	s.check()
	if st := s.Status(); st.Entries != 0 || st.Generation != 3 {
		t.Fatalf("an emptied file was not served when confirmed: %+v", st)
	}
}

func TestSourceStartsWithoutFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	cfg := Config{Overrides: []Override{{Name: "pinned", Addresses: []netip.Addr{netip.MustParseAddr("10.9.9.9")}}}}
	s, logs := newTestSource(t, path, cfg)
	st := s.Status()
	if !errors.Is(st.Err, fs.ErrNotExist) || st.Generation != 0 || st.Entries != 1 || !st.Loaded.IsZero() {
		t.Fatalf("Status %+v", st)
	}
	if got := a(t, s, "pinned."); !equal(got, []string{"10.9.9.9"}) {
		t.Fatalf("overrides not served: %v", got)
	}
	if strings.Count(logs.String(), "level=ERROR") != 1 {
		t.Errorf("the missing file was not logged as an error:\n%s", logs.String())
	}
	testkit.WriteAtomic(t, path, "10.0.0.1 a\n10.0.0.2 pinned\n")
	s.check()
	if got := a(t, s, "a."); !equal(got, []string{"10.0.0.1"}) {
		t.Errorf("a. A = %v", got)
	}
	if got := a(t, s, "pinned."); !equal(got, []string{"10.9.9.9"}) {
		t.Errorf("pinned. A = %v, want the override", got)
	}
}

func TestSourceSetConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	testkit.WriteAtomic(t, path, "10.0.0.1 a\n")
	s, _ := newTestSource(t, path, Config{})
	os.Remove(path) // SetConfig works from the last good content
	s.check()
	updated := s.Updated()
	cfg := Config{TTL: 10 * time.Second, Overrides: []Override{{Name: "b", Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.2")}}}}
	if err := s.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	select {
	case <-updated:
	default:
		t.Error("Updated not closed by SetConfig")
	}
	rrs, _ := s.Lookup("a.", dns.TypeA)
	if len(rrs) != 1 || rrs[0].Header().Ttl != 10 {
		t.Errorf("a. A = %v, want the file's record with TTL 10", rrs)
	}
	if got := a(t, s, "b."); !equal(got, []string{"10.0.0.2"}) {
		t.Errorf("b. A = %v", got)
	}
	gen := s.Status().Generation
	if err := s.SetConfig(Config{TTL: -time.Second}); err == nil || err.Error() != "ttl: -1s: must not be negative" {
		t.Errorf("SetConfig(bad) = %v", err)
	}
	if s.Status().Generation != gen || len(a(t, s, "b.")) != 1 {
		t.Error("a bad config changed the table")
	}
}

// waitFor waits, without sleeping, until cond holds for the Source's
// status: it re-checks after every read the Source reports.
func waitFor(t *testing.T, s *Source, what string, cond func(Status) bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		updated := s.Updated()
		if cond(s.Status()) {
			return
		}
		select {
		case <-updated:
		case <-deadline:
			t.Fatalf("timed out waiting for %s; status %+v", what, s.Status())
		}
	}
}

func TestSourceRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	testkit.WriteAtomic(t, path, "10.0.0.1 a\n")
	s, _ := newTestSource(t, path, Config{}, WithInterval(5*time.Millisecond))
	run := testkit.Go(t, "Run", s.Run)

	testkit.WriteAtomic(t, path, "10.0.0.2 a\n")
	waitFor(t, s, "the new file", func(Status) bool { return equal(a(t, s, "a."), []string{"10.0.0.2"}) })
	if err := os.WriteFile(path, []byte("10.0.0.3 a\n10.0.0.4 b\n"), 0o644); err != nil { // in place
		t.Fatal(err)
	}
	waitFor(t, s, "the file written in place", func(st Status) bool { return st.Entries == 2 })
	os.Remove(path)
	waitFor(t, s, "the problem", func(st Status) bool { return errors.Is(st.Err, fs.ErrNotExist) })
	if got := a(t, s, "b."); !equal(got, []string{"10.0.0.4"}) {
		t.Errorf("the last good table was not kept: b. A = %v", got)
	}
	if err := s.Run(context.Background()); err == nil {
		t.Error("a second Run did not fail")
	}
	run.Stop()
}

// TestSourceReadOnce: interval 0 reads the file once (hosts.reload: 0s,
// CoreDNS's reload 0). A second Source that watches the same file is the
// control: once it has seen the change, the first still has the old table.
func TestSourceReadOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	testkit.WriteAtomic(t, path, "10.0.0.1 a\n")
	once, _ := newTestSource(t, path, Config{}, WithInterval(0))
	watched, _ := newTestSource(t, path, Config{}, WithInterval(5*time.Millisecond))
	testkit.Go(t, "Run", once.Run)
	testkit.Go(t, "Run", watched.Run)

	testkit.WriteAtomic(t, path, "10.0.0.2 a\n")
	waitFor(t, watched, "the new file", func(Status) bool { return equal(a(t, watched, "a."), []string{"10.0.0.2"}) })
	if got := a(t, once, "a."); !equal(got, []string{"10.0.0.1"}) {
		t.Errorf("a source with interval 0 reloaded: a. A = %v, want [10.0.0.1]", got)
	}
}

func TestNewSourceErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	testkit.WriteAtomic(t, path, "10.0.0.1 a\n")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		path string
		cfg  Config
		opts []Option
		want string
	}{
		{"no path", context.Background(), "", Config{}, nil, "hosts: no file: use NewTable for overrides alone"},
		{"bad config", context.Background(), path, Config{Overrides: []Override{{Name: "x"}}}, nil, "overrides[0].addresses: at least one address is required"},
		{"bad interval", context.Background(), path, Config{}, []Option{WithInterval(-time.Second)}, "hosts: interval -1s: must not be negative"},
		{"cancelled", cancelled, path, Config{}, nil, `hosts: read "` + path + `": context canceled`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSource(tc.ctx, tc.path, tc.cfg, tc.opts...)
			if s != nil || err == nil || err.Error() != tc.want {
				t.Fatalf("NewSource = %v, %v; want error %q", s, err, tc.want)
			}
		})
	}
}
