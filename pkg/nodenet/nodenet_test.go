package nodenet

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeLinks is Links in memory; dummy reports whether the dummy type exists.
type fakeLinks struct {
	dummy bool
	devs  map[string][]Addr
	ours  map[string]bool // devices with LinkAlias
	fail  error
}

func newFakeLinks(dummy bool) *fakeLinks {
	return &fakeLinks{dummy: dummy, devs: map[string][]Addr{"lo": {{IP: netip.MustParseAddr("127.0.0.1")}}}, ours: map[string]bool{}}
}

func (f *fakeLinks) Lookup(name string) (bool, bool, error) {
	_, ok := f.devs[name]
	return ok, f.ours[name], f.fail
}
func (f *fakeLinks) AddDummy(name string) error {
	if !f.dummy {
		return errors.New("operation not supported")
	}
	f.devs[name], f.ours[name] = nil, true
	return nil
}
func (f *fakeLinks) Delete(name string) error {
	if !f.ours[name] {
		return errors.New("not ours")
	}
	delete(f.devs, name)
	return nil
}
func (f *fakeLinks) Addrs(dev string) ([]Addr, error) {
	a, ok := f.devs[dev]
	if !ok {
		return nil, errors.New("no such device")
	}
	return a, f.fail
}
func (f *fakeLinks) AddAddr(dev string, ip netip.Addr) error {
	f.devs[dev] = append(f.devs[dev], Addr{IP: ip, Ours: true})
	return f.fail
}
func (f *fakeLinks) DelAddr(dev string, ip netip.Addr) error {
	f.devs[dev] = slices.DeleteFunc(f.devs[dev], func(a Addr) bool { return a.IP == ip })
	return nil
}

// ipsOf is the addresses of dev.
func (f *fakeLinks) ipsOf(dev string) []netip.Addr {
	var out []netip.Addr
	for _, a := range f.devs[dev] {
		out = append(out, a.IP)
	}
	return out
}

// fakeNotrack is Notrack in memory.
type fakeNotrack struct {
	ips     []netip.Addr
	applied int
}

func (f *fakeNotrack) Apply(ips []netip.Addr, _ uint16) error {
	f.ips = slices.Clone(ips)
	f.applied++
	return nil
}
func (f *fakeNotrack) Present(ips []netip.Addr, _ uint16) (bool, error) {
	return slices.Equal(f.ips, ips), nil
}
func (f *fakeNotrack) Remove() (bool, error) {
	had := f.ips != nil
	f.ips = nil
	return had, nil
}

var ips = []netip.Addr{netip.MustParseAddr("169.254.20.10"), netip.MustParseAddr("10.96.0.10")}

func newManager(t *testing.T, lock string, links Links, nt Notrack, skip bool) *Manager {
	t.Helper()
	m, err := New(Config{IPs: slices.Clone(ips), SetupInterface: true, SetupNotrack: true, SkipTeardown: skip,
		LockFile: lock, Links: links, Notrack: nt})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestLifecycle(t *testing.T) {
	for _, tt := range []struct {
		name    string
		dummy   bool
		wantDev string
	}{
		{"dummy device", true, "nodelocaldns"},
		{"no dummy type: lo", false, "lo"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			links, nt := newFakeLinks(tt.dummy), &fakeNotrack{}
			m := newManager(t, filepath.Join(t.TempDir(), "run", "nl.lock"), links, nt, false)
			if err := m.Prepare(context.Background()); err != nil {
				t.Fatal(err)
			}
			if m.Device() != tt.wantDev {
				t.Fatalf("device %q, want %q", m.Device(), tt.wantDev)
			}
			for _, ip := range ips {
				if !slices.Contains(links.ipsOf(tt.wantDev), ip) {
					t.Errorf("%s not on %s: %v", ip, tt.wantDev, links.devs)
				}
			}
			if nt.applied != 0 {
				t.Error("notrack table installed before the stage serves")
			}
			if _, err := m.EnsureNotrack(); err != nil || nt.applied != 1 {
				t.Fatalf("EnsureNotrack: %v, applied %d", err, nt.applied)
			}
			// Something removes an address and the table: the check puts them back.
			links.devs[tt.wantDev] = links.devs[tt.wantDev][:len(links.devs[tt.wantDev])-1]
			nt.Remove()
			m.check()
			if got := testutil.ToFloat64(metric(t, m, "address")); got != 1 {
				t.Errorf("address repairs = %v, want 1", got)
			}
			if got := testutil.ToFloat64(metric(t, m, "notrack")); got != 1 {
				t.Errorf("notrack repairs = %v, want 1", got)
			}
			if ok, _ := nt.Present(ips, 53); !ok {
				t.Error("table not put back")
			}
			if err := m.RemoveNotrack(); err != nil || nt.ips != nil {
				t.Fatalf("RemoveNotrack: %v, table %v", err, nt.ips)
			}
			if err := m.Release(); err != nil {
				t.Fatal(err)
			}
			if _, ok := links.devs["nodelocaldns"]; ok {
				t.Error("dummy device left")
			}
			if !slices.Equal(links.ipsOf("lo"), []netip.Addr{netip.MustParseAddr("127.0.0.1")}) {
				t.Errorf("lo after teardown: %v, want 127.0.0.1 only", links.devs["lo"])
			}
		})
	}
}

// metric is the repairs counter of what, as a one-series collector.
func metric(t *testing.T, m *Manager, what string) *labelled {
	t.Helper()
	return &labelled{m: m, what: what}
}

func TestSurgeAndSkip(t *testing.T) {
	lock := filepath.Join(t.TempDir(), "nl.lock")
	links, nt := newFakeLinks(false), &fakeNotrack{}
	old := newManager(t, lock, links, nt, false)
	if err := old.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	old.EnsureNotrack()
	// The surge: a new instance starts while the old one runs.
	next := newManager(t, lock, links, nt, false)
	if err := next.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The old one stops: the new one holds the lease, so nothing is removed.
	if err := old.RemoveNotrack(); err != nil {
		t.Fatal(err)
	}
	old.Release()
	if ok, _ := nt.Present(ips, 53); !ok || len(links.devs["lo"]) != 3 {
		t.Fatalf("the stopping instance removed the setup of the running one: table %v, lo %v", nt.ips, links.devs["lo"])
	}
	// The last one stops with SkipTeardown: still nothing removed.
	skip := newManager(t, lock, links, nt, true)
	skip.Prepare(context.Background())
	next.RemoveNotrack()
	next.Release()
	skip.RemoveNotrack()
	skip.Release()
	if ok, _ := nt.Present(ips, 53); !ok || len(links.devs["lo"]) != 3 {
		t.Fatalf("SkipTeardown removed the setup: table %v, lo %v", nt.ips, links.devs["lo"])
	}
	// The last one, without: everything goes.
	last := newManager(t, lock, links, nt, false)
	last.Prepare(context.Background())
	last.RemoveNotrack()
	last.Release()
	if nt.ips != nil || len(links.devs["lo"]) != 1 {
		t.Fatalf("the last instance left table %v, lo %v", nt.ips, links.devs["lo"])
	}
}

func TestLeaseWaitsForTeardown(t *testing.T) {
	lock := filepath.Join(t.TempDir(), "nl.lock")
	l, err := Acquire(context.Background(), lock)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Last() {
		t.Fatal("only holder is not last")
	}
	// l now holds it exclusively (tearing down): a new instance waits.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Acquire(ctx, lock); err == nil || !strings.Contains(err.Error(), "another instance holds it") {
		t.Fatalf("Acquire during a teardown = %v, want it to wait", err)
	}
	l.Close()
	l2, err := Acquire(context.Background(), lock)
	if err != nil {
		t.Fatal(err)
	}
	l2.Close()
}

func TestConfigErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no address", Config{LockFile: "/x"}, "no address"},
		{"loopback", Config{IPs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}, LockFile: "/x"}, `IPs[0] "127.0.0.1"`},
		{"no lock", Config{IPs: ips}, "no lock file"},
		{"no links", Config{IPs: ips, LockFile: "/x", SetupInterface: true}, "Links and Notrack are required"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New = %v, want %q", err, tt.want)
			}
		})
	}
}

// labelled is one series of dnsconfigurer_nodenet_repairs_total, for
// testutil.ToFloat64.
type labelled struct {
	m    *Manager
	what string
}

func (l *labelled) Describe(ch chan<- *prometheus.Desc) { ch <- l.m.repairDesc }
func (l *labelled) Collect(ch chan<- prometheus.Metric) {
	for i, name := range whatNames {
		if name == l.what {
			ch <- prometheus.MustNewConstMetric(l.m.repairDesc, prometheus.CounterValue, float64(l.m.repairs[i].Load()), name)
		}
	}
}

// TestStaleTableAtStart: a notrack table left by an instance that did not
// stop (killed) is removed when the next one prepares, unless another
// instance runs (a surge: the table is its) or SkipTeardown asks to keep
// the setup; it comes back once the stage serves (EnsureNotrack).
func TestStaleTableAtStart(t *testing.T) {
	for _, tt := range []struct {
		name        string
		otherRuns   bool
		skip        bool
		wantRemoved bool
	}{
		{"alone", false, false, true},
		{"another instance runs", true, false, false},
		{"skip teardown", false, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			lock := filepath.Join(t.TempDir(), "nl.lock")
			links, nt := newFakeLinks(false), &fakeNotrack{}
			nt.Apply(ips, 53) // left by a killed instance
			if tt.otherRuns {
				l, err := Acquire(context.Background(), lock)
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
			}
			m := newManager(t, lock, links, nt, tt.skip)
			if err := m.Prepare(context.Background()); err != nil {
				t.Fatal(err)
			}
			if removed := nt.ips == nil; removed != tt.wantRemoved {
				t.Fatalf("table removed at start: %v, want %v", removed, tt.wantRemoved)
			}
			if _, err := m.EnsureNotrack(); err != nil {
				t.Fatal(err)
			}
			if ok, _ := nt.Present(ips, 53); !ok {
				t.Error("table not in place once the stage serves")
			}
		})
	}
}

// TestLeaseAlone: Alone keeps the lease shared whatever it finds, so a
// holder that checks it never lets another instance tear down under it.
func TestLeaseAlone(t *testing.T) {
	lock := filepath.Join(t.TempDir(), "nl.lock")
	a, err := Acquire(context.Background(), lock)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if !a.Alone() {
		t.Fatal("the only holder is not alone")
	}
	b, err := Acquire(context.Background(), lock) // does not wait: a holds it shared
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.Alone() || b.Alone() {
		t.Fatal("Alone with two holders")
	}
	// b's failed check did not drop its lock: a is not last.
	if a.Last() {
		t.Fatal("a is last while b holds the lease")
	}
}

// TestLeaseNewer: an instance sees a newer one while that one runs, and
// whether the newest one serves; the newer one sees none; the entry of an
// instance killed without removing it counts as gone (and is removed).
func TestLeaseNewer(t *testing.T) {
	lock := filepath.Join(t.TempDir(), "nl.lock")
	acquire := func() *Lease {
		l, err := Acquire(context.Background(), lock)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	check := func(what string, l *Lease, newer, serving bool) {
		t.Helper()
		if n, s := l.Newer(); n != newer || s != serving {
			t.Errorf("%s: Newer() = %v, %v; want %v, %v", what, n, s, newer, serving)
		}
	}
	a := acquire()
	defer a.Close()
	if err := a.Serving(true); err != nil {
		t.Fatal(err)
	}
	check("a alone", a, false, false)
	b := acquire()
	check("a, b starting", a, true, false)
	check("b", b, false, false)
	if err := b.Serving(true); err != nil {
		t.Fatal(err)
	}
	check("a, b serving", a, true, true)
	c := acquire() // the newest decides
	check("a, c starting after b", a, true, false)
	c.Close()
	check("a, c gone", a, true, true)
	if err := b.Serving(false); err != nil {
		t.Fatal(err)
	}
	check("a, b stopping", a, true, false)
	b.Close()
	check("a, b gone", a, false, false)
	// d is killed: its entry stays, but nobody holds its lock.
	d := acquire()
	d.entry.Close()
	d.f.Close()
	entry := filepath.Join(d.dir, d.name)
	if _, err := os.Stat(entry); err != nil {
		t.Fatalf("the killed instance's entry: %v", err)
	}
	check("a, d killed", a, false, false)
	if _, err := os.Stat(entry); !os.IsNotExist(err) {
		t.Errorf("the killed instance's entry is still there: %v", err)
	}
	// A new instance sweeps what a killed older one left.
	e := acquire()
	e.entry.Close()
	e.f.Close()
	f := acquire()
	defer f.Close()
	left, _ := os.ReadDir(a.dir)
	if len(left) != 2 {
		t.Errorf("entries after f started: %v, want a's and f's", left)
	}
}
