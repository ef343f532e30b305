package explain

import "testing"

// TestEscapeTerminal is the rule for text from containers and agents:
// control characters but newline and tab, DEL, C1 controls and invalid
// UTF-8 become Go escapes; printable text, UTF-8 included, stays.
func TestEscapeTerminal(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"nameserver 10.0.0.1\n\toptions ndots:2\n", "nameserver 10.0.0.1\n\toptions ndots:2\n"},
		{"\x1b]52;c;ZXZpbA==\x07", `\x1b]52;c;ZXZpbA==\a`},
		{"differs\r# app: matches", `differs\r# app: matches`},
		{"\x1b[2K\x7f", `\x1b[2K\x7f`},
		{"csi\u009b31m", `csi\u009b31m`},
		{"bad \xff byte", `bad \xff byte`},
		{"straße ünïcode �", "straße ünïcode �"},
	} {
		if got := EscapeTerminal(tc.in); got != tc.want {
			t.Errorf("EscapeTerminal(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
