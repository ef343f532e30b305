package filewatch

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait bounds every wait for a change; one normally takes milliseconds.
const wait = 10 * time.Second

// relink points the symlink link at target atomically (ln -sfn via rename).
func relink(t *testing.T, target, link string) {
	t.Helper()
	tmp := link + "_tmp"
	symlink(t, target, tmp)
	if err := os.Rename(tmp, link); err != nil {
		t.Fatal(err)
	}
}

// configMap lays out dir as kubelet's AtomicWriter does: a timestamped
// directory holding the files, "..data" linking to it, and each file a
// link into "..data". A second call swaps in a new version: a new
// timestamped directory, a "..data_tmp" link renamed over "..data", and the
// old directory removed.
func configMap(t *testing.T, dir, ts string, files map[string]string) {
	t.Helper()
	old := swap(t, dir, ts, files)
	if old != "" {
		if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
			t.Fatal(err)
		}
	}
}

// swap is configMap's swap without the removal of the old directory: the
// "..data" rename alone must be seen. It returns the old directory.
func swap(t *testing.T, dir, ts string, files map[string]string) string {
	t.Helper()
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	tsDir := filepath.Join(dir, ts)
	if err := os.Mkdir(tsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		testkit.WriteFile(t, filepath.Join(tsDir, name), content)
	}
	relink(t, ts, filepath.Join(dir, "..data"))
	for name := range files {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); err != nil {
			symlink(t, filepath.Join("..data", name), link)
		}
	}
	return old
}

// withoutEvents turns fsnotify off: the poll alone must see changes.
func withoutEvents(o *options) { o.notify = false }

// start watches paths until the test ends, and waits for the watch to stop.
func start(t *testing.T, paths []string, opts ...Option) <-chan struct{} {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := Watch(ctx, paths, opts...)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		closed(t, ch)
	})
	return ch
}

// closed waits for ch to be closed, draining it.
func closed(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	deadline := time.After(wait)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("the watch did not stop after cancel")
		}
	}
}

// until receives changes until read returns want; it fails after wait.
func until(t *testing.T, ch <-chan struct{}, read func() string, want string) {
	t.Helper()
	deadline := time.After(wait)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				t.Fatal("the change channel was closed")
			}
			if read() == want {
				return
			}
		case <-deadline:
			t.Fatalf("no change to %q reported within %v; read %q", want, wait, read())
		}
	}
}

// quiet fails when a change is reported while several polls and debounce
// periods pass. It bounds a wait for nothing; it synchronises nothing.
func quiet(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
		t.Fatal("a change was reported when nothing changed")
	case <-time.After(200 * time.Millisecond):
	}
}

func readFile(path string) func() string {
	return func() string {
		data, err := os.ReadFile(path)
		if err != nil {
			return "error: " + err.Error()
		}
		return string(data)
	}
}

// readDir lists a directory's files with their content.
func readDir(dir string) func() string {
	return func() string {
		entries, _ := os.ReadDir(dir)
		var b strings.Builder
		for _, e := range entries {
			data, _ := os.ReadFile(filepath.Join(dir, e.Name()))
			b.WriteString(e.Name() + "=" + string(data) + ";")
		}
		return b.String()
	}
}

// TestWatchChanges runs each way of changing a file under each way of
// watching it: file events alone (no poll), and the poll alone (no file
// events, as on a file system without inotify).
func TestWatchChanges(t *testing.T) {
	modes := []struct {
		name string
		opts []Option
	}{
		{"events", []Option{WithPoll(0), WithDebounce(10*time.Millisecond, 100*time.Millisecond)}},
		{"poll", []Option{withoutEvents, WithPoll(10 * time.Millisecond), WithDebounce(10*time.Millisecond, 100*time.Millisecond)}},
	}
	tests := []struct {
		name string
		// setup lays out dir and returns the path to watch and how to
		// read it.
		setup  func(t *testing.T, dir string) (string, func() string)
		change func(t *testing.T, dir string)
		want   string
	}{
		{
			name:   "write in place",
			setup:  file("conf", "one\n"),
			change: func(t *testing.T, dir string) { testkit.WriteFile(t, filepath.Join(dir, "conf"), "two\n") },
			want:   "two\n",
		},
		{
			name:   "rename over",
			setup:  file("conf", "one\n"),
			change: func(t *testing.T, dir string) { testkit.WriteAtomic(t, filepath.Join(dir, "conf"), "two\n") },
			want:   "two\n",
		},
		{
			name:  "delete then recreate",
			setup: file("conf", "one\n"),
			change: func(t *testing.T, dir string) {
				if err := os.Remove(filepath.Join(dir, "conf")); err != nil {
					t.Fatal(err)
				}
				testkit.WriteFile(t, filepath.Join(dir, "conf"), "two\n")
			},
			want: "two\n",
		},
		{
			name: "missing at start",
			setup: func(t *testing.T, dir string) (string, func() string) {
				return watchedFile(filepath.Join(dir, "conf"))
			},
			change: func(t *testing.T, dir string) { testkit.WriteAtomic(t, filepath.Join(dir, "conf"), "two\n") },
			want:   "two\n",
		},
		{
			name: "ConfigMap swap",
			setup: func(t *testing.T, dir string) (string, func() string) {
				configMap(t, dir, "..2026_11_25_10_00_00.000000001", map[string]string{"conf": "one\n", "other": "x\n"})
				return watchedFile(filepath.Join(dir, "conf"))
			},
			change: func(t *testing.T, dir string) {
				configMap(t, dir, "..2026_11_25_10_01_00.000000002", map[string]string{"conf": "two\n", "other": "x\n"})
			},
			want: "two\n",
		},
		{
			name: "ConfigMap ..data swap, the old version not yet removed",
			setup: func(t *testing.T, dir string) (string, func() string) {
				configMap(t, dir, "..2026_11_25_10_00_00.000000001", map[string]string{"conf": "one\n"})
				return watchedFile(filepath.Join(dir, "conf"))
			},
			change: func(t *testing.T, dir string) {
				swap(t, dir, "..2026_11_25_10_01_00.000000002", map[string]string{"conf": "two\n"})
			},
			want: "two\n",
		},
		{
			name: "ConfigMap directory swap",
			setup: func(t *testing.T, dir string) (string, func() string) {
				cm := filepath.Join(dir, "cm")
				os.Mkdir(cm, 0o755)
				configMap(t, cm, "..2026_11_25_10_00_00.000000001", map[string]string{"a.yaml": "one\n"})
				return cm, readDir(filepath.Join(cm, "..data"))
			},
			change: func(t *testing.T, dir string) {
				configMap(t, filepath.Join(dir, "cm"), "..2026_11_25_10_01_00.000000002", map[string]string{"a.yaml": "two\n"})
			},
			want: "a.yaml=two\n;",
		},
		{
			name: "symlink re-pointed",
			setup: func(t *testing.T, dir string) (string, func() string) {
				testkit.WriteFile(t, filepath.Join(dir, "a"), "one\n")
				testkit.WriteFile(t, filepath.Join(dir, "b"), "two\n")
				symlink(t, "a", filepath.Join(dir, "conf"))
				return watchedFile(filepath.Join(dir, "conf"))
			},
			change: func(t *testing.T, dir string) { relink(t, "b", filepath.Join(dir, "conf")) },
			want:   "two\n",
		},
		{
			name: "symlink target in another directory renamed over",
			setup: func(t *testing.T, dir string) (string, func() string) {
				os.Mkdir(filepath.Join(dir, "run"), 0o755)
				os.Mkdir(filepath.Join(dir, "etc"), 0o755)
				testkit.WriteFile(t, filepath.Join(dir, "run", "stub"), "one\n")
				symlink(t, "../run/stub", filepath.Join(dir, "etc", "conf"))
				return watchedFile(filepath.Join(dir, "etc", "conf"))
			},
			change: func(t *testing.T, dir string) { testkit.WriteAtomic(t, filepath.Join(dir, "run", "stub"), "two\n") },
			want:   "two\n",
		},
		{
			name: "in-place write through a hard link elsewhere",
			setup: func(t *testing.T, dir string) (string, func() string) {
				os.Mkdir(filepath.Join(dir, "node"), 0o755)
				os.Mkdir(filepath.Join(dir, "pod"), 0o755)
				testkit.WriteFile(t, filepath.Join(dir, "node", "conf"), "one\n")
				if err := os.Link(filepath.Join(dir, "node", "conf"), filepath.Join(dir, "pod", "conf")); err != nil {
					t.Skipf("hard link: %v", err)
				}
				return watchedFile(filepath.Join(dir, "pod", "conf"))
			},
			change: func(t *testing.T, dir string) { testkit.WriteFile(t, filepath.Join(dir, "node", "conf"), "two\n") },
			want:   "two\n",
		},
		{
			name:   "file added to a watched directory",
			setup:  dirWith("d", "a", "one\n"),
			change: func(t *testing.T, dir string) { testkit.WriteFile(t, filepath.Join(dir, "d", "b"), "two\n") },
			want:   "a=one\n;b=two\n;",
		},
		{
			name:   "file in a watched directory written in place",
			setup:  dirWith("d", "a", "one\n"),
			change: func(t *testing.T, dir string) { testkit.WriteFile(t, filepath.Join(dir, "d", "a"), "two\n") },
			want:   "a=two\n;",
		},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					dir := t.TempDir()
					path, read := tt.setup(t, dir)
					ch := start(t, []string{path}, m.opts...)
					tt.change(t, dir)
					until(t, ch, read, tt.want)
				})
			}
		})
	}
}

func file(name, content string) func(t *testing.T, dir string) (string, func() string) {
	return func(t *testing.T, dir string) (string, func() string) {
		path := filepath.Join(dir, name)
		testkit.WriteFile(t, path, content)
		return watchedFile(path)
	}
}

// symlink makes link point at target.
func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// watchedFile is what a setup returns for the file at path.
func watchedFile(path string) (string, func() string) { return path, readFile(path) }

// dirWith watches a directory name holding one file.
func dirWith(name, file, content string) func(t *testing.T, dir string) (string, func() string) {
	return func(t *testing.T, dir string) (string, func() string) {
		d := filepath.Join(dir, name)
		os.Mkdir(d, 0o755)
		testkit.WriteFile(t, filepath.Join(d, file), content)
		return d, readDir(d)
	}
}

// TestWatchIgnores: changes the watched path does not lead to report
// nothing: another file in the same directory, the old target of a
// re-pointed link, a settled file at every poll.
func TestWatchIgnores(t *testing.T) {
	dir := t.TempDir()
	conf, a, b := filepath.Join(dir, "conf"), filepath.Join(dir, "a"), filepath.Join(dir, "b")
	testkit.WriteFile(t, a, "one\n")
	testkit.WriteFile(t, b, "two\n")
	old := time.Now().Add(-time.Hour)
	for _, p := range []string{a, b} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	symlink(t, "a", conf)
	ch := start(t, []string{conf}, WithPoll(10*time.Millisecond), WithDebounce(10*time.Millisecond, 0))
	testkit.WriteFile(t, filepath.Join(dir, "unrelated"), "x\n")
	quiet(t, ch)

	relink(t, "b", conf)
	until(t, ch, readFile(conf), "two\n")
	quiet(t, ch)
	testkit.WriteFile(t, a, "one again\n")
	quiet(t, ch)
	testkit.WriteFile(t, b, "three\n")
	until(t, ch, readFile(conf), "three\n")
}

// TestWatchSameStamp: a same-size write that keeps the inode and mtime,
// as in one mtime tick of a coarse file system, is seen by the poll alone
// through the content hash of a file whose stamp is not settled.
func TestWatchSameStamp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conf")
	mtime := time.Now().Add(time.Second) // not settled for three seconds
	testkit.WriteFile(t, path, "one\n")
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	before := Stat(path)
	ch := start(t, []string{path}, withoutEvents, WithPoll(10*time.Millisecond), WithDebounce(10*time.Millisecond, 0))
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("two\n"), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	if after := Stat(path); after != before {
		t.Fatalf("the stamp changed: %+v, %+v", before, after)
	}
	until(t, ch, readFile(path), "two\n")
}

// TestWatchBurst: a burst of writes is reported once it is quiet, and a
// burst that never ends still within maxWait.
func TestWatchBurst(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conf")
	testkit.WriteFile(t, path, "0\n")
	ch := start(t, []string{path}, WithPoll(0), WithDebounce(time.Hour, 50*time.Millisecond))
	deadline := time.After(wait)
	for i := 0; ; i++ {
		select {
		case <-ch:
			t.Logf("reported during a burst, after %d writes", i)
			return
		case <-deadline:
			t.Fatal("a burst delayed the report past maxWait")
		default:
		}
		testkit.WriteFile(t, path, "x\n")
	}
}

// TestWatchAllowMissing: a path whose directory is missing fails Watch,
// unless allowed; the poll then sees the directory and file appear.
func TestWatchAllowMissing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "later", "conf")
	if _, err := Watch(t.Context(), []string{path}); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "later") {
		t.Fatalf("missing directory: err = %v, want one naming it", err)
	}
	ch := start(t, []string{path}, AllowMissing(path), WithPoll(10*time.Millisecond), WithDebounce(10*time.Millisecond, 0))
	os.Mkdir(filepath.Join(dir, "later"), 0o755)
	testkit.WriteFile(t, path, "one\n")
	until(t, ch, readFile(path), "one\n")
	// Watched by events now too.
	testkit.WriteFile(t, path, "two\n")
	until(t, ch, readFile(path), "two\n")
}

func TestWatchErrors(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	path := filepath.Join(t.TempDir(), "conf")
	tests := []struct {
		name  string
		ctx   context.Context
		paths []string
		want  error
		text  string
	}{
		{"no path", context.Background(), nil, nil, "filewatch: no path to watch"},
		{"cancelled", cancelled, []string{path}, context.Canceled, path},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch, err := Watch(tt.ctx, tt.paths)
			if ch != nil || err == nil || tt.want != nil && !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.text) {
				t.Fatalf("Watch = %v, %v; want an error %v containing %q", ch, err, tt.want, tt.text)
			}
		})
	}
}

// TestWatchStops: after cancel the channel is closed and no goroutine of
// the watch, nor of fsnotify, is left.
func TestWatchStops(t *testing.T) {
	defer goleak.VerifyNone(t)
	path := filepath.Join(t.TempDir(), "conf")
	testkit.WriteFile(t, path, "one\n")
	for _, opts := range [][]Option{nil, {withoutEvents}} {
		ctx, cancel := context.WithCancel(context.Background())
		ch, err := Watch(ctx, []string{path}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		testkit.WriteFile(t, path, "two\n")
		cancel()
		closed(t, ch)
	}
}

func TestResolve(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	configMap(t, dir, "..2026_11_25_10_00_00.000000001", map[string]string{"conf": "one\n"})
	os.Mkdir(filepath.Join(dir, "etc"), 0o755)
	os.Symlink(filepath.Join(dir, "conf"), filepath.Join(dir, "etc", "abs"))
	os.Symlink("loop", filepath.Join(dir, "loop"))
	tests := []struct {
		name  string
		path  string
		links []string
		final string
	}{
		{"plain file", filepath.Join(dir, "..2026_11_25_10_00_00.000000001", "conf"), nil, filepath.Join(dir, "..2026_11_25_10_00_00.000000001", "conf")},
		{"missing", filepath.Join(dir, "nope", "conf"), nil, filepath.Join(dir, "nope", "conf")},
		{"ConfigMap file", filepath.Join(dir, "conf"),
			[]string{filepath.Join(dir, "conf"), filepath.Join(dir, "..data")},
			filepath.Join(dir, "..2026_11_25_10_00_00.000000001", "conf")},
		{"absolute link to a ConfigMap file", filepath.Join(dir, "etc", "abs"),
			[]string{filepath.Join(dir, "etc", "abs"), filepath.Join(dir, "conf"), filepath.Join(dir, "..data")},
			filepath.Join(dir, "..2026_11_25_10_00_00.000000001", "conf")},
		{"a loop stops", filepath.Join(dir, "loop"), slices.Repeat([]string{filepath.Join(dir, "loop")}, maxHops), filepath.Join(dir, "loop")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			links, final := resolve(tt.path)
			if !slices.Equal(links, tt.links) || final != tt.final {
				t.Errorf("resolve(%q) = %q, %q; want %q, %q", tt.path, links, final, tt.links, tt.final)
			}
		})
	}
}

// TestWatchProblemOnce: a problem of the watch is logged and passed to
// OnError once until it changes.
func TestWatchProblemOnce(t *testing.T) {
	var got []string
	w := &watcher{o: options{log: slog.New(slog.DiscardHandler), onError: func(err error) { got = append(got, err.Error()) }}}
	for _, err := range []error{errors.New("a"), errors.New("a"), nil, errors.New("a"), errors.New("b"), errors.New("b")} {
		w.problem(err)
	}
	if want := []string{"a", "a", "b"}; !slices.Equal(got, want) {
		t.Errorf("OnError got %q, want %q", got, want)
	}
}
