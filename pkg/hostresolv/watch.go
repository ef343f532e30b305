package hostresolv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/filewatch"
	"github.com/dnsconfigurer/dnsconfigurer/internal/safefile"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

// Auto is the resolvConf value that reads /etc/resolv.conf and switches to
// systemd-resolved's upstream file when the former holds only loopback stubs.
const Auto = "auto"

// Default file locations.
const (
	DefaultPath     = v1alpha1.DefaultResolvConf
	SystemdResolved = "/run/systemd/resolve/resolv.conf"
)

// Mode says what a broken file does to the served config.
type Mode int

const (
	// LastGood (the default) keeps serving the last good config while the
	// file is unreadable, unparsable or loses all its nameservers.
	LastGood Mode = iota
	// Strict is kubelet's behaviour: the broken file is what pods get, so
	// Snapshot.Err is set and pods fail.
	Strict
)

// ParseMode reads "last-good" or "strict".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "last-good", "":
		return LastGood, nil
	case "strict":
		return Strict, nil
	}
	return 0, fmt.Errorf("mode %q: must be \"last-good\" or \"strict\"", s)
}

func (m Mode) String() string {
	if m == Strict {
		return "strict"
	}
	return "last-good"
}

// Snapshot is one immutable state of the node resolver config. Never modify
// its slices.
type Snapshot struct {
	// Path is the file the config was read from: the watched path, or
	// systemd-resolved's file when Auto switched to it.
	Path string
	// Disabled is kubelet's resolvConf "": no file.
	Disabled bool
	// Config is what pods in their own network namespace get: the last
	// good config with the loopback rule applied (resolvconf.WithoutLoopback;
	// the policy engine applies the same rule to those pods, and keeps the
	// loopback nameservers of hostNetwork pods).
	Config resolvconf.Config
	// Raw is the last good config as parsed, loopback nameservers included
	// (the cluster DNS server filters its own listen addresses from it).
	Raw resolvconf.Config
	// Lines are where in the file Raw's parts were read, for a trace.
	Lines resolvconf.Lines
	// DroppedLoopback are the nameservers removed from Config.
	DroppedLoopback []string
	// Generation counts published snapshots, starting at 1.
	Generation uint64
	// Hash is the hex SHA-256 of the last good file's path and content.
	Hash string
	// Problem is the latest problem with the file, also while the last good
	// config is still served; nil when the file is fine.
	Problem error
	// Err is set when there is no usable config: in Strict mode while the
	// file is broken, or when no good file was ever read. Pods fail on it,
	// as kubelet fails them.
	Err error
	// Time is when the snapshot was published.
	Time time.Time
}

// Messages are Problem's and Err's texts, "" for nil: the snapshot as
// the node agents and the hostresolv command show it.
func (s Snapshot) Messages() (problem, err string) {
	if s.Problem != nil {
		problem = s.Problem.Error()
	}
	if s.Err != nil {
		err = s.Err.Error()
	}
	return problem, err
}

type options struct {
	log      *slog.Logger
	reg      prometheus.Registerer
	mode     Mode
	debounce time.Duration
	maxWait  time.Duration
	resync   time.Duration
	primary  string                            // the file Auto starts from
	resolved string                            // systemd-resolved's upstream file
	read     func(path string) ([]byte, error) // resolvconf.ReadFile; a test seam
	upstream bool                              // the file lists a DNS server's upstreams, not pods' nameservers
}

// Option configures Watch.
type Option func(*options)

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithRegistry registers the watcher's metrics (default: none).
func WithRegistry(r prometheus.Registerer) Option { return func(o *options) { o.reg = r } }

// ForUpstreams says the file lists a DNS server's upstreams (serve's
// --upstream-resolv-conf), which read Snapshot.Raw: its loopback
// nameservers are not logged as kept from pods.
func ForUpstreams() Option { return func(o *options) { o.upstream = true } }

// WithMode sets LastGood (default) or Strict.
func WithMode(m Mode) Option { return func(o *options) { o.mode = m } }

// WithDebounce sets how long the file must be quiet before it is re-read
// (default 10ms) and the longest a burst of changes can delay a read
// (default 100ms).
func WithDebounce(quiet, maxWait time.Duration) Option {
	return func(o *options) { o.debounce, o.maxWait = quiet, maxWait }
}

// WithResync sets how often the files are stat'ed (filewatch's poll), which
// catches changes no filesystem event reports, e.g. on a file system
// without inotify (default 30s; 0 disables).
func WithResync(d time.Duration) Option { return func(o *options) { o.resync = d } }

// WithAutoPaths sets the files Auto uses (defaults DefaultPath and
// SystemdResolved).
func WithAutoPaths(primary, resolved string) Option {
	return func(o *options) { o.primary, o.resolved = primary, resolved }
}

// Watcher keeps a parsed, validated copy of the node resolver config and
// publishes a Snapshot whenever it changes.
type Watcher struct {
	path     string // as given: a file, Auto or ""
	o        options
	m        *metrics
	switched bool // Auto is on systemd-resolved's file

	mu   sync.Mutex
	cur  Snapshot
	subs map[chan Snapshot]struct{}
	done chan struct{}
}

// Watch reads path and keeps watching it until ctx is done. path "" is
// kubelet's resolvConf switched off (a Disabled snapshot, nothing watched);
// Auto follows DefaultPath and systemd-resolved's file. The first snapshot is
// ready when Watch returns; a missing or broken file at start is not an
// error of Watch but of the snapshot. Watch fails only when the watch itself
// cannot be set up, or when ctx is done before the first read has finished
// (the error then wraps ctx.Err()).
//
// The files are watched with internal/filewatch. They are read with
// resolvconf.ReadFile: a file over 10 MiB is refused before it is read, and
// a named pipe or device in the file's place is refused without blocking.
// Every step that can block in the kernel (the reads, stats and directory
// watches; a hung network file system can stall any of them) runs on its
// own goroutine while the watcher waits for it or for ctx, so Watch and the
// watch loop return as soon as ctx is done; a step still blocked then
// finishes, or stays blocked, on its own.
func Watch(ctx context.Context, path string, opts ...Option) (*Watcher, error) {
	w := &Watcher{path: path, subs: map[chan Snapshot]struct{}{}, done: make(chan struct{})}
	w.o = options{log: slog.New(slog.DiscardHandler), debounce: 10 * time.Millisecond, maxWait: 100 * time.Millisecond,
		resync: 30 * time.Second, primary: DefaultPath, resolved: SystemdResolved, read: resolvconf.ReadFile}
	for _, opt := range opts {
		opt(&w.o)
	}
	w.o.log = w.o.log.With("component", "hostresolv")
	m, err := newMetrics(w.o.reg)
	if err != nil {
		return nil, err
	}
	w.m = m
	if path == "" {
		w.publish(Snapshot{Disabled: true})
		close(w.done)
		return w, nil
	}
	fopts := []filewatch.Option{filewatch.WithLogger(w.o.log), filewatch.WithDebounce(w.o.debounce, w.o.maxWait),
		filewatch.WithPoll(w.o.resync), filewatch.OnError(func(error) { w.m.errors.WithLabelValues("watch").Inc() })}
	if path == Auto {
		fopts = append(fopts, filewatch.AllowMissing(w.o.resolved)) // systemd-resolved may not run here
	}
	changes, err := filewatch.Watch(ctx, w.files(), fopts...)
	if err != nil {
		return nil, err
	}
	if !safefile.Await(ctx, func() { w.reload(true) }) {
		for range changes { // the watch stops with ctx
		}
		return nil, fmt.Errorf("watch %q: %w", path, ctx.Err())
	}
	go w.run(ctx, changes)
	return w, nil
}

// Current returns the latest snapshot.
func (w *Watcher) Current() Snapshot {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cur
}

// Done is closed when the watcher has stopped.
func (w *Watcher) Done() <-chan struct{} { return w.done }

// Subscribe returns a channel that receives the current snapshot at once and
// then every new one. A slow subscriber only misses intermediate snapshots:
// the channel always ends on the latest. The channel is closed when the
// watcher stops or cancel is called.
func (w *Watcher) Subscribe() (<-chan Snapshot, func()) {
	ch := make(chan Snapshot, 1)
	w.mu.Lock()
	ch <- w.cur
	select {
	case <-w.done:
		close(ch)
		w.mu.Unlock()
		return ch, func() {}
	default:
	}
	w.subs[ch] = struct{}{}
	w.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			w.mu.Lock()
			if _, ok := w.subs[ch]; ok {
				delete(w.subs, ch)
				close(ch)
			}
			w.mu.Unlock()
		})
	}
}

// run re-reads the files after every change filewatch reports, until ctx
// is done.
func (w *Watcher) run(ctx context.Context, changes <-chan struct{}) {
	defer func() {
		for range changes { // the watch stops with ctx
		}
		w.mu.Lock()
		close(w.done)
		for ch := range w.subs {
			close(ch)
		}
		w.subs = nil
		w.mu.Unlock()
	}()
	confirm := time.NewTimer(time.Hour)
	confirm.Stop()
	defer confirm.Stop()
	// A problem is confirmed by a second read before it is published: an
	// in-place writer truncates the file before writing it, and a read in
	// between sees an empty file for a moment.
	var problemStat [2]filewatch.Stamp
	// check re-reads the file; it returns false when ctx was done first.
	check := func(final bool) bool {
		var (
			published bool
			st        [2]filewatch.Stamp
		)
		if !safefile.Await(ctx, func() {
			if published = w.reload(final); !published {
				st = w.stamp()
			}
		}) {
			return false
		}
		if !published {
			problemStat = st
			confirm.Reset(2 * w.o.debounce)
		}
		return true
	}
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-changes:
			if !ok || !check(false) {
				return
			}
		case <-confirm.C:
			// The confirming read waits while the file is still being
			// written: a change already reported (select picks at random
			// among ready cases), or a file that changed since the read
			// that saw the problem.
			select {
			case _, ok := <-changes:
				if !ok || !check(false) {
					return
				}
				continue
			default:
			}
			var st [2]filewatch.Stamp
			if !safefile.Await(ctx, func() { st = w.stamp() }) {
				return
			}
			if st != problemStat {
				problemStat = st
				confirm.Reset(2 * w.o.debounce)
				continue
			}
			if !check(true) {
				return
			}
		}
	}
}

// stamp tells the current versions of the files the config may come from.
func (w *Watcher) stamp() [2]filewatch.Stamp {
	var st [2]filewatch.Stamp
	for i, f := range w.files() {
		st[i] = filewatch.Stat(f)
	}
	return st
}

// files are the paths the config may come from.
func (w *Watcher) files() []string {
	if w.path == Auto {
		return []string{w.o.primary, w.o.resolved}
	}
	return []string{w.path}
}

// reload reads the file and publishes a snapshot when something changed. A
// new problem is published only when final is set; otherwise reload returns
// false so that the caller reads again shortly to confirm it.
func (w *Watcher) reload(final bool) bool {
	path := w.path
	if path == Auto {
		path = w.autoPath()
	}
	data, err := w.o.read(path)
	var (
		cfg   resolvconf.Config
		lines resolvconf.Lines
	)
	if err == nil {
		cfg, lines, err = resolvconf.ParseLines(data)
		if err != nil {
			err = fmt.Errorf("parse %q: %w", path, err)
		}
	}
	cur := w.Current()
	if err == nil && len(cfg.Nameservers) == 0 && len(cur.Raw.Nameservers) > 0 && w.o.mode == LastGood {
		err = fmt.Errorf("%q has no nameserver line any more (it had %d); keeping the last good config", path, len(cur.Raw.Nameservers))
	}
	if err != nil {
		if cur.Problem != nil && cur.Problem.Error() == err.Error() {
			return true
		}
		if !final {
			return false
		}
		w.m.reloads.WithLabelValues("error").Inc()
		w.m.errors.WithLabelValues("file").Inc()
		next := cur
		next.Problem = err
		switch {
		case w.o.mode == Strict:
			next.Path, next.Config, next.Raw, next.Lines, next.DroppedLoopback, next.Hash, next.Err = path, resolvconf.Config{}, resolvconf.Config{}, resolvconf.Lines{}, nil, "", err
		case cur.Generation == 0 || cur.Err != nil:
			next.Path, next.Err = path, err
		default:
			w.o.log.Warn("resolver file is broken; pods keep the last good config", "path", path, "err", err, "generation", cur.Generation)
		}
		if next.Err != nil {
			w.o.log.Error("resolver file is broken and there is no good config to serve", "path", path, "err", err)
		}
		w.publish(next)
		return true
	}
	h := sha256.New()
	h.Write([]byte(path + "\x00"))
	h.Write(data)
	hash := hex.EncodeToString(h.Sum(nil))
	if hash == cur.Hash && cur.Problem == nil && cur.Generation > 0 {
		w.m.reloads.WithLabelValues("unchanged").Inc()
		return true
	}
	w.m.reloads.WithLabelValues("ok").Inc()
	next := Snapshot{Path: path, Raw: cfg, Lines: lines, Hash: hash}
	next.Config, next.DroppedLoopback = resolvconf.WithoutLoopback(cfg)
	if len(next.DroppedLoopback) > 0 && !w.o.upstream {
		w.o.log.Warn("loopback nameservers are not handed to pods in their own network namespace (hostNetwork pods keep them)", "path", path, "dropped", next.DroppedLoopback)
	}
	if cur.Problem != nil {
		w.o.log.Info("resolver file is good again", "path", path)
	}
	w.publish(next)
	return true
}

// autoPath picks systemd-resolved's file when the primary file holds only
// loopback stubs and the other file exists, and says so when it switches.
func (w *Watcher) autoPath() string {
	data, err := w.o.read(w.o.primary)
	var cfg resolvconf.Config
	if err == nil {
		cfg, err = resolvconf.ParseBytes(data)
	}
	use := false
	if err == nil && len(cfg.Nameservers) > 0 {
		use = true
		for _, ns := range cfg.Nameservers {
			if !resolvconf.IsLoopback(ns) {
				use = false
				break
			}
		}
	}
	if use {
		if _, err := os.Stat(w.o.resolved); err != nil {
			use = false
		}
	}
	if use != w.switched {
		w.switched = use
		if use {
			w.o.log.Info("only loopback stub nameservers; using systemd-resolved's upstream file", "path", w.o.primary, "using", w.o.resolved)
		} else {
			w.o.log.Info("using the resolver file again", "path", w.o.primary)
		}
	}
	if use {
		return w.o.resolved
	}
	return w.o.primary
}

func (w *Watcher) publish(s Snapshot) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s.Generation = w.cur.Generation + 1
	s.Time = time.Now()
	w.cur = s
	w.m.generation.Set(float64(s.Generation))
	if s.Err != nil || s.Problem != nil {
		w.m.healthy.Set(0)
	} else {
		w.m.healthy.Set(1)
	}
	for ch := range w.subs {
		select {
		case <-ch: // drop the unread older snapshot
		default:
		}
		ch <- s
	}
}
