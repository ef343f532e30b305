package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestNewLogger(t *testing.T) {
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
			log, err := newLogger(&b, tc.format, tc.level)
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

// TestLogFlags: every long-running command takes --log-format and
// --log-level and names the flag of a bad value.
func TestLogFlags(t *testing.T) {
	for _, cmd := range []string{"serve", "shim", "webhook"} {
		for _, tc := range []struct{ flag, value, want string }{
			{"--log-format", "xml", `--log-format "xml": must be text or json`},
			{"--log-level", "trace", `--log-level "trace": must be debug, info, warn or error`},
		} {
			t.Run(cmd+" "+tc.flag, func(t *testing.T) {
				code, stdout, stderr := run(t, "", cmd, tc.flag, tc.value)
				if code != exitUsage || stdout != "" || !strings.Contains(stderr, tc.want) {
					t.Errorf("exit %d, stdout %q, stderr %q; want exit %d, stderr containing %q", code, stdout, stderr, exitUsage, tc.want)
				}
			})
		}
	}
}
