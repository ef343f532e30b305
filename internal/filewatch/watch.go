package filewatch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/dnsconfigurer/dnsconfigurer/internal/safefile"
)

const (
	// DefaultPoll is how often the files are stat'ed.
	DefaultPoll = 5 * time.Second
	// DefaultQuiet is how long the files must be quiet before a change
	// is reported.
	DefaultQuiet = 100 * time.Millisecond
)

// maxHops bounds a symlink chain, as Linux does.
const maxHops = 40

type options struct {
	log            *slog.Logger
	quiet, maxWait time.Duration
	poll           time.Duration
	notify         bool // use file events; tests turn them off to prove the poll alone
	missingOK      []string
	onError        func(error)
}

// Option configures Watch.
type Option func(*options)

// WithLogger sets the logger for problems of the watch (default: discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithDebounce sets how long the files must be quiet before a change is
// reported (default DefaultQuiet). maxWait bounds how long a burst of
// changes can delay it (0: 10 times quiet).
func WithDebounce(quiet, maxWait time.Duration) Option {
	return func(o *options) { o.quiet, o.maxWait = quiet, maxWait }
}

// WithPoll sets how often the files are stat'ed (default DefaultPoll). The
// poll sees what no file event reports: a file system without inotify, a
// bind-mounted file written from outside, a lost event. 0 turns it off.
func WithPoll(d time.Duration) Option { return func(o *options) { o.poll = d } }

// AllowMissing lets the directories of paths be missing at start. They
// are watched once they appear.
func AllowMissing(paths ...string) Option {
	return func(o *options) { o.missingOK = append(o.missingOK, paths...) }
}

// OnError calls f with each problem of the watch itself, besides logging
// it: an event queue overflow, a directory that cannot be watched.
func OnError(f func(error)) Option { return func(o *options) { o.onError = f } }

// Watch watches the files at paths until ctx is done. The channel receives
// a value once the files have changed and then been quiet for the debounce
// time; a slow receiver gets one value for many changes. It is closed when
// the watch has stopped, after ctx is done. Read the files after Watch
// returns: a change before it is not reported.
//
// Watch fails when ctx is done before the watch is set up, or when the
// directory of a path is missing and AllowMissing does not name the path.
// Without file events (no inotify), it warns and polls alone.
func Watch(ctx context.Context, paths []string, opts ...Option) (<-chan struct{}, error) {
	if len(paths) == 0 {
		return nil, errors.New("filewatch: no path to watch")
	}
	o := options{log: slog.New(slog.DiscardHandler), quiet: DefaultQuiet, poll: DefaultPoll, notify: true}
	for _, opt := range opts {
		opt(&o)
	}
	o.quiet = max(o.quiet, 0)
	if o.maxWait <= 0 {
		o.maxWait = 10 * o.quiet
	}
	w := &watcher{o: o, ch: make(chan struct{}, 1), missingOK: map[string]bool{}}
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("watch %q: %w", p, err)
		}
		w.paths = append(w.paths, abs)
	}
	for _, p := range o.missingOK {
		if abs, err := filepath.Abs(p); err == nil {
			w.missingOK[abs] = true
		}
	}
	if o.notify {
		fsw, err := fsnotify.NewWatcher()
		switch {
		case err == nil:
			w.fsw = fsw
		case o.poll > 0:
			o.log.Warn("file events unavailable; polling alone", "paths", w.paths, "every", o.poll, "err", err)
		default:
			return nil, fmt.Errorf("watch %q: %w", paths, err)
		}
	}
	var err error
	if !safefile.Await(ctx, func() { err = w.setup() }) {
		w.close()
		return nil, fmt.Errorf("watch %q: %w", paths, ctx.Err())
	}
	if err != nil {
		w.close()
		return nil, err
	}
	go w.run(ctx)
	return w.ch, nil
}

// watcher is one Watch. Its fields other than ch are used by one step at a
// time: setup, then the steps run awaits.
type watcher struct {
	o         options
	paths     []string // absolute
	missingOK map[string]bool
	fsw       *fsnotify.Watcher // nil: polling alone
	ch        chan struct{}

	watching    map[string]bool // paths added to fsw
	names       map[string]bool // paths whose events matter
	trees       map[string]bool // directories whose entries' events matter
	vers        []version       // of paths, as of the last step
	lastProblem string
}

func (w *watcher) close() {
	if w.fsw != nil {
		w.fsw.Close()
	}
}

// setup checks that the directories are there, then takes the first step.
func (w *watcher) setup() error {
	for _, p := range w.paths {
		if w.missingOK[p] {
			continue
		}
		if _, err := os.Stat(filepath.Dir(p)); err != nil {
			return fmt.Errorf("watch directory %q: %w", filepath.Dir(p), err)
		}
	}
	w.vers = make([]version, len(w.paths))
	w.step(time.Now())
	return nil
}

// run reports changes until ctx is done. Every step that can block in the
// kernel (stat, read, adding a watch) runs through safefile.Await, so run
// returns as soon as ctx is done whatever the file system does.
func (w *watcher) run(ctx context.Context) {
	defer close(w.ch)
	defer w.close()
	var (
		events <-chan fsnotify.Event
		errs   <-chan error
		poll   <-chan time.Time
	)
	if w.fsw != nil {
		events, errs = w.fsw.Events, w.fsw.Errors
	}
	if w.o.poll > 0 {
		t := time.NewTicker(w.o.poll)
		defer t.Stop()
		poll = t.C
	}
	quiet := time.NewTimer(time.Hour)
	quiet.Stop()
	defer quiet.Stop()
	var (
		pending bool
		first   time.Time
	)
	arm := func() {
		now := time.Now()
		if !pending {
			pending, first = true, now
		}
		quiet.Reset(max(min(w.o.quiet, w.o.maxWait-now.Sub(first)), 0))
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if w.names[ev.Name] || w.trees[filepath.Dir(ev.Name)] {
				arm()
			}
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			w.report(err)
			arm() // a lost event may hide a change
		case <-quiet.C:
			pending = false
			if !safefile.Await(ctx, func() { w.step(time.Now()) }) {
				return
			}
			select {
			case w.ch <- struct{}{}:
			default: // the receiver has one already
			}
		case <-poll:
			var changed bool
			if !safefile.Await(ctx, func() { changed = w.step(time.Now()) }) {
				return
			}
			if changed {
				arm()
			}
		}
	}
}

// step watches what the paths lead to now and reads their versions. It
// reports whether a version changed since the last step.
func (w *watcher) step(now time.Time) bool {
	w.rewatch()
	changed := false
	for i, p := range w.paths {
		v := versionOf(p, w.vers[i], now)
		changed = changed || v.changed(w.vers[i])
		w.vers[i] = v
	}
	return changed
}

// rewatch watches the directory of every symlink met on the way from each
// path to its file, and the file's directory: that sees renames over the
// file, a re-pointed link and a ConfigMap's ..data swap. It watches the
// file too, which sees an in-place write made through another path (a
// bind mount, a hard link); a rename over the file makes a new inode, so
// the file is added again at every step. A directory is watched with its
// entries.
func (w *watcher) rewatch() {
	w.names, w.trees = map[string]bool{}, map[string]bool{}
	want := map[string]bool{}
	for _, p := range w.paths {
		links, final := resolve(p)
		for _, l := range links {
			w.names[l] = true
			want[filepath.Dir(l)] = true
		}
		w.names[final] = true
		want[filepath.Dir(final)] = true
		if fi, err := os.Stat(final); err == nil {
			want[final] = true
			if fi.IsDir() {
				w.trees[final] = true
			}
		}
	}
	if w.fsw == nil {
		return
	}
	var problems []error
	for _, p := range slices.Sorted(maps.Keys(want)) {
		err := w.fsw.Add(p)
		switch {
		case err == nil:
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
			delete(want, p) // a later step sees it appear
		case errors.Is(err, fsnotify.ErrClosed):
			return // the watch has stopped
		default:
			delete(want, p)
			problems = append(problems, fmt.Errorf("watch %q: %w", p, err))
		}
	}
	for p := range w.watching {
		if !want[p] {
			w.fsw.Remove(p)
		}
	}
	w.watching = want
	w.problem(errors.Join(problems...))
}

// problem reports a problem of rewatch once, until it changes.
func (w *watcher) problem(err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if msg == w.lastProblem {
		return
	}
	w.lastProblem = msg
	if err != nil {
		w.report(err)
	}
}

func (w *watcher) report(err error) {
	w.o.log.Warn("file watch problem", "paths", w.paths, "poll", w.o.poll, "err", err)
	if w.o.onError != nil {
		w.o.onError(err)
	}
}

// resolve follows the symlinks of path, in any of its components. It
// returns each link met and the path they lead to. It stops at a missing
// component, and after maxHops links.
func resolve(path string) (links []string, final string) {
	p := path
	for range maxHops {
		link, rest := firstLink(p)
		if link == "" {
			return links, p
		}
		target, err := os.Readlink(link)
		if err != nil {
			return links, p
		}
		links = append(links, link)
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(link), target)
		}
		p = filepath.Join(target, rest)
	}
	return links, p
}

// firstLink splits the absolute path p after its first component that is a
// symlink. link is "" when there is none before the end or a missing one.
func firstLink(p string) (link, rest string) {
	i := len(filepath.VolumeName(p)) + 1 // past the root
	for i <= len(p) {
		end := len(p)
		if j := strings.IndexByte(p[i:], filepath.Separator); j >= 0 {
			end = i + j
		}
		fi, err := os.Lstat(p[:end])
		if err != nil {
			return "", ""
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return p[:end], p[min(end+1, len(p)):]
		}
		i = end + 1
	}
	return "", ""
}
