package cmdline

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

// TestParseInterspersed: positional arguments before, between and after
// the flags, in order; "--" ends the flags; a bad flag is an error.
func TestParseInterspersed(t *testing.T) {
	for _, tc := range []struct {
		args []string
		pos  []string
		v    bool
		err  bool
	}{
		{[]string{"a", "-v", "b"}, []string{"a", "b"}, true, false},
		{[]string{"-v", "a"}, []string{"a"}, true, false},
		{[]string{"a", "--", "-v"}, []string{"a", "-v"}, false, false},
		{nil, nil, false, false},
		{[]string{"a", "-x"}, nil, false, true},
	} {
		fs := NewFlagSet("t", io.Discard, "")
		v := fs.Bool("v", false, "")
		pos, err := ParseInterspersed(fs, tc.args)
		if (err != nil) != tc.err || !slices.Equal(pos, tc.pos) || *v != tc.v {
			t.Errorf("%q: %q, -v %v, err %v; want %q, -v %v, error %v", tc.args, pos, *v, err, tc.pos, tc.v, tc.err)
		}
	}
}

// TestNewFlagSet: an error returns, printed before the usage text and
// the flags.
func TestNewFlagSet(t *testing.T) {
	var out strings.Builder
	fs := NewFlagSet("t", &out, "usage: t [-v]")
	fs.Bool("v", false, "verbose")
	if err := fs.Parse([]string{"-x"}); err == nil || fs.ErrorHandling() != flag.ContinueOnError {
		t.Errorf("Parse -x: %v", err)
	}
	if want := "flag provided but not defined: -x\nusage: t [-v]\n  -v\tverbose\n"; out.String() != want {
		t.Errorf("stderr %q, want %q", out.String(), want)
	}
}
