package hosts

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// static is pkg/clusterdns's Static interface, declared here so that this
// package need not import the server.
type static interface {
	Lookup(name string, qtype uint16) (rrs []dns.RR, found bool)
}

var (
	_ static = (*Table)(nil)
	_ static = (*Source)(nil)
)

const fixture = `
10.0.0.1 web www
fd00::1 web
10.0.0.2 db
fd00::2 v6only
`

func mustParse(t *testing.T, in string, cfg Config) *Table {
	t.Helper()
	tab, ws, err := ParseConfig(strings.NewReader(in), cfg)
	if err != nil || len(ws) > 0 {
		t.Fatalf("ParseConfig = %v, %v", ws, err)
	}
	return tab
}

func TestLookup(t *testing.T) {
	tab := mustParse(t, fixture, Config{})
	checkLookups(t, tab, []lookup{
		{"web.", dns.TypeA, []string{"10.0.0.1"}, true},
		{"web.", dns.TypeAAAA, []string{"fd00::1"}, true},
		{"web.", dns.TypeANY, []string{"10.0.0.1", "fd00::1"}, true},
		{"web.", dns.TypeMX, nil, true},
		{"web.", dns.TypePTR, nil, true},
		{"db.", dns.TypeAAAA, nil, true},
		{"v6only.", dns.TypeA, nil, true},
		{"v6only.", dns.TypeAAAA, []string{"fd00::2"}, true},
		{"1.0.0.10.in-addr.arpa.", dns.TypePTR, []string{"web.", "www."}, true},
		{"1.0.0.10.in-addr.arpa.", dns.TypeA, nil, true},
		{"1.0.0.10.in-addr.arpa.", dns.TypeANY, []string{"web.", "www."}, true},
		{"3.0.0.10.in-addr.arpa.", dns.TypePTR, nil, false},
		{"nope.", dns.TypeA, nil, false},
		{"web", dns.TypeA, nil, false},  // not fully qualified
		{"WEB.", dns.TypeA, nil, false}, // not lowercase
	})
	rrs, _ := tab.Lookup("web.", dns.TypeA)
	if got, want := rrs[0].String(), "web.\t3600\tIN\tA\t10.0.0.1"; got != want {
		t.Errorf("record %q, want %q", got, want)
	}
}

func TestLookupTTLAndNoReverse(t *testing.T) {
	tab := mustParse(t, fixture, Config{TTL: 60 * time.Second, NoReverse: true})
	checkLookups(t, tab, []lookup{
		{"web.", dns.TypeA, []string{"10.0.0.1"}, true},
		{"1.0.0.10.in-addr.arpa.", dns.TypePTR, nil, false},
	})
	for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
		rrs, _ := tab.Lookup("web.", qt)
		if ttl := rrs[0].Header().Ttl; ttl != 60 {
			t.Errorf("%s TTL %d, want 60", dns.TypeToString[qt], ttl)
		}
	}
}

// TestLookupSlicesAreSafe: appending to a returned slice cannot change the
// table, and a lookup does not allocate.
func TestLookupSlicesAreSafe(t *testing.T) {
	tab := mustParse(t, "10.0.0.1 a\n10.0.0.2 a\nfd00::1 a\n", Config{})
	for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypePTR, dns.TypeANY} {
		rrs, _ := tab.Lookup("a.", qt)
		if cap(rrs) != len(rrs) {
			t.Errorf("%s: cap %d, len %d", dns.TypeToString[qt], cap(rrs), len(rrs))
		}
	}
	a, _ := tab.Lookup("a.", dns.TypeA)
	_ = append(a, &dns.A{})
	all, _ := tab.Lookup("a.", dns.TypeANY)
	_ = append(all, &dns.MX{})
	checkLookups(t, tab, []lookup{
		{"a.", dns.TypeA, []string{"10.0.0.1", "10.0.0.2"}, true},
		{"a.", dns.TypeANY, []string{"10.0.0.1", "10.0.0.2", "fd00::1"}, true},
	})
	if n := testing.AllocsPerRun(100, func() { tab.Lookup("a.", dns.TypeA) }); n != 0 {
		t.Errorf("Lookup allocates %v times", n)
	}
}

func TestOverrides(t *testing.T) {
	file := "10.0.0.1 web www\n10.0.0.9 host.minikube.internal\n10.0.0.2 db\n"
	cfg := Config{Overrides: []Override{
		{Name: "Host.Minikube.Internal", Addresses: []netip.Addr{netip.MustParseAddr("192.168.49.1")}},
		{Name: "web.", Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.5"), netip.MustParseAddr("fd00::5")}, TTL: 30 * time.Second},
		{Name: "extra", Addresses: []netip.Addr{netip.MustParseAddr("::ffff:10.0.0.2")}},
	}}
	tab := mustParse(t, file, cfg)
	checkLookups(t, tab, []lookup{
		{"host.minikube.internal.", dns.TypeA, []string{"192.168.49.1"}, true},
		{"web.", dns.TypeA, []string{"10.0.0.5"}, true},
		{"web.", dns.TypeAAAA, []string{"fd00::5"}, true},
		{"www.", dns.TypeA, []string{"10.0.0.1"}, true},
		{"extra.", dns.TypeA, []string{"10.0.0.2"}, true},
		{"db.", dns.TypeA, []string{"10.0.0.2"}, true},
		// The file's PTR records of overridden names are gone.
		{"1.0.0.10.in-addr.arpa.", dns.TypePTR, []string{"www."}, true},
		{"9.0.0.10.in-addr.arpa.", dns.TypePTR, nil, false},
		// The overrides' PTR records come after the file's.
		{"2.0.0.10.in-addr.arpa.", dns.TypePTR, []string{"db.", "extra."}, true},
		{"5.0.0.10.in-addr.arpa.", dns.TypePTR, []string{"web."}, true},
		{"1.49.168.192.in-addr.arpa.", dns.TypePTR, []string{"host.minikube.internal."}, true},
	})
	if tab.Len() != 6 {
		t.Errorf("Len %d, want 6", tab.Len())
	}
	for _, name := range []string{"web.", "5.0.0.10.in-addr.arpa."} {
		rrs, _ := tab.Lookup(name, dns.TypeANY)
		if ttl := rrs[0].Header().Ttl; ttl != 30 {
			t.Errorf("%s: TTL %d, want the override's 30", name, ttl)
		}
	}
	rrs, _ := tab.Lookup("host.minikube.internal.", dns.TypeA)
	if ttl := rrs[0].Header().Ttl; ttl != 3600 {
		t.Errorf("TTL %d, want the default 3600", ttl)
	}

	alone, err := NewTable(cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkLookups(t, alone, []lookup{
		{"web.", dns.TypeA, []string{"10.0.0.5"}, true},
		{"www.", dns.TypeA, nil, false},
	})
}

func TestConfigValidate(t *testing.T) {
	ip := netip.MustParseAddr
	tests := []struct {
		name string
		cfg  Config
		want []string // the lines of the joined error; nil: valid
	}{
		{"empty", Config{}, nil},
		{"largest TTL", Config{TTL: maxTTL * time.Second}, nil},
		{"negative TTL", Config{TTL: -time.Second}, []string{"ttl: -1s: must not be negative"}},
		{"fractional TTL", Config{TTL: 1500 * time.Millisecond}, []string{"ttl: 1.5s: must be a whole number of seconds"}},
		{"TTL too large", Config{TTL: (maxTTL + 1) * time.Second}, []string{"ttl: 596523h14m8s: must be at most 2147483647s"}},
		{"every override problem", Config{Overrides: []Override{
			{Name: "ok", Addresses: []netip.Addr{ip("10.0.0.1")}},
			{Name: "a..b", Addresses: []netip.Addr{ip("10.0.0.1")}},
			{Name: "OK.", Addresses: []netip.Addr{ip("10.0.0.1")}},
			{Name: "none"},
			{Name: "bad", Addresses: []netip.Addr{ip("10.0.0.1"), {}, ip("fe80::1%eth0"), ip("::ffff:10.0.0.1")}, TTL: -2 * time.Second},
		}}, []string{
			`overrides[1].name: "a..b": empty label`,
			`overrides[2].name: "OK.": the name of overrides[0] too`,
			`overrides[3].addresses: at least one address is required`,
			`overrides[4].addresses[1]: not an IP address`,
			`overrides[4].addresses[2]: "fe80::1%eth0": an address with a zone is not allowed`,
			`overrides[4].addresses[3]: "10.0.0.1": the same as addresses[0]`,
			`overrides[4].ttl: -2s: must not be negative`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate: nil, want %q", tc.want)
			}
			if got := strings.Split(err.Error(), "\n"); !slices.Equal(got, tc.want) {
				t.Errorf("Validate:\n got %q\nwant %q", got, tc.want)
			}
			if _, err := NewTable(tc.cfg); err == nil {
				t.Error("NewTable accepted the config")
			}
			if _, _, err := ParseConfig(strings.NewReader(""), tc.cfg); err == nil {
				t.Error("ParseConfig accepted the config")
			}
		})
	}
}

func TestOverridesCountTowardsMaxEntries(t *testing.T) {
	addrs := make([]netip.Addr, MaxEntries)
	for i := range addrs {
		addrs[i] = netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
	}
	cfg := Config{Overrides: []Override{{Name: "many", Addresses: addrs}}}
	if _, err := NewTable(cfg); err != nil {
		t.Fatalf("NewTable at the bound: %v", err)
	}
	_, _, err := ParseConfig(strings.NewReader("10.0.0.1 one-more\n"), cfg)
	if err == nil || !strings.Contains(err.Error(), "100001 entries with the overrides: hosts: more than 100000 entries") {
		t.Fatalf("ParseConfig over the bound: %v", err)
	}
	// The file's entries for an overridden name do not count.
	if _, _, err := ParseConfig(strings.NewReader("10.0.0.1 many\n"), cfg); err != nil {
		t.Fatalf("ParseConfig with an overridden name: %v", err)
	}
}

// TestNames: every owner name the table answers, host names and reverse
// names, overrides included; an early stop ends the iteration.
func TestNames(t *testing.T) {
	tab := mustParse(t, fixture, Config{Overrides: []Override{{Name: "Host.Example", Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.7")}}}})
	got := slices.Sorted(tab.Names())
	want := []string{"1.0.0.10.in-addr.arpa.", "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.",
		"2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", "2.0.0.10.in-addr.arpa.",
		"7.2.0.192.in-addr.arpa.", "db.", "host.example.", "v6only.", "web.", "www."}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("Names = %q\nwant %q", got, want)
	}
	n := 0
	for range tab.Names() {
		n++
		break
	}
	if n != 1 {
		t.Errorf("iteration went on after a stop: %d", n)
	}
}
