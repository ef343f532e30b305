package v1alpha1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestServerSchemaFile: the chart's copy of ServerSchema is fresh.
func TestServerSchemaFile(t *testing.T) {
	want, err := ServerSchema()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "..", SchemaFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale: run go generate ./api/v1alpha1", SchemaFile)
	}
}

// items are the smallest valid list items the samples go into.
var items = map[string]string{
	"forward[]":   `{"zone": "corp.example", "upstreams": ["10.0.0.53"]}`,
	"overrides[]": `{"name": "host.example", "addresses": ["192.0.2.1"]}`,
	"rewrites[]":  `{"from": "a.example", "to": "b.example"}`,
}

// serveOnly are the samples a field's rule in the schema accepts and
// Validate refuses: the parts of its rule the schema cannot state.
var serveOnly = map[string][]string{
	// A name of 254 characters without a trailing dot: over 253.
	"clusterDomain": {longName(254)},
	// Loopback, unspecified, multicast and IPv6 link-local addresses.
	"nodeLocal.localIPs[]": {"::1", "::", "127.0.0.1", "fe80::10", "0.0.0.0", "224.0.0.1"},
	// IPv4-mapped.
	"reverseZones[]": {"::ffff:10.0.0.0/104"},
	"reverseScope[]": {"::ffff:10.0.0.0/104"},
	// Not a whole number of bytes, over int64, under 1Mi.
	"cache.successBytes": {"0.5", "9223372036854775808", "10Ei"},
	"cache.denialBytes":  {"0.5", "9223372036854775808", "10Ei"},
	"cache.zoneBytes":    {"0.5", "9223372036854775808", "10Ei", "1.5Ki", "1.1k", "1048575"},
}

// crossField are the fields with a rule that joins another field's
// value (Validate's alone): only the schema's refusals are checked.
var crossField = map[string]string{
	"forward[].except[]":             "inside the route's zone",
	"forward[].zone":                 "not the cluster domain",
	"overrides[].name":               "outside the cluster domain",
	"rewrites[].from":                "a name, a name part or a regex by match",
	"rewrites[].to":                  "a name, a name part or a replacement by match",
	"cache.minTTL":                   "at most maxTTL",
	"cache.minNegativeTTL":           "at most maxNegativeTTL",
	"forward[].cache.minTTL":         "at most maxTTL",
	"forward[].cache.minNegativeTTL": "at most maxNegativeTTL",
	"topologyOptionCode":             "not autopathOptionCode",
	"limits.tcpConnectionsPerClient": "at most tcpConnections",
}

// stringSamples are tried on every field with a pattern or a length.
var stringSamples = []string{
	"", "10.0.0.53", "10.0.0.53:53", "10.0.0.53:0", "10.0.0.53:65535", "10.0.0.53:65536", "10.0.0.53:053",
	"10.0.0.256", "010.0.0.1", "1.2.3", "10.0.0.1:", ":", ":53", ":053", ":0", "0.0.0.0:53", "host:53", "localhost",
	"[10.0.0.1]:53", "[::]:53", "[::1]:5353", "::1", "::", "1::", "fd00::53", "[fd00::53]:53", "fd00::53:53",
	"fe80::1%eth0", "[fe80::1%eth0]:53", "::ffff:10.0.0.1", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8:9", "1::2::3",
	"12345::1", "1:2:3:4:5:6:1.2.3.4", "1::1.2.3.4", "::1.2.3.4", "1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8",
	"1:2:3:4:5:6:7::8", "127.0.0.1", "169.254.20.10", "fe80::10", "0.0.0.0", "224.0.0.1",
	"/etc/resolv.conf", "/", "relative/path", "$(VAR)", "10.96.0.0/12", "10.96.0.0/33", "10.96.0.0/08",
	"fd00:10:96::/108", "fd00::/129", "::ffff:10.0.0.0/104", "10.0.0.1/32",
	".", "cluster.local", "cluster.local.", "Corp.Example", "a..b", "-a.example", "a-.example", "a_b.example",
	"_a", "a b", "a\nb", "ab\n", strings.Repeat("a", 63) + ".x", strings.Repeat("a", 64), "x." + strings.Repeat("a", 64),
	longName(253), longName(253) + ".", longName(254), longName(254) + ".",
	"kube-system", "Kube-System", "a/b", "kube-system/dnsconfigurer-dns-upstream", "ns/", "/name", "a/b/c",
	"node-1", "node-1.example", "-node", "eth0", "nodelocaldns", "a:b", "sixteen-chars-xx", "fifteen-chars-x",
	"5s", "32Mi", "0", "abc", "é", "tls://10.0.0.53", "tls://[fd00::53]:853", "tls://fd00::53", "tls://10.0.0.53:0", "tls://dns.example",
}

// longName is a dotted name of n characters.
func longName(n int) string {
	s := strings.Repeat(strings.Repeat("a", 62)+".", 5)
	return s[:n-1] + "b"
}

// durationSamples are tried on every duration, around its bounds.
func durationSamples(d *SchemaDuration) []any {
	s := []any{"", "0", "-0s", "-1s", "1h30m", ".5s", "1.s", "5", "abc", "1µs", "1μs", "+5s", "1e3s", "300000000h", "5 s", "s"}
	for _, n := range []int64{d.MinNanos - 1, d.MinNanos, d.MaxNanos, d.MaxNanos + 1} {
		s = append(s, time.Duration(n).String())
	}
	return s
}

var byteSamples = []any{"32Mi", "0", "0Mi", "1.5Ki", "0.5", "1.1k", "", "Mi", "-1", "1.", ".5Mi", "1..5", "33554432",
	"9223372036854775807", "9223372036854775808", "10Ei", "1Mi", "1048575", "+5", "5 Mi",
	33554432.0, 0.0, -1.0, 1.5, 1048576.0, true}

func intSamples(n *SchemaNode) []any {
	s := []any{0.0, -1.0, 1.0, float64(1 << 31), 2.5, "5"}
	for _, b := range []*int64{n.Minimum, n.Maximum} {
		if b != nil {
			s = append(s, float64(*b-1), float64(*b), float64(*b+1))
		}
	}
	return s
}

// samplesFor are the values tried at n.
func samplesFor(n *SchemaNode) []any {
	var s []any
	switch {
	case n.XDuration != nil:
		s = durationSamples(n.XDuration)
	case slices.Equal(types(n), []string{"integer", "string"}):
		s = byteSamples
	case n.Type == "integer":
		s = intSamples(n)
	default:
		for _, v := range n.Enum {
			s = append(s, v, strings.ToUpper(v), v+"x")
		}
		s = append(s, "", "bogus")
		if n.Pattern != "" || n.MinLength > 0 || n.MaxLength > 0 {
			for _, v := range stringSamples {
				s = append(s, v)
			}
			if n.MaxLength > 0 {
				s = append(s, strings.Repeat("a", n.MaxLength), strings.Repeat("a", n.MaxLength+1))
			}
		}
	}
	return s
}

func types(n *SchemaNode) []string {
	switch t := n.Type.(type) {
	case string:
		return []string{t}
	case []any:
		var s []string
		for _, x := range t {
			s = append(s, x.(string))
		}
		return s
	}
	return nil
}

// schemaAccepts is the schema's verdict on v at n, read as
// templates/_configcheck.tpl reads it.
func schemaAccepts(n *SchemaNode, v any) bool {
	switch v := v.(type) {
	case string:
		if !slices.Contains(types(n), "string") {
			return false
		}
		if n.Enum != nil && !slices.Contains(n.Enum, v) {
			return false
		}
		if n.Pattern != "" && !regexp.MustCompile(n.Pattern).MatchString(v) {
			return false
		}
		if l := utf8.RuneCountInString(v); l < n.MinLength || n.MaxLength > 0 && l > n.MaxLength {
			return false
		}
		if d := n.XDuration; d != nil && v != "" {
			p, err := time.ParseDuration(v)
			return err == nil && int64(p) >= d.MinNanos && int64(p) <= d.MaxNanos
		}
		return true
	case float64:
		if !slices.Contains(types(n), "integer") || v != math.Trunc(v) {
			return false
		}
		if v == 0 && n.XZeroIsDefault {
			return true
		}
		return (n.Minimum == nil || v >= float64(*n.Minimum)) && (n.Maximum == nil || v <= float64(*n.Maximum))
	}
	return false
}

// base is a valid configuration of a mode.
func base(mode string) map[string]any {
	m := map[string]any{"apiVersion": GroupVersion, "kind": ServerKind}
	if mode == ModeNodeLocal {
		m["mode"] = mode
		m["nodeLocal"] = map[string]any{"clusterUpstream": []any{"10.0.0.10"}}
	}
	return m
}

// setAt sets path (ServerFieldRules' form) in m to v, creating the
// lists on the way with one item of items; it returns the concrete path
// ("forward[0].zone").
func setAt(m map[string]any, path string, v any, del bool) string {
	segs := strings.Split(path, ".")
	var done []string
	cur := m
	for i, seg := range segs {
		name, list := strings.CutSuffix(seg, "[]")
		last := i == len(segs)-1
		done = append(done, seg)
		switch {
		case last && del:
			delete(cur, name)
		case last && list:
			cur[name] = []any{v}
		case last:
			cur[name] = v
		case list:
			var item map[string]any
			if err := json.Unmarshal([]byte(items[strings.Join(done, ".")]), &item); err != nil {
				panic(err)
			}
			cur[name] = []any{item}
			cur = item
		default:
			next, ok := cur[name].(map[string]any)
			if !ok {
				next = map[string]any{}
				cur[name] = next
			}
			cur = next
		}
	}
	return strings.ReplaceAll(path, "[]", "[0]")
}

// validateAt is Validate's verdict on m at the concrete path: false
// when it, or the decoding, refuses that field.
func validateAt(t *testing.T, m map[string]any, path string) bool {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var c ServerConfiguration
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return false
	}
	if err := c.CheckKind(ServerKind); err != nil {
		return !strings.HasPrefix(err.Error(), path+":")
	}
	c.SetDefaults()
	err = c.Validate()
	if err == nil {
		return true
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		if strings.HasPrefix(line, path+":") {
			return false
		}
	}
	return true
}

// TestServerFieldRules: each rule of the schema agrees with Validate.
// A value the schema refuses, Validate refuses at that field in both
// modes (the chart never refuses what serve takes); a value it accepts,
// Validate accepts in the mode the field is for, but for serveOnly.
func TestServerFieldRules(t *testing.T) {
	b, err := ServerSchema()
	if err != nil {
		t.Fatal(err)
	}
	var root SchemaNode
	if err := json.Unmarshal(b, &root); err != nil {
		t.Fatal(err)
	}
	checked := 0
	hit := map[string]bool{}
	var walk func(n *SchemaNode, path string)
	walk = func(n *SchemaNode, path string) {
		for k, c := range n.Properties {
			p := k
			if path != "" {
				p = path + "." + k
			}
			walk(c, p)
		}
		if n.Items != nil {
			walk(n.Items, path+"[]")
		}
		mode := ModeCluster
		if strings.HasPrefix(path, "nodeLocal.") {
			mode = ModeNodeLocal
		}
		check := func(what string, v any, schemaOK bool, set func(m map[string]any) string) {
			t.Helper()
			checked++
			for _, md := range []string{ModeCluster, ModeNodeLocal} {
				m := base(md)
				at := set(m)
				serveOK := validateAt(t, m, at)
				switch {
				case !schemaOK && serveOK:
					t.Errorf("%s %s (mode %s): the schema refuses, Validate accepts", path, what, md)
				case crossField[path] != "":
				case md == mode && schemaOK && !serveOK && slices.Contains(serveOnly[path], fmt.Sprint(v)):
					hit[path+" "+fmt.Sprint(v)] = true
				case md == mode && schemaOK && !serveOK:
					t.Errorf("%s %s (mode %s): the schema accepts, Validate refuses", path, what, md)
				case md == mode && schemaOK && serveOK && slices.Contains(serveOnly[path], fmt.Sprint(v)):
					t.Errorf("%s %s: in serveOnly, but Validate accepts it", path, what)
				}
			}
		}
		if n.Type != "object" && n.Type != "array" && n.Type != "boolean" {
			for _, v := range samplesFor(n) {
				check(fmt.Sprintf("%#v", v), v, schemaAccepts(n, v), func(m map[string]any) string { return setAt(m, path, v, false) })
			}
		}
		if n.MinItems > 0 {
			check("[]", "[]", false, func(m map[string]any) string { return setAt(m, path, []any{}, false) })
		}
		if n.MaxItems > 0 {
			for _, l := range []int{n.MaxItems, n.MaxItems + 1} {
				var item any
				_ = json.Unmarshal([]byte(items[path+"[]"]), &item)
				list := slices.Repeat([]any{item}, l)
				check(fmt.Sprintf("%d items", l), l, l <= n.MaxItems, func(m map[string]any) string { return setAt(m, path, list, false) })
			}
		}
		for _, r := range n.Required {
			p := strings.TrimPrefix(path+"."+r, ".")
			check("without "+r, "", false, func(m map[string]any) string { return setAt(m, p, nil, true) })
		}
	}
	walk(&root, "")
	for p, vs := range serveOnly {
		for _, v := range vs {
			if !hit[p+" "+v] {
				t.Errorf("serveOnly %s %q: not a sample the schema accepts and Validate refuses", p, v)
			}
		}
	}
	t.Logf("%d samples", checked)
}
