package hosts

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/miekg/dns"
)

// values renders records as their data: the address of an A or AAAA
// record, the target of a PTR record.
func values(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		switch r := rr.(type) {
		case *dns.A:
			out = append(out, r.A.String())
		case *dns.AAAA:
			out = append(out, r.AAAA.String())
		case *dns.PTR:
			out = append(out, r.Ptr)
		default:
			out = append(out, rr.String())
		}
	}
	return out
}

// lookup is one expected Lookup result.
type lookup struct {
	name  string
	qtype uint16
	want  []string // nil: found with no records when found is set
	found bool
}

func checkLookups(t *testing.T, tab *Table, lookups []lookup) {
	t.Helper()
	for _, l := range lookups {
		rrs, found := tab.Lookup(l.name, l.qtype)
		if found != l.found || !slices.Equal(values(rrs), l.want) {
			t.Errorf("Lookup(%q, %s) = %v, %v; want %v, %v", l.name, dns.TypeToString[l.qtype], values(rrs), found, l.want, l.found)
		}
	}
}

func warningStrings(ws []Warning) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.String())
	}
	return out
}

func TestParse(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		warnings []string
		lookups  []lookup
	}{
		{
			name: "canonical name and aliases, comments, blank lines, tabs, CRLF",
			in:   "# k3s NodeHosts\r\n\r\n10.0.0.1\tnode-1 node-1.local  # the server\r\n   \r\n::1 localhost ip6-localhost\n",
			lookups: []lookup{
				{"node-1.", dns.TypeA, []string{"10.0.0.1"}, true},
				{"node-1.local.", dns.TypeA, []string{"10.0.0.1"}, true},
				{"localhost.", dns.TypeAAAA, []string{"::1"}, true},
				{"ip6-localhost.", dns.TypeAAAA, []string{"::1"}, true},
				{"1.0.0.10.in-addr.arpa.", dns.TypePTR, []string{"node-1.", "node-1.local."}, true},
				{"the.", dns.TypeA, nil, false},
			},
		},
		{
			name: "names are lowercased and made fully qualified; a final dot is accepted",
			in:   "192.168.49.1 Host.Minikube.Internal\n192.168.49.2 control-plane.minikube.internal.\n",
			lookups: []lookup{
				{"host.minikube.internal.", dns.TypeA, []string{"192.168.49.1"}, true},
				{"control-plane.minikube.internal.", dns.TypeA, []string{"192.168.49.2"}, true},
				{"Host.Minikube.Internal.", dns.TypeA, nil, false},
			},
		},
		{
			name: "a comment glued to a name ends it",
			in:   "10.0.0.1 a#b c\n10.0.0.2#x y\n",
			lookups: []lookup{
				{"a.", dns.TypeA, []string{"10.0.0.1"}, true},
				{"c.", dns.TypeA, nil, false},
			},
			warnings: []string{`line 2: "10.0.0.2": no host name`},
		},
		{
			name: "several addresses of one name in file order, duplicates once",
			in:   "10.0.0.2 web\n10.0.0.1 web\n10.0.0.2 web\nfd00::1 web\n10.0.0.1 www\n",
			lookups: []lookup{
				{"web.", dns.TypeA, []string{"10.0.0.2", "10.0.0.1"}, true},
				{"web.", dns.TypeAAAA, []string{"fd00::1"}, true},
				{"2.0.0.10.in-addr.arpa.", dns.TypePTR, []string{"web."}, true},
				{"1.0.0.10.in-addr.arpa.", dns.TypePTR, []string{"web.", "www."}, true},
				{"1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", dns.TypePTR, []string{"web."}, true},
			},
		},
		{
			name: "an IPv6 zone is dropped",
			in:   "fe80::1%eth0 router\n",
			lookups: []lookup{
				{"router.", dns.TypeAAAA, []string{"fe80::1"}, true},
			},
		},
		{
			name: "an IPv4-mapped address is IPv4",
			in:   "::ffff:10.0.0.9 mapped\n",
			lookups: []lookup{
				{"mapped.", dns.TypeA, []string{"10.0.0.9"}, true},
				{"mapped.", dns.TypeAAAA, nil, true},
				{"9.0.0.10.in-addr.arpa.", dns.TypePTR, []string{"mapped."}, true},
			},
		},
		{
			name: "the unspecified addresses have no PTR",
			in:   "0.0.0.0 ads.example\n:: ads6.example\n",
			lookups: []lookup{
				{"ads.example.", dns.TypeA, []string{"0.0.0.0"}, true},
				{"ads6.example.", dns.TypeAAAA, []string{"::"}, true},
				{"0.0.0.0.in-addr.arpa.", dns.TypePTR, nil, false},
			},
		},
		{
			name: "a bad line is skipped with a warning naming its line, the rest is kept",
			in: strings.Join([]string{
				"10.0.0.1 one",             // 1
				"300.1.1.1 bad",            // 2
				"010.0.0.1 octal",          // 3
				"10.0.0.4",                 // 4
				"10.0.0.5 ok a..b also-ok", // 5
				"1.2.3.4%eth0 zoned4",      // 6
				"host.example 10.0.0.7",    // 7
				"10.0.0.8 -.",              // 8
				"10.0.0.9 " + strings.Repeat("x", 64) + ".example",    // 9
				"10.0.0.10 " + strings.Repeat("abcdefgh.", 28) + "xy", // 10
				"10.0.0.11 ünïcode ok2",                               // 11
				"10.0.0.12 .",                                         // 12
				"10.0.0.13 under_score",                               // 13
			}, "\n"),
			warnings: []string{
				`line 2: "300.1.1.1": not an IP address`,
				`line 3: "010.0.0.1": not an IP address`,
				`line 4: "10.0.0.4": no host name`,
				`line 5: "a..b": empty label`,
				`line 6: "1.2.3.4%eth0": not an IP address`,
				`line 7: "host.example": not an IP address`,
				`line 9: "` + strings.Repeat("x", 64) + `.example": label longer than 63 characters`,
				`line 10: "` + strings.Repeat("abcdefgh.", 28) + `xy": longer than 253 characters (254)`,
				`line 11: "ünïcode": invalid character "\xc3"`,
				`line 12: ".": not a host name`,
			},
			lookups: []lookup{
				{"one.", dns.TypeA, []string{"10.0.0.1"}, true},
				{"bad.", dns.TypeA, nil, false},
				{"ok.", dns.TypeA, []string{"10.0.0.5"}, true},
				{"also-ok.", dns.TypeA, []string{"10.0.0.5"}, true},
				{"-.", dns.TypeA, []string{"10.0.0.8"}, true},
				{"ok2.", dns.TypeA, []string{"10.0.0.11"}, true},
				{"under_score.", dns.TypeA, []string{"10.0.0.13"}, true},
			},
		},
		{
			name: "empty input",
			in:   "",
			lookups: []lookup{
				{"localhost.", dns.TypeA, nil, false},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tab, ws, err := Parse(strings.NewReader(tc.in))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := warningStrings(ws); !slices.Equal(got, tc.warnings) {
				t.Errorf("warnings:\n got %q\nwant %q", got, tc.warnings)
			}
			checkLookups(t, tab, tc.lookups)
		})
	}
}

// endless is a reader of an endless hosts file of comment lines.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = "# x\n"[i%4]
	}
	return len(p), nil
}

func TestParseErrors(t *testing.T) {
	var many strings.Builder
	for i := range MaxEntries + 1 {
		fmt.Fprintf(&many, "10.%d.%d.%d h%d\n", i>>16, i>>8&255, i&255, i)
	}
	tests := []struct {
		name string
		in   io.Reader
		want error
		msg  string
	}{
		{"file over MaxFileSize", endless{}, ErrTooLarge, "hosts: file larger than 16 MiB"},
		{"line over MaxLineLength", strings.NewReader("10.0.0.1 a\n# ok\n10.0.0.2 " + strings.Repeat("b ", MaxLineLength/2) + "\n"),
			ErrLineTooLong, "line 3: hosts: line longer than 65536 bytes"},
		{"more than MaxEntries", strings.NewReader(many.String()), ErrTooManyEntries,
			fmt.Sprintf("line %d: hosts: more than 100000 entries", MaxEntries+1)},
		{"read error", iotest.ErrReader(errors.New("disk on fire")), nil, "read: disk on fire"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tab, ws, err := Parse(tc.in)
			if err == nil || tab != nil || ws != nil {
				t.Fatalf("Parse = %v, %v, %v; want an error", tab, ws, err)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("error %v is not %v", err, tc.want)
			}
			if err.Error() != tc.msg {
				t.Errorf("error %q, want %q", err, tc.msg)
			}
		})
	}
}

// TestParseLimitsAccepted: what is at a bound is accepted.
func TestParseLimitsAccepted(t *testing.T) {
	line := "10.0.0.1 a" + strings.Repeat(" a", (MaxLineLength-10)/2)
	if len(line) > MaxLineLength {
		t.Fatalf("test line is %d bytes", len(line))
	}
	tab, ws, err := Parse(strings.NewReader(line + "\r\n"))
	if err != nil || len(ws) != 0 || tab.Len() != 1 {
		t.Fatalf("Parse(longest line) = %v entries, %v, %v", tab.Len(), ws, err)
	}
}

func TestParseWarningsBounded(t *testing.T) {
	in := strings.Repeat("not-an-address name\n", MaxWarnings+50)
	_, ws, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != MaxWarnings+1 {
		t.Fatalf("%d warnings, want %d", len(ws), MaxWarnings+1)
	}
	if got, want := ws[MaxWarnings-1].String(), `line 100: "not-an-address": not an IP address`; got != want {
		t.Errorf("last listed warning %q, want %q", got, want)
	}
	if got, want := ws[MaxWarnings].String(), "50 more problems not listed"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
}
