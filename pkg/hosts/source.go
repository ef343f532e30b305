package hosts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/filewatch"
	"github.com/dnsconfigurer/dnsconfigurer/internal/safefile"
)

// DefaultInterval is how often a Source stats its file (CoreDNS's hosts
// plugin reload default).
const DefaultInterval = 5 * time.Second

// Option configures a Source.
type Option func(*options)

type options struct {
	log      *slog.Logger
	interval time.Duration
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithInterval sets how often the file is stat'ed besides its file events,
// and checked again while the last check left it unsettled (default
// DefaultInterval; 0 reads the file once, as CoreDNS's reload 0).
func WithInterval(d time.Duration) Option { return func(o *options) { o.interval = d } }

// Status is the state of a Source.
type Status struct {
	// Path is the hosts file.
	Path string
	// Generation counts the tables published: each load of a changed
	// file, and each SetConfig. It is 0 while the file has never been
	// read (the overrides alone are served).
	Generation uint64
	// Reads counts the reads of the file, whatever their result.
	Reads uint64
	// Err is the problem of the last read (the file is missing, not a
	// regular file, over a bound, unreadable); nil when it was good.
	// While Err is set the table in service is the last good one.
	Err error
	// Loaded is when the file was last read successfully (zero: never).
	Loaded time.Time
	// Warnings are the problems of the lines skipped in the file in
	// service (at most MaxWarnings and a summary).
	Warnings []Warning
	// Entries is the number of (address, name) entries in service,
	// overrides included.
	Entries int
}

// Source serves the records of a hosts file and the per-name overrides, and
// reloads the file when it changes. Lookup reads the current Table through
// an atomic pointer and is safe for concurrent use.
type Source struct {
	path string
	o    options
	log  *slog.Logger
	ran  atomic.Bool

	table atomic.Pointer[Table]

	// The poller's state, used by one check at a time.
	stamp     filewatch.Stamp
	haveStamp bool            // stamp is the version of the file in service
	hash      [32]byte        // of the file in service
	emptySeen filewatch.Stamp // an empty file seen once, to be confirmed
	lastErr   string          // the problem of the last read, "" if none

	mu       sync.Mutex
	cfg      compiled
	file     parsed // last good content of the file
	fileOK   bool   // file holds a good read
	status   Status
	notify   chan struct{} // closed after the next read
	errCount map[string]uint64
	reloads  uint64
}

// NewSource reads the hosts file at path and returns a Source serving it
// with cfg; Run keeps it up to date. An invalid cfg, an invalid option or
// ctx done before the first read has finished is an error; a missing or
// broken file is not: the Source then serves the overrides alone, logs the
// problem and reports it in Status().Err until the file is good.
func NewSource(ctx context.Context, path string, cfg Config, opts ...Option) (*Source, error) {
	if path == "" {
		return nil, errors.New("hosts: no file: use NewTable for overrides alone")
	}
	c, err := cfg.compile()
	if err != nil {
		return nil, err
	}
	s := &Source{path: path, o: options{log: slog.New(slog.DiscardHandler), interval: DefaultInterval},
		cfg: c, notify: make(chan struct{}), errCount: map[string]uint64{}}
	for _, opt := range opts {
		opt(&s.o)
	}
	if s.o.interval < 0 {
		return nil, fmt.Errorf("hosts: interval %v: must not be negative", s.o.interval)
	}
	s.log = s.o.log.With("component", "hosts", "path", path)
	s.status.Path = path
	t, err := build(parsed{}, c)
	if err != nil {
		return nil, err
	}
	s.table.Store(t)
	s.status.Entries = t.Len()
	if !safefile.Await(ctx, s.check) {
		return nil, fmt.Errorf("hosts: read %q: %w", path, ctx.Err())
	}
	return s, nil
}

// Lookup is the current table's Lookup (see Table.Lookup: callers must not
// modify the records or the slice).
func (s *Source) Lookup(name string, qtype uint16) ([]dns.RR, bool) {
	return s.table.Load().Lookup(name, qtype)
}

// Table is the table in service.
func (s *Source) Table() *Table { return s.table.Load() }

// Status returns the state of the Source.
func (s *Source) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

// Updated returns a channel closed after the next read of the file has
// been dealt with (a new table, the same content, or a problem), and after
// the next SetConfig: tests wait on it instead of sleeping.
func (s *Source) Updated() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.notify
}

// SetConfig replaces the TTL, reverse setting and overrides, and rebuilds
// the table from the last good content of the file, without reading it.
// An invalid cfg is an error and changes nothing.
func (s *Source) SetConfig(cfg Config) error {
	c, err := cfg.compile()
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := build(s.file, c)
	if err != nil {
		return err
	}
	s.cfg = c
	s.publish(t)
	s.wake()
	return nil
}

// Run watches the file until ctx is done, then returns nil. A check runs
// at start, after each change internal/filewatch reports (file events, and
// a stat every interval), and again after interval while the last check
// left the file unsettled. A check stats the file and reads it when its
// inode, size or mtime changed, when the last read failed, or while its
// mtime is within its tick. It may be called once.
func (s *Source) Run(ctx context.Context) error {
	if !s.ran.CompareAndSwap(false, true) {
		return errors.New("hosts: Run called twice")
	}
	if s.o.interval == 0 { // read once, as CoreDNS's reload 0
		<-ctx.Done()
		return nil
	}
	changes, err := filewatch.Watch(ctx, []string{s.path}, filewatch.WithLogger(s.log),
		filewatch.WithPoll(s.o.interval), filewatch.AllowMissing(s.path))
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("hosts: %w", err)
	}
	defer func() {
		for range changes { // the watch stops with ctx
		}
	}()
	retry := time.NewTimer(s.o.interval)
	defer retry.Stop()
	for {
		// The first check sees a change made before the watch began.
		if !safefile.Await(ctx, s.check) {
			return nil
		}
		if s.haveStamp {
			retry.Stop()
		} else {
			retry.Reset(s.o.interval)
		}
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-changes:
			if !ok {
				return nil
			}
		case <-retry.C:
		}
	}
}

// check reads the file if it may have changed, and publishes what it finds.
func (s *Source) check() {
	if s.haveStamp && s.lastErr == "" {
		if fi, err := os.Stat(s.path); err == nil && filewatch.StampOf(fi) == s.stamp {
			return
		}
	}
	data, st, err := readFile(s.path)
	var p parsed
	if err == nil {
		if p, err = parse(bytes.NewReader(data)); err != nil {
			err = fmt.Errorf("parse %q: %w", s.path, err)
		}
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.wake()
	s.status.Reads++
	if err != nil {
		s.failed(err)
		return
	}
	sum := sha256.Sum256(data)
	// Not trusted while the file may still change within its mtime tick.
	trust := st.Settled(now)
	if s.fileOK && sum == s.hash {
		s.good(now)
		s.stamp, s.haveStamp = st, trust
		return
	}
	// An in-place writer truncates the file before writing it: an empty
	// file replaces entries only when a second read finds it unchanged.
	if len(p.pairs) == 0 && len(s.file.pairs) > 0 && s.emptySeen != st {
		s.good(now)
		s.emptySeen, s.haveStamp = st, false
		s.log.Info("hosts file is empty; it replaces the entries if it still is at the next check", "entries", len(s.file.pairs))
		return
	}
	t, err := build(p, s.cfg)
	if err != nil {
		s.failed(fmt.Errorf("parse %q: %w", s.path, err))
		return
	}
	s.good(now)
	s.file, s.fileOK, s.hash = p, true, sum
	s.stamp, s.haveStamp, s.emptySeen = st, trust, filewatch.Stamp{}
	s.reloads++
	s.status.Warnings = p.warnings
	s.publish(t)
	s.log.Info("hosts file loaded", "entries", t.Len(), "skipped", p.problems)
	if len(p.warnings) > 0 {
		first := make([]string, 0, 5)
		for _, w := range p.warnings[:min(5, len(p.warnings))] {
			first = append(first, w.String())
		}
		s.log.Warn("hosts file has lines that were skipped", "count", p.problems, "first", first)
	}
}

// good records a good read. s.mu is held.
func (s *Source) good(now time.Time) {
	if s.lastErr != "" {
		s.log.Info("hosts file is good again")
		s.lastErr = ""
	}
	s.status.Err = nil
	s.status.Loaded = now
}

// failed records a read that failed: the table in service stays; a problem
// is logged and counted when it differs from the last read's. s.mu is held.
func (s *Source) failed(err error) {
	s.status.Err = err
	s.haveStamp = false
	if err.Error() == s.lastErr {
		return
	}
	s.lastErr = err.Error()
	s.errCount[reason(err)]++
	if s.fileOK {
		s.log.Warn("hosts file is broken; the last good entries stay in service", "err", err, "entries", len(s.file.pairs))
	} else {
		s.log.Error("hosts file is broken and was never read; serving the overrides alone", "err", err)
	}
}

// reason classifies a read problem for the reload errors metric.
func reason(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "missing"
	case errors.Is(err, fs.ErrPermission):
		return "permission"
	case errors.Is(err, ErrNotRegular):
		return "not_regular"
	case errors.Is(err, ErrTooLarge):
		return "too_large"
	case errors.Is(err, ErrLineTooLong):
		return "line_too_long"
	case errors.Is(err, ErrTooManyEntries):
		return "too_many_entries"
	}
	return "read"
}

// publish puts t in service. s.mu is held.
func (s *Source) publish(t *Table) {
	s.table.Store(t)
	s.status.Generation++
	s.status.Entries = t.Len()
}

// wake closes the notify channel and makes the next one. s.mu is held.
func (s *Source) wake() {
	close(s.notify)
	s.notify = make(chan struct{})
}
