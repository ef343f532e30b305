package v1alpha1

import "testing"

func init() {
	// TestServerFieldRules' sample item and the templates' rule that
	// joins two fields.
	items["templates[]"] = `{"type": "A"}`
	crossField["templates[].fallthroughZones[]"] = "needs fallthrough"
	serveOnly["templates[].zones[]"] = []string{longName(254)}
	serveOnly["templates[].except[]"] = []string{longName(254)}
}

// TestTemplateValidate: each invalid template field is named by its path.
func TestTemplateValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    Template
		want string // "" valid
	}{
		{"defaults", Template{}, ""},
		{"rcode only", Template{Class: "ANY", Type: "AAAA", Rcode: "NXDOMAIN"}, ""},
		{"full", Template{Zones: []string{"example.org"}, Type: "A", Match: []string{`^(?P<a>[0-9]+)\.`},
			Answer: []string{"{{ .Name }} 60 IN A 10.0.0.{{ .Group.a }}"}, Fallthrough: true, FallthroughZones: []string{"example.org"}}, ""},
		{"bad zone", Template{Zones: []string{"a..b"}}, "templates[0].zones[0]"},
		{"bad class", Template{Class: "in"}, "templates[0].class"},
		{"bad type", Template{Type: "a"}, "templates[0].type"},
		{"bad regex", Template{Match: []string{"(["}}, "templates[0].match[0]"},
		{"bad answer", Template{Answer: []string{"{{ .Name "}}, "templates[0].answer[0]"},
		{"bad authority", Template{Authority: []string{"{{ nofunc }}"}}, "templates[0].authority[0]"},
		{"bad except", Template{Except: []string{"a..b"}}, "templates[0].except[0]"},
		{"bad rcode", Template{Rcode: "NXDOMAINX"}, "templates[0].rcode"},
		{"fallthrough zones alone", Template{FallthroughZones: []string{"x"}}, "templates[0].fallthroughZones"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ServerConfiguration{Templates: []Template{tc.t}}
			c.SetDefaults()
			var e fieldErrors
			c.validateTemplates(&e)
			wantFieldError(t, e.join(), tc.want)
		})
	}
	c := ServerConfiguration{Mode: ModeNodeLocal, Templates: []Template{{}}}
	c.SetDefaults()
	var e fieldErrors
	c.validateTemplates(&e)
	if e.join() == nil {
		t.Fatal("templates accepted in mode node-local")
	}
}
