package logflags

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/version"
)

func TestNew(t *testing.T) {
	tests := []struct {
		name, format, level string
		wantErr             string
		// want is what a Debug and an Info record leave in the output.
		want []string
	}{
		{name: "text", format: "text", level: "info", want: []string{`level=INFO msg=shown k=v`}},
		{name: "text debug", format: "text", level: "debug", want: []string{`level=DEBUG msg=hidden`, `level=INFO msg=shown`}},
		{name: "json", format: "json", level: "info", want: []string{`"level":"INFO","msg":"shown","k":"v"`}},
		{name: "warn hides info", format: "json", level: "warn", want: nil},
		{name: "bad format", format: "logfmt", level: "info", wantErr: `--log-format "logfmt": must be text or json`},
		{name: "bad level", format: "text", level: "INFO", wantErr: `--log-level "INFO": must be debug, info, warn or error`},
		{name: "level not a number", format: "text", level: "info+2", wantErr: `--log-level "info+2"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			log, err := New(&b, tc.format, tc.level)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr && !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			log.Debug("hidden")
			log.Info("shown", "k", "v")
			lines := strings.Split(strings.TrimSpace(b.String()), "\n")
			if len(tc.want) == 0 && b.Len() != 0 || len(tc.want) > 0 && len(lines) != len(tc.want) {
				t.Fatalf("output %q, want %d lines", b.String(), len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(lines[i], w) {
					t.Errorf("line %d = %q, want it to contain %q", i, lines[i], w)
				}
				if tc.format == "json" && !json.Valid([]byte(lines[i])) {
					t.Errorf("line %d = %q: not JSON", i, lines[i])
				}
			}
		})
	}
}

// TestLogLineRules: whatever the loggers were derived with, a JSON line
// has each top-level key once (components nest, other keys take the last
// value), durations are Go duration strings, and the start-up line is
// written whatever the level.
func TestLogLineRules(t *testing.T) {
	tests := []struct {
		name string
		log  func(l *slog.Logger)
		want string // the line's attrs after msg
	}{
		{"component nests", func(l *slog.Logger) {
			l.With("component", "dnsserver", "zone", "z").With("component", "hostresolv").Info("m", "path", "p")
		}, `"component":"dnsserver.hostresolv","zone":"z","path":"p"`},
		{"three levels", func(l *slog.Logger) {
			l.With("component", "a").With("component", "b").With("component", "c").Info("m")
		}, `"component":"a.b.c"`},
		{"the same component again", func(l *slog.Logger) {
			l.With("component", "cri").With("component", "cri", "node", "n").Info("m")
		}, `"component":"cri","node":"n"`},
		{"a key given again replaces", func(l *slog.Logger) {
			l.With("server", "a", "k", 1).With("server", "b").Info("m")
		}, `"server":"b","k":1`},
		{"a record attr clashes", func(l *slog.Logger) {
			l.With("component", "dnsserver", "path", "old").Info("m", "path", "new", "component", "hosts", "x", 1, "x", 2)
		}, `"component":"dnsserver.hosts","path":"new","x":2`},
		{"a group has keys of its own", func(l *slog.Logger) {
			l.With("component", "a").WithGroup("g").With("component", "b").Info("m", "component", "c")
		}, `"component":"a","g":{"component":"b.c"}`},
		{"a key given again in a group", func(l *slog.Logger) {
			l.With("k", 1).WithGroup("g").With("k", 2).With("k", 3).Info("m", "k", 4, "j", 5)
		}, `"k":1,"g":{"k":4,"j":5}`},
		{"durations", func(l *slog.Logger) {
			l.With("timeout", 2*time.Second).Info("m", "took", 1500*time.Millisecond, "g", slog.GroupValue(slog.Duration("d", time.Microsecond)))
		}, `"timeout":"2s","took":"1.5s","g":{"d":"1µs"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			l, err := New(&b, JSON, "info")
			if err != nil {
				t.Fatal(err)
			}
			tc.log(l)
			line := strings.TrimSpace(b.String())
			if !strings.HasSuffix(line, `"msg":"m",`+tc.want+`}`) {
				t.Errorf("line %s\nwant it to end with %s}", line, tc.want)
			}
		})
	}
	var b bytes.Buffer
	l, _ := New(&b, JSON, "error")
	Start(l.With("component", "shim"), "shim")
	var rec map[string]any
	if err := json.Unmarshal(b.Bytes(), &rec); err != nil {
		t.Fatalf("start-up line %q: %v", b.String(), err)
	}
	v := version.Get()
	if rec["msg"] != "starting" || rec["level"] != "INFO" || rec["component"] != "shim" || rec["command"] != "shim" ||
		rec["version"] != v.Version || rec["revision"] != v.Revision || rec["goVersion"] != v.GoVersion ||
		rec["platform"] != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("start-up line at level error = %s", b.String())
	}
}
