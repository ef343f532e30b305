package kubefeed

import (
	"context"
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dnsconfigurer/dnsconfigurer/internal/prom"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// EventRecorder posts Events on objects; client-go's record.EventRecorder
// is one.
type EventRecorder interface {
	Event(object runtime.Object, eventtype, reason, message string)
}

// EventReasonSkipped is the reason of the Warning Event on an object of the
// API server that the cluster DNS skips.
const EventReasonSkipped = "DNSRecordSkipped"

// Kinds of manifest problems that are not one object, as the kind label
// of objects_skipped_total.
const (
	// KindDocument is a manifest document whose kind is not known: YAML
	// that does not parse, no kind, or the rest of a stream that cannot
	// be split.
	KindDocument = "document"
	// KindFile is a manifest file that is not read.
	KindFile = "file"
)

// maxSkipsRemembered bounds the problems Skips remembers (about 100 bytes
// each). Past it a new problem is still counted and logged, but may be
// logged again.
const maxSkipsRemembered = 10000

// maxEventMessage is what an Event's message keeps of a problem.
const maxEventMessage = 1024

// skippedHelp says what objects_skipped_total counts.
const skippedHelp = "Objects the cluster DNS cannot serve and skips (from the API server or a manifest), by kind and reason. " +
	"Counted once per object and problem, when it is logged: again when the problem changes, or comes back after the object was fixed or deleted. " +
	"kind document is a manifest document of no known kind, file a manifest file not read."

// Skips reports the objects the feeds cannot serve: a count by kind and
// reason, one log record per object and problem, and a Warning Event on
// an object of the API server. It remembers what it reported (at most
// maxSkipsRemembered problems) and forgets an object once it converts or
// is deleted. Safe for concurrent use.
type Skips struct {
	count  *prometheus.CounterVec
	log    *slog.Logger
	events EventRecorder // nil: none
	seed   maphash.Seed

	n    atomic.Int64 // len(seen), for served's path without the lock
	mu   sync.Mutex
	seen map[skipKey]uint64 // the hash of the problem last reported
	full bool               // the record is full and said so
}

// skipKey is one skipped object: by kind, namespace and name, and for a
// manifest also by file; a manifest document without a name by its
// number and item.
type skipKey struct {
	kind, file string
	doc        int
	item       string
	ns, name   string
}

// NewSkips is the feeds' report of the objects they cannot serve, its
// counter dnsconfigurer_dnsserver_objects_skipped_total{kind,reason} on
// reg (nil: none). events (nil: none) posts the Warning Events.
func NewSkips(reg prometheus.Registerer, log *slog.Logger, events EventRecorder) (*Skips, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s, err := prom.New(reg, "dnsserver", func(set *prom.Set) *Skips {
		return &Skips{
			count: set.CounterVec("objects_skipped_total", skippedHelp, "kind", "reason"),
			log:   log, events: events, seed: maphash.MakeSeed(), seen: map[skipKey]uint64{},
		}
	})
	if err != nil {
		return nil, fmt.Errorf("register feed metrics: %w", err)
	}
	return s, nil
}

// unregisteredSkips is the report of a feed given none: counted on no
// registry, logged with log.
func unregisteredSkips(log *slog.Logger) *Skips {
	s, _ := NewSkips(nil, log, nil)
	return s
}

// remember records problem for k and reports whether it is news: k was
// not skipped, or for another problem.
func (s *Skips) remember(k skipKey, problem string) bool {
	h := maphash.String(s.seed, problem)
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.seen[k]
	switch {
	case ok && old == h:
		return false
	case !ok && len(s.seen) >= maxSkipsRemembered:
		if !s.full {
			s.full = true
			s.log.Warn("too many skipped objects to remember: some may be logged more than once", "limit", maxSkipsRemembered)
		}
		return true
	}
	s.seen[k] = h
	s.n.Store(int64(len(s.seen)))
	return true
}

// forget drops the remembered problems for which drop is true.
func (s *Skips) forget(drop func(skipKey) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.seen {
		if drop(k) {
			delete(s.seen, k)
		}
	}
	s.n.Store(int64(len(s.seen)))
	if len(s.seen) < maxSkipsRemembered {
		s.full = false
	}
}

// object reports an object of the API server that does not convert, with
// a Warning Event on it, unless this problem was reported last for it.
func (s *Skips) object(ctx context.Context, k objectKind, err error) {
	oe := asObjectError(k.label, err)
	key := skipKey{kind: oe.Kind, ns: oe.Namespace, name: oe.Name}
	if !s.remember(key, err.Error()) {
		return
	}
	reason := oe.Reason()
	s.count.WithLabelValues(oe.Kind, reason).Inc()
	s.log.WarnContext(ctx, "skipping an object the cluster DNS cannot serve", "kind", oe.Kind, "object", oe.Object(),
		"field", oe.Field, "reason", reason, "err", err)
	if s.events == nil || oe.Name == "" {
		return
	}
	msg := "not served by the cluster DNS: " + oe.Problem()
	if len(msg) > maxEventMessage {
		msg = msg[:maxEventMessage-3] + "..."
	}
	s.events.Event(&corev1.ObjectReference{Kind: k.kind, APIVersion: k.apiVersion, Namespace: oe.Namespace, Name: oe.Name, UID: oe.UID},
		corev1.EventTypeWarning, EventReasonSkipped, msg)
}

// asObjectError is err as an *ObjectError; a converter's error always is
// one, anything else is reported as a field error of the kind.
func asObjectError(kind string, err error) *ObjectError {
	if oe, ok := err.(*ObjectError); ok {
		return oe
	}
	return &ObjectError{Kind: kind, Err: err}
}

// served forgets the problem of an object that converted or was deleted.
func (s *Skips) served(kind, ns, name string) {
	if s.n.Load() == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.seen, skipKey{kind: kind, ns: ns, name: name})
	s.n.Store(int64(len(s.seen)))
}

// relisted forgets the problems of the API server's objects of kind that a
// full list no longer has (deleted while the watch was down).
func (s *Skips) relisted(kind string, listed func(store.Key) bool) {
	if s.n.Load() == 0 {
		return
	}
	s.forget(func(k skipKey) bool {
		if k.kind != kind || k.file != "" {
			return false
		}
		return !listed(store.Key{Namespace: k.ns, Name: k.name})
	})
}

// manifests reports the problems of a manifest load that are new or
// changed since the load before, and forgets those it no longer has (fixed
// or removed).
func (s *Skips) manifests(ctx context.Context, errs []*ManifestError) {
	now := make(map[skipKey]struct{}, len(errs))
	for _, e := range errs {
		k := e.key()
		now[k] = struct{}{}
		if !s.remember(k, e.Err.Error()) {
			continue
		}
		s.count.WithLabelValues(e.Kind, e.Reason).Inc()
		args := []any{"file", e.File, "kind", e.Kind, "reason", e.Reason, "err", e.Err}
		if e.Doc > 0 {
			args = append(args, "document", e.Doc)
		}
		if e.Item != "" {
			args = append(args, "item", e.Item)
		}
		what := "skipping a manifest object the cluster DNS cannot serve"
		switch e.Kind {
		case KindFile:
			what = "skipping a manifest file: its objects are not served"
		case KindDocument:
			what = "skipping a manifest document that does not decode"
		}
		s.log.WarnContext(ctx, what, args...)
	}
	s.forget(func(k skipKey) bool {
		_, ok := now[k]
		return k.file != "" && !ok
	})
}
