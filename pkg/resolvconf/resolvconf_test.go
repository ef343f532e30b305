package resolvconf

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name, in string
		want     Config
		wantErr  error
	}{
		{name: "empty file", in: "", want: Config{Nameservers: []string{}, Searches: []string{}, Options: []string{}}},
		{name: "typical", in: "nameserver 10.0.0.1\nnameserver 10.0.0.2\nsearch a.example b.example\noptions ndots:2 rotate\n",
			want: Config{Nameservers: []string{"10.0.0.1", "10.0.0.2"}, Searches: []string{"a.example", "b.example"}, Options: []string{"ndots:2", "rotate"}}},
		{name: "last search line wins, an empty one clears", in: "search a b\nsearch c\n", want: Config{Nameservers: []string{}, Searches: []string{"c"}, Options: []string{}}},
		{name: "empty search clears", in: "search a b\nsearch\n", want: Config{Nameservers: []string{}, Searches: []string{}, Options: []string{}}},
		{name: "trailing dot trimmed once, lone dot dropped", in: "search a. b.. . c\n", want: Config{Nameservers: []string{}, Searches: []string{"a", "b.", "c"}, Options: []string{}}},
		{name: "comments: only leading #; ; is not special; inline words kept", in: "# c\n  # indented\n; nameserver 1.1.1.1\nnameserver 10.0.0.1 # dns\nsearch a # office\n",
			want: Config{Nameservers: []string{"10.0.0.1"}, Searches: []string{"a", "#", "office"}, Options: []string{}}},
		{name: "keywords are case-sensitive, domain/sortlist/unknown ignored", in: "Nameserver 1.1.1.1\ndomain corp\nsortlist 1.2.3.4\nlookup file\nnameserver\tnot-an-ip\n",
			want: Config{Nameservers: []string{"not-an-ip"}, Searches: []string{}, Options: []string{}}},
		{name: "options accumulate and override by name in place", in: "options ndots:1 timeout:2\noptions attempts:3 ndots:4\n",
			want: Config{Nameservers: []string{}, Searches: []string{}, Options: []string{"ndots:4", "timeout:2", "attempts:3"}}},
		{name: "IPv6 nameservers, a zone index kept verbatim (kubelet does not parse them)", in: "nameserver fe80::1%eth0\nnameserver 2001:db8::53\nnameserver 192.0.2.53\nnameserver fd00::53\n",
			want: Config{Nameservers: []string{"fe80::1%eth0", "2001:db8::53", "192.0.2.53", "fd00::53"}, Searches: []string{}, Options: []string{}}},
		{name: "CRLF and spaces", in: "nameserver 10.0.0.1\r\n   search  x.example  \r\n", want: Config{Nameservers: []string{"10.0.0.1"}, Searches: []string{"x.example"}, Options: []string{}}},
		{name: "bare nameserver is an error naming the line", in: "nameserver 10.0.0.1\nnameserver\n", wantErr: ErrEmptyNameserver,
			want: Config{Nameservers: []string{"10.0.0.1"}, Searches: []string{}, Options: []string{}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tc.in))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr != nil {
				var pe *ParseError
				if !errors.As(err, &pe) || pe.Line != 2 || !strings.Contains(err.Error(), "line 2: nameserver list is empty") {
					t.Errorf("err = %v, want a ParseError on line 2", err)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

func TestParseSizeCap(t *testing.T) {
	ok := strings.Repeat("#", MaxFileSize)
	if _, err := Parse(strings.NewReader(ok)); err != nil {
		t.Errorf("10 MiB file: %v", err)
	}
	if _, err := Parse(strings.NewReader(ok + "\n")); !errors.Is(err, ErrTooLarge) {
		t.Errorf("10 MiB + 1: err = %v", err)
	}
}

func TestParseFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "resolv.conf")
	if _, err := ParseFile(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	os.WriteFile(p, []byte("nameserver\n"), 0o644)
	if _, err := ParseFile(p); err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("err = %v, want it to name the file", err)
	}
}

func TestFormatRoundTrip(t *testing.T) {
	cfg := Config{Nameservers: []string{"10.96.0.10", "fd00::a"}, Searches: []string{"ns.svc.cluster.local", "svc.cluster.local"}, Options: []string{"ndots:5", "edns0"}}
	text := Format(cfg)
	want := "search ns.svc.cluster.local svc.cluster.local\nnameserver 10.96.0.10\nnameserver fd00::a\noptions ndots:5 edns0\n"
	if text != want {
		t.Fatalf("Format = %q, want %q", text, want)
	}
	back, err := Parse(strings.NewReader(text))
	if err != nil || !reflect.DeepEqual(back, cfg) {
		t.Errorf("round trip = %#v, %v", back, err)
	}
	if got := Format(Config{}); got != "" {
		t.Errorf("empty config renders %q", got)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "nameserver 1.1.1.1\nsearch a b.\noptions ndots:5\n", "nameserver\n", "search . a..\n#x\n", "options a:b:c a\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseBytes(data)
		if cfg.Nameservers == nil || cfg.Searches == nil || cfg.Options == nil {
			t.Fatalf("nil slice in %#v", cfg)
		}
		if err != nil {
			return
		}
		// What Format writes parses back to the same config when every
		// value is a single field without a leading '#'.
		for _, v := range append(append(append([]string{}, cfg.Nameservers...), cfg.Searches...), cfg.Options...) {
			if strings.HasPrefix(v, "#") || v == "" || strings.HasSuffix(v, ".") {
				return
			}
		}
		back, err := ParseBytes([]byte(Format(cfg)))
		if err != nil || !reflect.DeepEqual(back, cfg) {
			t.Fatalf("round trip of %q: %#v, %v; want %#v", data, back, err, cfg)
		}
	})
}

// allocated returns the bytes f allocates on the heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestReadFileLimits(t *testing.T) {
	dir := t.TempDir()
	sized := func(name string, size int64) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, size); err != nil { // sparse: no disk used
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name     string
		path     string
		wantErr  error
		maxAlloc uint64 // heap bytes ReadFile may allocate
	}{
		{name: "64 MB file refused before a byte is read", path: sized("big", 64<<20), wantErr: ErrTooLarge, maxAlloc: 64 << 10},
		{name: "MaxFileSize+1 refused", path: sized("over", MaxFileSize+1), wantErr: ErrTooLarge, maxAlloc: 64 << 10},
		{name: "MaxFileSize read into one buffer", path: sized("max", MaxFileSize), maxAlloc: MaxFileSize + 64<<10},
		{name: "directory", path: dir, wantErr: ErrNotRegular, maxAlloc: 64 << 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			n := allocated(func() { _, err = ReadFile(tc.path) })
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), strconv.Quote(tc.path)) {
				t.Errorf("err = %v, want it to name %q", err, tc.path)
			}
			if n > tc.maxAlloc {
				t.Errorf("allocated %d bytes, want at most %d", n, tc.maxAlloc)
			}
		})
	}
}

// TestParseLines: the lines each part of the config was read from, for a
// trace: every nameserver line, the search line that counts (the last),
// every options line; comments and blank lines are counted as lines.
func TestParseLines(t *testing.T) {
	tests := []struct {
		name, file string
		want       Lines
	}{
		{"empty", "", Lines{}},
		{"each kind", "# comment\nnameserver 10.0.0.1\n\nsearch a.example\nnameserver 10.0.0.2\noptions ndots:2\n",
			Lines{Nameservers: []int{2, 5}, Search: 4, Options: []int{6}}},
		{"the last search line counts", "search a.example\nsearch b.example\n", Lines{Search: 2}},
		{"several options lines", "options ndots:1\noptions timeout:2 ndots:3\n", Lines{Options: []int{1, 2}}},
		{"no final newline", "nameserver 10.0.0.1", Lines{Nameservers: []int{1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, got, err := ParseLines([]byte(tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("lines %+v, want %+v", got, tc.want)
			}
			if len(got.Nameservers) != len(cfg.Nameservers) {
				t.Errorf("%d nameserver lines for %d nameservers", len(got.Nameservers), len(cfg.Nameservers))
			}
			plain, _ := ParseBytes([]byte(tc.file))
			if !reflect.DeepEqual(plain, cfg) {
				t.Errorf("ParseLines config %+v, ParseBytes %+v", cfg, plain)
			}
		})
	}
}
