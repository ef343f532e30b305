package v1alpha1

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestRewriteValidate(t *testing.T) {
	many := make([]Rewrite, MaxRewrites+1)
	for i := range many {
		many[i] = Rewrite{From: fmt.Sprintf("a%d.example", i), To: "b.example"}
	}
	tests := []struct {
		name  string
		rules []Rewrite
		want  []string // every error line, in order
	}{
		{"every match type", []Rewrite{
			{From: "db.example.com", To: "db.prod.svc.cluster.local"},
			{Match: "prefix", From: "old-", To: "new-"},
			{Match: "suffix", From: ".corp.internal", To: ".svc.cluster.local", Continue: true},
			{Match: "substring", From: "-canary.", To: "."},
			{Match: "regex", From: `^(.+)-(us-west-1)\.example\.org\.$`, To: "{1}.service.{2}.consul",
				AnswerFrom: `^(.+)\.service\.(us-west-1)\.consul\.$`, AnswerTo: "{1}-{2}.example.org"},
			{Match: "regex", From: `^web\.`, To: "{0}x.example"},
		}, nil},
		{"match", []Rewrite{{Match: "glob", From: "a", To: "b"}},
			[]string{`rewrites[0].match: "glob": must be "exact", "prefix", "suffix", "substring" or "regex"`}},
		{"required", []Rewrite{{}, {Match: "suffix"}, {Match: "regex"}}, []string{
			`rewrites[0].from: required`, `rewrites[0].to: required`,
			`rewrites[1].from: required`, `rewrites[1].to: required`,
			`rewrites[2].from: required`, `rewrites[2].to: required`}},
		{"exact names", []Rewrite{{From: "a..example", To: "b example"}}, []string{
			`rewrites[0].from: "a..example": has an empty label`, `rewrites[0].to: "b example": has the character ' '`}},
		{"name parts", []Rewrite{{Match: "suffix", From: ".corp..internal", To: "*.svc"},
			{Match: "prefix", From: strings.Repeat("a", 64) + ".", To: "b"}}, []string{
			`rewrites[0].from: ".corp..internal": has an empty label`, `rewrites[0].to: "*.svc": has the character '*'`,
			`rewrites[1].from: "` + strings.Repeat("a", 64) + `.": has a label longer than 63 characters`}},
		{"regex", []Rewrite{{Match: "regex", From: `(.*`, To: "{1}.example"}}, []string{
			"rewrites[0].from: \"(.*\": not a regular expression: error parsing regexp: missing closing ): `(.*`"}},
		{"regex groups", []Rewrite{{Match: "regex", From: `^(.+)\.a\.$`, To: "{1}.{2}.example"},
			{Match: "regex", From: `^(.+)\.a\.$`, To: "{10}.example"}, {Match: "regex", From: `^(.+)\.a\.$`, To: "{1}/b"}}, []string{
			`rewrites[0].to: "{1}.{2}.example": {2}: the pattern has 1 groups`,
			`rewrites[1].to: "{10}.example": {10}: groups are {0} to {9}`,
			`rewrites[2].to: "{1}/b": has the character '/'`}},
		{"regex too long", []Rewrite{{Match: "regex", From: strings.Repeat("a", 1025), To: "b"}},
			[]string{`rewrites[0].from: 1025 characters: at most 1024`}},
		{"answer both or neither", []Rewrite{{From: "a", To: "b", AnswerFrom: "^b\\.$"}, {From: "a", To: "b", AnswerTo: "a"}}, []string{
			`rewrites[0].answerTo: required with answerFrom`, `rewrites[1].answerFrom: required with answerTo`}},
		{"answer regex", []Rewrite{{Match: "prefix", From: "a", To: "b", AnswerFrom: "(b", AnswerTo: "a"},
			{Match: "prefix", From: "a", To: "b", AnswerFrom: "^b(.*)$", AnswerTo: "a{2}"}}, []string{
			"rewrites[0].answerFrom: \"(b\": not a regular expression: error parsing regexp: missing closing ): `(b`",
			`rewrites[1].answerTo: "a{2}": {2}: the pattern has 1 groups`}},
		{"too many", many, []string{`rewrites: 65 rules: at most 64`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validServer()
			c.Rewrites = tt.rules
			checkValidate(t, c, tt.want)
		})
	}
}

// mutation is a change to validServer and every line of the error
// Validate gives after it, in order (none: valid).
type mutation struct {
	name   string
	mutate func(*ServerConfiguration)
	want   []string
}

// checkMutations runs each of ms as a subtest (checkValidate).
func checkMutations(t *testing.T, ms []mutation) {
	t.Helper()
	for _, tt := range ms {
		t.Run(tt.name, func(t *testing.T) {
			c := validServer()
			tt.mutate(c)
			checkValidate(t, c, tt.want)
		})
	}
}

// checkValidate sets c's defaults, validates it and fails t unless the
// error lines are want, in order.
func checkValidate(t *testing.T, c *ServerConfiguration, want []string) {
	t.Helper()
	c.SetDefaults()
	err := c.Validate()
	var got []string
	if err != nil {
		got = strings.Split(err.Error(), "\n")
	}
	if !slices.Equal(got, want) {
		t.Errorf("Validate errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestRewriteNodeLocal(t *testing.T) {
	c := &ServerConfiguration{Mode: ModeNodeLocal, NodeLocal: NodeLocal{ClusterUpstream: []string{"10.96.0.11"}},
		Rewrites: []Rewrite{{From: "a.example", To: "b.example"}}}
	c.SetDefaults()
	want := `rewrites: not used in mode "node-local": the cluster DNS rewrites (nodeLocal.clusterConfig)`
	if err := c.Validate(); err == nil || err.Error() != want {
		t.Errorf("Validate = %v, want %s", err, want)
	}
}

func TestRewriteAccessors(t *testing.T) {
	tests := []struct {
		name                   string
		r                      Rewrite
		match, from, to, ansTo string
		auto                   bool
	}{
		{"exact defaulted", Rewrite{From: "DB.Example.com", To: "db.prod.svc.cluster.local."},
			"exact", "db.example.com.", "db.prod.svc.cluster.local.", "", true},
		{"suffix", Rewrite{Match: "suffix", From: ".Corp.Internal", To: ".svc.cluster.local"},
			"suffix", ".corp.internal.", ".svc.cluster.local.", "", true},
		{"prefix gets a dot, as CoreDNS", Rewrite{Match: "prefix", From: "old", To: "new"},
			"prefix", "old.", "new.", "", true},
		{"regex as written", Rewrite{Match: "regex", From: `^(.+)\.A\.$`, To: "{1}.B", AnswerFrom: `^(.+)\.b\.$`, AnswerTo: "{1}.A"},
			"regex", `^(.+)\.A\.$`, "{1}.b.", "{1}.a.", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ServerConfiguration{Rewrites: []Rewrite{tt.r}}
			c.SetDefaults()
			r := c.Rewrites[0]
			got := []any{r.Match, r.FromValue(), r.ToValue(), r.AnswerToValue(), r.AnswerAuto()}
			want := []any{tt.match, tt.from, tt.to, tt.ansTo, tt.auto}
			if !slices.Equal(got, want) {
				t.Errorf("Match, FromValue, ToValue, AnswerToValue, AnswerAuto = %v, want %v", got, want)
			}
		})
	}
}
