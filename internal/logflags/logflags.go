package logflags

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/version"
)

// Log formats and levels of --log-format and --log-level (and of the
// ServerConfiguration's logFormat and logLevel).
const (
	Text = "text"
	JSON = "json"
)

var logLevels = map[string]slog.Level{
	"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError,
}

// Register defines --log-format (default defaultFormat) into format and
// --log-level (default info) into level on fs.
func Register(fs *flag.FlagSet, format, level *string, defaultFormat string) {
	fs.StringVar(format, "log-format", defaultFormat, "log format on stderr: text or json")
	fs.StringVar(level, "log-level", v1alpha1.DefaultLogLevel, "least severe level logged: debug, info, warn or error")
}

// New is the one constructor of the logger of a long-running command:
// format text or json, writing to w (stderr) from level on.
func New(w io.Writer, format, level string) (*slog.Logger, error) {
	lv, err := ParseLevel(level)
	if err != nil {
		return nil, err
	}
	return NewLeveled(w, format, lv)
}

// ParseLevel reads --log-level (logLevel).
func ParseLevel(level string) (slog.Level, error) {
	lv, ok := logLevels[level]
	if !ok {
		return 0, fmt.Errorf("--log-level %q: must be debug, info, warn or error", level)
	}
	return lv, nil
}

// NewLeveled is New with a level that may change while the
// command runs (a *slog.LevelVar: serve's config reload). Every logger of
// the process derives from it, so its rules hold on every line: each key
// once at the top level (uniqueHandler), and durations as Go duration
// strings ("1.5s", durationString).
func NewLeveled(w io.Writer, format string, level slog.Leveler) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: durationString}
	var h slog.Handler
	switch format {
	case Text:
		h = slog.NewTextHandler(w, opts)
	case JSON:
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, fmt.Errorf("--log-format %q: must be text or json", format)
	}
	return slog.New(newUniqueHandler(h)), nil
}

// durationString writes a duration as Go writes it ("1.5s", "250ms"), the
// form of the flags and the config files, where slog's JSON would write
// nanoseconds.
func durationString(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// componentKey names the part of the program that logged a line.
const componentKey = "component"

// uniqueHandler writes each key once per object of a line, which JSON log
// pipelines (Elasticsearch, Loki's json stage) require. A component derived
// from another (With("component", "hostresolv") on a logger with component
// "dnsserver") is named by both, outer first: "dnsserver.hostresolv", as a
// zap logger's Named path. Any other key given again, by With or on the
// record, replaces the earlier value. A group's keys are its own.
type uniqueHandler struct {
	base   slog.Handler  // the handler made at start: no attrs
	groups []string      // the open groups, outermost first
	attrs  [][]slog.Attr // the attrs of With, each key once: [0] at the top, [i] in groups[i-1]
	h      slog.Handler  // base with groups and attrs
}

func newUniqueHandler(base slog.Handler) *uniqueHandler {
	return &uniqueHandler{base: base, attrs: [][]slog.Attr{nil}, h: base}
}

func (u *uniqueHandler) Enabled(ctx context.Context, l slog.Level) bool { return u.h.Enabled(ctx, l) }

func (u *uniqueHandler) WithAttrs(as []slog.Attr) slog.Handler {
	if len(as) == 0 {
		return u
	}
	return u.with(as)
}

// with is u with as merged into the innermost group's attrs.
func (u *uniqueHandler) with(as []slog.Attr) *uniqueHandler {
	attrs := slices.Clone(u.attrs)
	last := len(attrs) - 1
	attrs[last] = mergeAttrs(slices.Clone(attrs[last]), as)
	h := u.base
	for i, level := range attrs {
		if i > 0 {
			h = h.WithGroup(u.groups[i-1])
		}
		if len(level) > 0 {
			h = h.WithAttrs(level)
		}
	}
	return &uniqueHandler{base: u.base, groups: u.groups, attrs: attrs, h: h}
}

func (u *uniqueHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return u
	}
	return &uniqueHandler{base: u.base, groups: append(slices.Clip(u.groups), name),
		attrs: append(slices.Clip(u.attrs), nil), h: u.h.WithGroup(name)}
}

// Handle writes r; a record attr whose key the innermost group's attrs or
// an earlier record attr have (rare) is merged in as WithAttrs merges.
func (u *uniqueHandler) Handle(ctx context.Context, r slog.Record) error {
	last := u.attrs[len(u.attrs)-1]
	var recs []slog.Attr
	clash := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "" && (hasKey(last, a.Key) || hasKey(recs, a.Key)) {
			clash = true
		}
		recs = append(recs, a)
		return true
	})
	if !clash {
		return u.h.Handle(ctx, r)
	}
	return u.with(recs).h.Handle(ctx, slog.NewRecord(r.Time, r.Level, r.Message, r.PC))
}

func hasKey(as []slog.Attr, key string) bool {
	return slices.ContainsFunc(as, func(a slog.Attr) bool { return a.Key == key })
}

// mergeAttrs adds as to attrs by uniqueHandler's rule.
func mergeAttrs(attrs, as []slog.Attr) []slog.Attr {
	for _, a := range as {
		i := slices.IndexFunc(attrs, func(b slog.Attr) bool { return a.Key != "" && b.Key == a.Key })
		switch {
		case i < 0:
			attrs = append(attrs, a)
		case a.Key == componentKey:
			outer, inner := attrs[i].Value.String(), a.Value.String()
			if outer != inner && !strings.HasSuffix(outer, "."+inner) {
				attrs[i] = slog.String(componentKey, outer+"."+inner)
			}
		default:
			attrs[i] = a
		}
	}
	return attrs
}

// Start logs the first line of a long-running command, whatever the
// level: which build runs on which platform, as CoreDNS starts with
// "CoreDNS-1.x.y linux/amd64, go1.x, <commit>".
func Start(log *slog.Logger, command string) {
	v := version.Get()
	r := slog.NewRecord(time.Now(), slog.LevelInfo, "starting", 0)
	r.AddAttrs(slog.String("command", command), slog.String("version", v.Version), slog.String("revision", v.Revision),
		slog.String("goVersion", v.GoVersion), slog.String("platform", runtime.GOOS+"/"+runtime.GOARCH))
	_ = log.Handler().Handle(context.Background(), r)
}
