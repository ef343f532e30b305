package main

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

// TestHelp: -h and --help follow one rule for every subcommand and for
// dnsconfigurer itself (and help, help NAME): the usage on stderr, nothing
// on stdout, exit 0, as with the flag package's ExitOnError. No subcommand
// is a usage error.
func TestHelp(t *testing.T) {
	type tc struct {
		args  []string
		code  int
		usage string // the first line of stderr
	}
	top := "usage: dnsconfigurer <subcommand> [flags]"
	tests := []tc{
		{[]string{"-h"}, exitOK, top},
		{[]string{"--help"}, exitOK, top},
		{[]string{"help"}, exitOK, top},
		{nil, exitUsage, top},
	}
	for _, n := range slices.Sorted(maps.Keys(commands)) {
		usage := "usage: dnsconfigurer " + n
		tests = append(tests, tc{[]string{n, "-h"}, exitOK, usage}, tc{[]string{n, "--help"}, exitOK, usage},
			tc{[]string{"help", n}, exitOK, usage})
	}
	for _, tc := range tests {
		name := strings.Join(tc.args, " ")
		if name == "" {
			name = "no subcommand"
		}
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := run(t, "", tc.args...)
			first, _, _ := strings.Cut(stderr, "\n")
			if code != tc.code || stdout != "" || !strings.HasPrefix(first, tc.usage) {
				t.Errorf("dnsconfigurer %s: exit %d, stdout %q, stderr starting %q; want exit %d, no stdout, stderr starting %q",
					strings.Join(tc.args, " "), code, stdout, first, tc.code, tc.usage)
			}
		})
	}
}
