package v1alpha1

import (
	"strings"
	"testing"
)

func init() {
	serveOnly["external.zones[]"] = []string{longName(254)}
	serveOnly["external.apex"] = []string{longName(254)}
}

// TestExternalValidate: each invalid external field is named by its path;
// the defaults are k8s_external's.
func TestExternalValidate(t *testing.T) {
	ttl := func(n int) *int { return &n }
	for _, tc := range []struct {
		name string
		x    External
		mode string
		want string // "" valid
	}{
		{"zone", External{Zones: []string{"example.org"}}, "", ""},
		{"options", External{Zones: []string{"example.org.", "example.net"}, Apex: "ns", TTL: ttl(0)}, "", ""},
		{"bad zone", External{Zones: []string{"a..b"}}, "", "external.zones[0]"},
		{"bad apex", External{Zones: []string{"x"}, Apex: "a..b"}, "", "external.apex"},
		{"ttl over", External{Zones: []string{"x"}, TTL: ttl(3601)}, "", "external.ttl"},
		{"ttl under", External{Zones: []string{"x"}, TTL: ttl(-1)}, "", "external.ttl"},
		{"node-local", External{Zones: []string{"x"}}, ModeNodeLocal, "external: not used in mode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ServerConfiguration{Mode: tc.mode, External: &tc.x}
			c.SetDefaults()
			var e fieldErrors
			c.External.validate(&e, c.Mode)
			wantFieldError(t, e.join(), tc.want)
		})
	}
	c := ServerConfiguration{External: &External{Zones: []string{"example.org"}}}
	c.SetDefaults()
	if c.External.Apex != DefaultExternalApex || c.External.TTLValue() != DefaultExternalTTL {
		t.Fatalf("defaults %+v", c.External)
	}
}

// wantFieldError fails t unless err is nil when want is "", or names want.
func wantFieldError(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("refused: %v", err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Fatalf("err %v, want an error containing %q", err, want)
	}
}
