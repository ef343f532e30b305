package hostresolv

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wait = 5 * time.Second // deadline for an expected snapshot; normally ~10-20ms

func next(t *testing.T, ch <-chan Snapshot) Snapshot {
	t.Helper()
	select {
	case s, ok := <-ch:
		if !ok {
			t.Fatal("subscription closed")
		}
		return s
	case <-time.After(wait):
		t.Fatal("no snapshot within the deadline")
	}
	return Snapshot{}
}

// quiet asserts that no snapshot arrives while the debounce window passes
// several times over.
func quiet(t *testing.T, ch <-chan Snapshot) {
	t.Helper()
	select {
	case s := <-ch:
		t.Fatalf("unexpected snapshot %d: %+v", s.Generation, s)
	case <-time.After(250 * time.Millisecond):
	}
}

func ns(s Snapshot) []string { return s.Config.Nameservers }

func start(t testing.TB, path string, opts ...Option) (*Watcher, <-chan Snapshot) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := Watch(ctx, path, append([]Option{WithResync(0)}, opts...)...)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ch, unsub := w.Subscribe()
	t.Cleanup(func() {
		unsub()
		cancel()
		<-w.Done()
	})
	return w, ch
}

func TestWatchChanges(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "resolv.conf")
	testkit.WriteFile(t, path, "nameserver 192.0.2.1\n")
	_, ch := start(t, path)

	s := next(t, ch)
	if s.Generation != 1 || !reflect.DeepEqual(ns(s), []string{"192.0.2.1"}) || s.Err != nil || s.Problem != nil || s.Hash == "" {
		t.Fatalf("initial snapshot %+v", s)
	}
	steps := []struct {
		name   string
		change func()
		want   []string // nameservers; nil means a problem snapshot keeping the old config
	}{
		{"in-place write", func() { testkit.WriteFile(t, path, "nameserver 192.0.2.2\n") }, []string{"192.0.2.2"}},
		{"rename over", func() { testkit.WriteAtomic(t, path, "nameserver 192.0.2.3\n") }, []string{"192.0.2.3"}},
		{"delete", func() { os.Remove(path) }, nil},
		{"re-create", func() { testkit.WriteFile(t, path, "nameserver 192.0.2.4\n") }, []string{"192.0.2.4"}},
		{"bare nameserver line", func() { testkit.WriteFile(t, path, "nameserver\n") }, nil},
		{"fixed", func() { testkit.WriteFile(t, path, "nameserver 192.0.2.5\nsearch a.example\n") }, []string{"192.0.2.5"}},
		{"all nameservers removed", func() { testkit.WriteFile(t, path, "search a.example\n") }, nil},
		{"back", func() { testkit.WriteFile(t, path, "nameserver 192.0.2.6\n") }, []string{"192.0.2.6"}},
	}
	gen := s.Generation
	good := ns(s)
	for _, st := range steps {
		st.change()
		s := next(t, ch)
		gen++
		if s.Generation != gen {
			t.Fatalf("%s: generation %d, want %d", st.name, s.Generation, gen)
		}
		if st.want == nil {
			if s.Problem == nil || s.Err != nil || !reflect.DeepEqual(ns(s), good) {
				t.Fatalf("%s: want a problem with the last good config kept, got %+v", st.name, s)
			}
		} else {
			if s.Problem != nil || s.Err != nil || !reflect.DeepEqual(ns(s), st.want) {
				t.Fatalf("%s: got %+v, want nameservers %v", st.name, s, st.want)
			}
			good = st.want
		}
		quiet(t, ch)
	}
	// Rewriting identical content publishes nothing.
	testkit.WriteFile(t, path, "nameserver 192.0.2.6\n")
	quiet(t, ch)
}

func TestWatchSymlinks(t *testing.T) {
	dir := t.TempDir()
	run := filepath.Join(dir, "run", "systemd", "resolve")
	os.MkdirAll(run, 0o755)
	stub := filepath.Join(run, "stub-resolv.conf")
	other := filepath.Join(run, "resolv.conf")
	testkit.WriteFile(t, stub, "nameserver 192.0.2.1\n")
	testkit.WriteFile(t, other, "nameserver 192.0.2.9\n")
	etc := filepath.Join(dir, "etc")
	os.MkdirAll(etc, 0o755)
	link := filepath.Join(etc, "resolv.conf")
	if err := os.Symlink("../run/systemd/resolve/stub-resolv.conf", link); err != nil {
		t.Fatal(err)
	}
	_, ch := start(t, link)
	if s := next(t, ch); !reflect.DeepEqual(ns(s), []string{"192.0.2.1"}) || s.Path != link {
		t.Fatalf("initial %+v", s)
	}

	// The link target changes (systemd-resolved rewrites its file by rename).
	testkit.WriteAtomic(t, stub, "nameserver 192.0.2.2\n")
	if s := next(t, ch); !reflect.DeepEqual(ns(s), []string{"192.0.2.2"}) {
		t.Fatalf("target change: %+v", s)
	}
	quiet(t, ch)

	// The link is re-pointed atomically (ln -sf via rename).
	tmp := link + ".new"
	os.Symlink(other, tmp)
	if err := os.Rename(tmp, link); err != nil {
		t.Fatal(err)
	}
	if s := next(t, ch); !reflect.DeepEqual(ns(s), []string{"192.0.2.9"}) {
		t.Fatalf("re-pointed: %+v", s)
	}
	quiet(t, ch)

	// Now the new target's changes are followed, and the old one's are not.
	testkit.WriteFile(t, stub, "nameserver 192.0.2.3\n")
	quiet(t, ch)
	testkit.WriteFile(t, other, "nameserver 192.0.2.10\n")
	if s := next(t, ch); !reflect.DeepEqual(ns(s), []string{"192.0.2.10"}) {
		t.Fatalf("new target change: %+v", s)
	}
}

func TestWatchBurst(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "resolv.conf")
	testkit.WriteFile(t, path, "nameserver 192.0.2.1\n")
	w, ch := start(t, path)
	next(t, ch)
	for i := 0; i < 1000; i++ {
		if i%2 == 0 {
			testkit.WriteFile(t, path, fmt.Sprintf("nameserver 10.0.%d.%d\n", i/256, i%256))
		} else {
			testkit.WriteAtomic(t, path, fmt.Sprintf("nameserver 10.0.%d.%d\n", i/256, i%256))
		}
	}
	last := "10.0.3.231" // i = 999
	var got []Snapshot
	deadline := time.After(wait)
	for {
		select {
		case s := <-ch:
			got = append(got, s)
			if s.Problem != nil || s.Err != nil {
				t.Fatalf("problem during the burst: %+v", s)
			}
			if reflect.DeepEqual(ns(s), []string{last}) {
				quiet(t, ch)
				// Generations only grow, and no two snapshots carry the same file.
				seen := map[string]bool{}
				for i, s := range got {
					if i > 0 && s.Generation <= got[i-1].Generation || seen[s.Hash] {
						t.Fatalf("snapshot sequence not monotonic or repeats: %d", i)
					}
					seen[s.Hash] = true
				}
				t.Logf("1000 writes produced %d snapshots (generation %d)", len(got), w.Current().Generation)
				if len(got) > 200 {
					t.Errorf("debounce did not coalesce: %d snapshots", len(got))
				}
				return
			}
		case <-deadline:
			t.Fatalf("never saw the last write; got %d snapshots, last %+v", len(got), w.Current())
		}
	}
}

func TestWatchStrictMode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "resolv.conf")
	testkit.WriteFile(t, path, "nameserver 192.0.2.1\n")
	_, ch := start(t, path, WithMode(Strict))
	next(t, ch)
	testkit.WriteAtomic(t, path, "nameserver\n")
	s := next(t, ch)
	if s.Err == nil || len(ns(s)) != 0 || !errors.Is(s.Err, resolvconf.ErrEmptyNameserver) {
		t.Fatalf("strict: broken file must be what pods get: %+v", s)
	}
	// kubelet accepts a file without nameservers; strict does too.
	testkit.WriteAtomic(t, path, "search a.example\n")
	s = next(t, ch)
	if s.Err != nil || len(ns(s)) != 0 || !reflect.DeepEqual(s.Config.Searches, []string{"a.example"}) {
		t.Fatalf("strict, no nameservers: %+v", s)
	}
}

func TestWatchMissingAtStart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "resolv.conf")
	_, ch := start(t, path)
	s := next(t, ch)
	if !errors.Is(s.Err, fs.ErrNotExist) || !errors.Is(s.Problem, fs.ErrNotExist) {
		t.Fatalf("missing file at start: %+v", s)
	}
	testkit.WriteAtomic(t, path, "nameserver 192.0.2.1\n")
	if s := next(t, ch); s.Err != nil || s.Problem != nil || !reflect.DeepEqual(ns(s), []string{"192.0.2.1"}) {
		t.Fatalf("created: %+v", s)
	}
	if _, err := Watch(context.Background(), filepath.Join(dir, "no-such-dir", "resolv.conf")); err == nil || !strings.Contains(err.Error(), "no-such-dir") {
		t.Fatalf("missing directory: err = %v", err)
	}
}

func TestWatchDisabled(t *testing.T) {
	w, err := Watch(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if s := w.Current(); !s.Disabled || s.Err != nil || s.Generation != 1 {
		t.Fatalf("disabled: %+v", s)
	}
	ch, _ := w.Subscribe()
	if s, ok := <-ch; !ok || !s.Disabled {
		t.Fatal("subscriber of a stopped watcher gets the snapshot")
	}
	if _, ok := <-ch; ok {
		t.Fatal("channel of a stopped watcher must be closed")
	}
}

func TestWatchLoopbackAndAuto(t *testing.T) {
	dir := t.TempDir()
	etc := filepath.Join(dir, "etc-resolv.conf")
	resolvedDir := filepath.Join(dir, "resolve")
	resolved := filepath.Join(resolvedDir, "resolv.conf")
	testkit.WriteFile(t, etc, "nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch corp.example\n")

	t.Run("an explicit path keeps the file but never hands loopback to pods", func(t *testing.T) {
		_, ch := start(t, etc)
		s := next(t, ch)
		if len(ns(s)) != 0 || !reflect.DeepEqual(s.DroppedLoopback, []string{"127.0.0.53"}) || !reflect.DeepEqual(s.Raw.Nameservers, []string{"127.0.0.53"}) {
			t.Fatalf("%+v", s)
		}
	})
	t.Run("auto without systemd-resolved's file stays on the stub file", func(t *testing.T) {
		_, ch := start(t, Auto, WithAutoPaths(etc, resolved))
		if s := next(t, ch); s.Path != etc {
			t.Fatalf("%+v", s)
		}
	})
	os.MkdirAll(resolvedDir, 0o755)
	testkit.WriteFile(t, resolved, "nameserver 192.0.2.53\nnameserver ::1\nsearch corp.example\n")
	t.Run("auto switches to systemd-resolved's file and back", func(t *testing.T) {
		_, ch := start(t, Auto, WithAutoPaths(etc, resolved))
		s := next(t, ch)
		if s.Path != resolved || !reflect.DeepEqual(ns(s), []string{"192.0.2.53"}) || !reflect.DeepEqual(s.DroppedLoopback, []string{"::1"}) {
			t.Fatalf("switch: %+v", s)
		}
		testkit.WriteFile(t, resolved, "nameserver 192.0.2.54\n")
		if s := next(t, ch); s.Path != resolved || !reflect.DeepEqual(ns(s), []string{"192.0.2.54"}) {
			t.Fatalf("resolved change: %+v", s)
		}
		testkit.WriteAtomic(t, etc, "nameserver 192.0.2.1\n")
		if s := next(t, ch); s.Path != etc || !reflect.DeepEqual(ns(s), []string{"192.0.2.1"}) {
			t.Fatalf("back to the primary: %+v", s)
		}
	})
}

func TestWatchManySubscribers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "resolv.conf")
	testkit.WriteFile(t, path, "nameserver 192.0.2.0\n")
	ctx, cancel := context.WithCancel(context.Background())
	reg := prometheus.NewRegistry()
	w, err := Watch(ctx, path, WithRegistry(reg), WithResync(0))
	if err != nil {
		t.Fatal(err)
	}
	const subs, writes = 50, 20
	var wg sync.WaitGroup
	var mu sync.Mutex // finals
	finals := make([]string, subs)
	final := func(i int) string {
		mu.Lock()
		defer mu.Unlock()
		return finals[i]
	}
	for i := 0; i < subs; i++ {
		ch, unsub := w.Subscribe()
		if i%10 == 9 {
			unsub() // some leave early; their channel is closed
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			var last uint64
			for s := range ch {
				if s.Generation < last {
					t.Errorf("subscriber %d: generation went back", i)
				}
				last = s.Generation
				if len(ns(s)) > 0 {
					mu.Lock()
					finals[i] = ns(s)[0]
					mu.Unlock()
				}
				_ = w.Current()
			}
		}(i)
	}
	for i := 1; i <= writes; i++ {
		testkit.WriteAtomic(t, path, fmt.Sprintf("nameserver 192.0.2.%d\n", i))
		testkit.WaitEqual(t, wait, fmt.Sprintf("the nameserver after write %d", i),
			func() string { return w.Current().Config.Nameservers[0] }, fmt.Sprintf("192.0.2.%d", i))
	}
	// Every subscriber still in gets the last snapshot.
	last := fmt.Sprintf("192.0.2.%d", writes)
	testkit.WaitFor(t, wait, func() error {
		for i := range subs {
			if i%10 != 9 && final(i) != last {
				return fmt.Errorf("subscriber %d on %q, want %q", i, final(i), last)
			}
		}
		return nil
	})
	cancel()
	<-w.Done()
	wg.Wait() // every channel is closed on stop
	for i := range subs {
		if i%10 != 9 && final(i) != last {
			t.Errorf("subscriber %d ended on %q", i, final(i))
		}
	}
	names := []string{}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		names = append(names, mf.GetName())
		if mf.GetName() == "dnsconfigurer_hostresolv_generation" {
			if got := mf.GetMetric()[0].GetGauge().GetValue(); got != float64(writes+1) {
				t.Errorf("generation metric = %v, want %d", got, writes+1)
			}
		}
	}
	sort.Strings(names)
	if !reflect.DeepEqual(names, []string{"dnsconfigurer_hostresolv_file_healthy", "dnsconfigurer_hostresolv_generation", "dnsconfigurer_hostresolv_reloads_total"}) {
		t.Errorf("metrics = %v", names)
	}
}

// BenchmarkPropagation measures file changed → subscriber has the new
// snapshot, with the default debounce, for a rename-over write.
func BenchmarkPropagation(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "resolv.conf")
	testkit.WriteFile(b, path, "nameserver 192.0.2.0\n")
	_, ch := start(b, path)
	<-ch
	var lat []time.Duration
	i := 0
	for b.Loop() {
		i++
		want := fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
		t0 := time.Now()
		testkit.WriteAtomic(b, path, "nameserver "+want+"\n")
		for s := range ch {
			if s.Config.Nameservers[0] == want {
				break
			}
		}
		lat = append(lat, time.Since(t0))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
