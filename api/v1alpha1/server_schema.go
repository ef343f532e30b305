package v1alpha1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
)

//go:generate go run ./internal/genschema ../../charts/dnsconfigurer/files/serverconfiguration.schema.json

// SchemaFile is where the chart keeps ServerSchema's output, from the
// module root.
const SchemaFile = "charts/dnsconfigurer/files/serverconfiguration.schema.json"

// FieldRule is a rule of Validate that one field's value decides alone,
// whatever the other fields hold. It is stated so that a JSON schema can
// carry it. Rules between fields stay Validate's alone.
type FieldRule struct {
	// Enum are the allowed strings; "" where it takes the default.
	Enum []string
	// Pattern is a regular expression the whole string must match, in
	// the syntax RE2 and ECMA-262 share; Says is what it asks for.
	Pattern, Says string
	// MinLength and MaxLength bound a string's length.
	MinLength, MaxLength int
	// Min and Max bound a number. With ZeroIsDefault, 0 takes the
	// default and is allowed whatever they say.
	Min, Max      *int64
	ZeroIsDefault bool
	// DurationMin and DurationMax bound a Duration (with HasDuration).
	HasDuration              bool
	DurationMin, DurationMax time.Duration
	// MinItems and MaxItems bound a list; Required are an object's keys
	// that must be given.
	MinItems, MaxItems int
	Required           []string
}

// Regular expressions of the field rules, each anchored by its user.
const (
	octet = `(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])`
	ipv4  = octet + `(\.` + octet + `){3}`
	hex4  = `[0-9A-Fa-f]{1,4}`
	// port is 0-65535, port1 1-65535 (strconv.ParseUint takes leading
	// zeros).
	port     = `0*([0-9]{1,4}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])`
	port1    = `0*([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])`
	label    = `[A-Za-z0-9_-]{1,63}`
	k8sLabel = `[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?`
	// domainLabel is subdomainProblem's label: IsDNSLabel with '_' for a
	// letter, in any case.
	domainLabel = `[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?`
	// durationRE is time.ParseDuration's syntax.
	durationRE = `[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)`
	// byteSizeRE is parseBytes' syntax, above 0.
	byteSizeRE = `([0-9]*[1-9][0-9]*(\.[0-9]+)?|[0-9]+\.[0-9]*[1-9][0-9]*)(k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?`
)

// ipv6 is netip.ParseAddr's IPv6 syntax without a zone: eight groups, or
// six and an IPv4 address, "::" standing for one or more.
var ipv6 = func() string {
	alts := []string{fmt.Sprintf(`(%s:){7}%s`, hex4, hex4), fmt.Sprintf(`(%s:){6}%s`, hex4, ipv4)}
	for a := 0; a <= 7; a++ {
		left := "::"
		if a > 0 {
			left = fmt.Sprintf(`(%s:){%d}:`, hex4, a)
		}
		if k := 7 - a; k > 0 {
			alts = append(alts, fmt.Sprintf(`%s(%s(:%s){0,%d})?`, left, hex4, hex4, k-1))
		} else {
			alts = append(alts, left)
		}
		if a <= 5 {
			alts = append(alts, fmt.Sprintf(`%s(%s:){0,%d}%s`, left, hex4, 5-a, ipv4))
		}
	}
	return "(" + strings.Join(alts, "|") + ")"
}()

var (
	ipRE = "(" + ipv4 + "|" + ipv6 + `(%[\s\S]+)?)`
	// name is normalizeName's syntax (its length aside).
	name = `\.|` + label + `(\.` + label + `)*\.?`
)

func anchored(re string) string { return "^(" + re + ")$" }

func ints(lo, hi int64) FieldRule { return FieldRule{Min: &lo, Max: &hi} }
func atLeast(lo int64) FieldRule  { return FieldRule{Min: &lo} }

// codes is a local EDNS0 option code, 0 taking the default.
func codes() FieldRule {
	r := ints(MinLocalOptionCode, MaxLocalOptionCode)
	r.ZeroIsDefault = true
	return r
}

func durations(lo, hi time.Duration) FieldRule {
	return FieldRule{HasDuration: true, DurationMin: lo, DurationMax: hi}
}

func oneOfOrDefault(values ...string) FieldRule {
	return FieldRule{Enum: append([]string{""}, values...)}
}

func pattern(re, says string) FieldRule { return FieldRule{Pattern: anchored(re), Says: says} }

var (
	// listenRE is checkListen's syntax, upstreamRE parseUpstream's.
	listenRE    = "(" + ipv4 + `|\[` + ipRE + `\])?:` + port
	upstreamRE  = ipRE + "|(" + ipv4 + `|\[` + ipRE + `\]):` + port1
	listenSays  = `not an address such as "0.0.0.0:53", "[::]:53" or ":53"`
	upstreamSay = `not an address such as "10.0.0.53", "10.0.0.53:53" or "[fd00::53]:53"`
	nameRule    = pattern(name, "not a domain name")
	nameMax     = 254 // 253 and a trailing dot
	// anyPath is an absolute path (any character after the slash).
	anyPath = `/[\s\S]*`
)

// ServerFieldRules are Validate's rules of one field each, by path
// ("forward[].timeout": every route's). TestServerFieldRules proves each
// agrees with Validate; ServerSchema puts them in the chart's schema.
var ServerFieldRules = func() map[string]FieldRule {
	cidr := pattern(ipv4+`/(3[0-2]|[12]?[0-9])|`+ipv6+`/(12[0-8]|1[01][0-9]|[1-9]?[0-9])`, `not a CIDR such as "10.96.0.0/12"`)
	r := map[string]FieldRule{
		"apiVersion":         {Enum: []string{GroupVersion}},
		"kind":               {Enum: []string{ServerKind}},
		"mode":               oneOfOrDefault(ModeCluster, ModeNodeLocal),
		"listen[]":           pattern(listenRE, listenSays),
		"clusterDomain":      pattern("|"+domainLabel+`(\.`+domainLabel+`)*\.?`, `not a domain such as "cluster.local"`),
		"metricsListen":      pattern("|"+listenRE, listenSays),
		"logFormat":          oneOfOrDefault("text", "json"),
		"logLevel":           oneOfOrDefault("debug", "info", "warn", "error"),
		"namespaces[]":       pattern(k8sLabel, "not a namespace name (a DNS label)"),
		"pods":               oneOfOrDefault(PodsVerified, PodsInsecure, PodsDisabled),
		"ttl":                ints(0, MaxRecordTTL),
		"autopathOptionCode": codes(),
		"topologyOptionCode": codes(),
		"namespaceMetrics":   ints(0, MaxNamespaceMetrics),

		"forward[]":             {Required: []string{"zone", "upstreams"}},
		"forward[].zone":        nameRule,
		"forward[].except[]":    nameRule,
		"forward[].upstreams":   {MinItems: 1},
		"forward[].upstreams[]": pattern(anyPath+"|"+upstreamRE+"|"+TLSPrefix+"("+upstreamRE+`|\[`+ipRE+`\])`, upstreamSay+", nor one after tls://, nor a resolv.conf path"),
		"forward[].policy":      oneOfOrDefault(PolicyRandom, PolicyRoundRobin, PolicySequential),
		"forward[].maxFails":    atLeast(0),
		"forward[].healthCheck": durations(time.Millisecond, time.Minute),
		"forward[].timeout":     durations(time.Millisecond, time.Minute),
		"forward[].expire":      durations(time.Millisecond, time.Hour),
		// 0 takes the default; below it is refused.
		"maxConcurrent":          atLeast(0),
		"maxConcurrentPerDomain": atLeast(0),
		"shedRcode":              oneOfOrDefault(ShedServfail, ShedRefused),

		"hosts.ttl":                      durations(0, maxDNSTTL),
		"hosts.reload":                   durations(0, time.Hour),
		"overrides[]":                    {Required: []string{"name", "addresses"}},
		"overrides[].name":               pattern(label+`(\.`+label+`)*\.?`, "not a host name"),
		"overrides[].addresses":          {MinItems: 1},
		"overrides[].addresses[]":        pattern(ipRE, "not an IP address"),
		"overrides[].ttl":                durations(0, maxDNSTTL),
		"reverseZones[]":                 cidr,
		"reverseScope[]":                 cidr,
		"rewrites":                       {MaxItems: MaxRewrites},
		"rewrites[]":                     {Required: []string{"from", "to"}},
		"rewrites[].match":               oneOfOrDefault(RewriteExact, RewritePrefix, RewriteSuffix, RewriteSubstring, RewriteRegex),
		"rewrites[].from":                {MinLength: 1, MaxLength: maxRewritePattern},
		"rewrites[].to":                  {MinLength: 1},
		"lameduck":                       durations(0, time.Minute),
		"udpAnswerLimit":                 ints(0, MaxUDPAnswerLimit),
		"udpSockets":                     ints(0, MaxUDPSockets),
		"limits.udpInFlight":             atLeast(0),
		"limits.tcpConnections":          atLeast(0),
		"limits.tcpConnectionsPerClient": atLeast(0),
		"limits.tcpIdleTimeout":          durations(time.Millisecond, time.Hour),
		"limits.tcpWriteTimeout":         durations(time.Millisecond, time.Minute),

		"nodeLocal.clusterUpstream[]": pattern(upstreamRE, upstreamSay),
		// Above AutopathDeadline.
		"nodeLocal.clusterTimeout":  durations(AutopathDeadline+1, time.Minute),
		"nodeLocal.clusterConfig":   pattern("|"+anyPath, "must be an absolute path"),
		"nodeLocal.external":        oneOfOrDefault(ExternalCluster, ExternalDirect),
		"nodeLocal.localIPs[]":      pattern(ipv4+"|"+ipv6, "not an IP address (without a zone)"),
		"nodeLocal.interfaceName":   pattern(`[^/ \t\n:]{0,15}`, "not a Linux interface name (at most 15 characters, no '/', ':' or space)"),
		"nodeLocal.upstreamService": pattern("|"+k8sLabel+"/"+k8sLabel, "must be namespace/name"),
		"nodeLocal.nodeName":        pattern("|"+k8sLabel+`(\.`+k8sLabel+`)*`, "not a node name (a DNS subdomain)"),
	}
	for _, p := range []string{"clusterDomain", "forward[].zone", "forward[].except[]", "overrides[].name"} {
		x := r[p]
		x.MaxLength = nameMax
		r[p] = x
	}
	x := r["nodeLocal.nodeName"]
	x.MaxLength = MaxSubdomainLength
	r["nodeLocal.nodeName"] = x
	cache := map[string]FieldRule{
		"maxTTL":              durations(time.Second, maxDNSTTL),
		"minTTL":              durations(0, maxDNSTTL),
		"maxNegativeTTL":      durations(time.Second, maxDNSTTL),
		"minNegativeTTL":      durations(0, maxDNSTTL),
		"serveStale":          durations(0, 7*24*time.Hour),
		"staleTTL":            durations(time.Second, maxDNSTTL),
		"prefetch.amount":     atLeast(0),
		"prefetch.window":     durations(time.Second, 24*time.Hour),
		"prefetch.percentage": func() FieldRule { r := ints(10, 90); r.ZeroIsDefault = true; return r }(),
	}
	// A route's cache policy has cache's rules (RouteCache.policy).
	for k, v := range cache {
		r["cache."+k] = v
		r["forward[].cache."+k] = v
	}
	return r
}()

// Rules of a type wherever it is used: its syntax.
var typeRules = map[reflect.Type]FieldRule{
	reflect.TypeFor[Duration](): pattern("|"+durationRE, `not a duration such as "5s" or "500ms"`),
	reflect.TypeFor[ByteSize](): func() FieldRule {
		r := pattern("|"+byteSizeRE, `not a size above 0 such as 33554432 or "32Mi"`)
		r.Min = new(int64)
		*r.Min = 1
		return r
	}(),
}

// SchemaNode is one node of ServerSchema's JSON schema: the keywords the
// chart's check (templates/_configcheck.tpl) reads, and x-duration, the
// bounds of a Duration.
type SchemaNode struct {
	Schema               string                 `json:"$schema,omitempty"`
	Comment              string                 `json:"$comment,omitempty"`
	Title                string                 `json:"title,omitempty"`
	Type                 any                    `json:"type,omitempty"`
	Required             []string               `json:"required,omitempty"`
	AdditionalProperties *bool                  `json:"additionalProperties,omitempty"`
	Properties           map[string]*SchemaNode `json:"properties,omitempty"`
	Items                *SchemaNode            `json:"items,omitempty"`
	MinItems             int                    `json:"minItems,omitempty"`
	MaxItems             int                    `json:"maxItems,omitempty"`
	Enum                 []string               `json:"enum,omitempty"`
	Pattern              string                 `json:"pattern,omitempty"`
	MinLength            int                    `json:"minLength,omitempty"`
	MaxLength            int                    `json:"maxLength,omitempty"`
	Minimum              *int64                 `json:"minimum,omitempty"`
	Maximum              *int64                 `json:"maximum,omitempty"`
	// XSays is what Pattern asks for; XZeroIsDefault allows 0 (the
	// default) whatever Minimum says.
	XSays          string          `json:"x-says,omitempty"`
	XZeroIsDefault bool            `json:"x-zeroIsDefault,omitempty"`
	XDuration      *SchemaDuration `json:"x-duration,omitempty"`
}

// SchemaDuration bounds a Duration, as text and in nanoseconds.
type SchemaDuration struct {
	Min      string `json:"min"`
	Max      string `json:"max"`
	MinNanos int64  `json:"minNanos"`
	MaxNanos int64  `json:"maxNanos"`
}

// ServerSchema is the JSON schema of a ServerConfiguration file: its
// fields from the types' json tags (unknown ones refused, as serve
// decodes strictly), their JSON types, and ServerFieldRules.
func ServerSchema() ([]byte, error) {
	used := map[string]bool{}
	root := schemaOf(reflect.TypeFor[ServerConfiguration](), "", used)
	root.Schema = "https://json-schema.org/draft/2020-12/schema"
	root.Comment = "Generated from api/v1alpha1 (server_schema.go) by `go generate ./api/v1alpha1`; do not edit. " +
		"Rules between fields (docs: ServerConfiguration's Validate) are serve's alone. " +
		"x-duration bounds a duration; x-zeroIsDefault allows 0, which takes the default."
	root.Title = ServerKind + " (" + GroupVersion + ")"
	for p := range ServerFieldRules {
		if !used[p] {
			return nil, fmt.Errorf("ServerFieldRules: %s is no field of %s", p, ServerKind)
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(root); err != nil {
		return nil, fmt.Errorf("encoding the schema: %w", err)
	}
	return b.Bytes(), nil
}

// schemaOf is the node of type t at path, marking the rules it applied.
func schemaOf(t reflect.Type, path string, used map[string]bool) *SchemaNode {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	n := &SchemaNode{}
	switch t.Kind() {
	case reflect.Struct:
		n.Type = "object"
		n.AdditionalProperties = new(bool)
		n.Properties = map[string]*SchemaNode{}
		addFields(n, t, path, used)
	case reflect.Slice:
		n.Type = "array"
		n.Items = schemaOf(t.Elem(), path+"[]", used)
	case reflect.String:
		n.Type = "string"
	case reflect.Bool:
		n.Type = "boolean"
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Uint16:
		n.Type = "integer"
	default:
		panic(fmt.Sprintf("v1alpha1: no schema for %s at %s", t, path))
	}
	if r, ok := typeRules[t]; ok {
		if t == reflect.TypeFor[ByteSize]() {
			n.Type = []string{"integer", "string"}
		}
		r.apply(n)
	}
	if r, ok := ServerFieldRules[path]; ok {
		used[path] = true
		r.apply(n)
	}
	return n
}

// addFields adds t's json fields to n, those of embedded structs too.
func addFields(n *SchemaNode, t reflect.Type, path string, used map[string]bool) {
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		switch {
		case !f.IsExported() || tag == "-":
			continue
		case f.Anonymous && name == "":
			addFields(n, f.Type, path, used)
			continue
		case name == "":
			name = f.Name
		}
		p := name
		if path != "" {
			p = path + "." + name
		}
		n.Properties[name] = schemaOf(f.Type, p, used)
	}
	if t == reflect.TypeFor[TypeMeta]() {
		n.Required = append(n.Required, "apiVersion", "kind")
	}
}

// apply puts r's keywords on n; a pattern joins the one n has (a
// type's syntax and a field's form both hold).
func (r FieldRule) apply(n *SchemaNode) {
	if r.Enum != nil {
		n.Enum = r.Enum
	}
	if r.Pattern != "" {
		n.Pattern, n.XSays = r.Pattern, r.Says
	}
	if r.MinLength > 0 {
		n.MinLength = r.MinLength
	}
	if r.MaxLength > 0 {
		n.MaxLength = r.MaxLength
	}
	if r.Min != nil {
		n.Minimum = r.Min
	}
	if r.Max != nil {
		n.Maximum = r.Max
	}
	n.XZeroIsDefault = n.XZeroIsDefault || r.ZeroIsDefault
	if r.HasDuration {
		n.XDuration = &SchemaDuration{Min: r.DurationMin.String(), Max: r.DurationMax.String(),
			MinNanos: int64(r.DurationMin), MaxNanos: int64(r.DurationMax)}
	}
	if r.MinItems > 0 {
		n.MinItems = r.MinItems
	}
	if r.MaxItems > 0 {
		n.MaxItems = r.MaxItems
	}
	for _, k := range r.Required {
		if !slices.Contains(n.Required, k) {
			n.Required = append(n.Required, k)
		}
	}
}
