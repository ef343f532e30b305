package main

import (
	"strings"
	"testing"
)

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
