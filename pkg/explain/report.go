package explain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodesettings"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

// The -o formats of explain.
const (
	FormatText = "text"
	FormatJSON = "json"
)

// Computed is the pod's resolv.conf as its node's agent computes it, in
// render's forms.
type Computed struct {
	ResolvConf string // the file
	Trace      string // render --explain's # lines
	Render     any    // render -o json's object; its fields join the report's
}

// Compute is the agent's policy over the facts, as render runs it: its
// warnings go to warn; on an error, Trace may say why.
type Compute func(warn io.Writer, f Facts) (Computed, error)

// Report is the -o json contract of explain: render's fields (spliced in
// after Agent), the pod, its node's agent and the settings used, the
// containers and the topology of its headless names.
type Report struct {
	Pod        string                `json:"pod"`
	NodeName   string                `json:"nodeName"`
	Agent      string                `json:"agent"`
	Render     any                   `json:"-"`
	Node       nodesettings.Settings `json:"node"`
	Containers []Container           `json:"containers,omitempty"`
	Topology   *TopologyReport       `json:"topology,omitempty"`
}

// Container is what one container has: status "matches", "differs"
// (missing: expected lines it lacks, extra: lines it has besides) or
// "unreadable" (reason).
type Container struct {
	Name    string   `json:"name"`
	Status  string   `json:"status"`
	Reason  string   `json:"reason,omitempty"`
	Missing []string `json:"missing,omitempty"`
	Extra   []string `json:"extra,omitempty"`
}

// Write prints the facts as format asks: the pod's resolv.conf as the
// node's agent computes it, the trace and the containers' comparison.
// A failure is printed to stderr and returned.
func Write(stdout, stderr io.Writer, format string, f Facts, compute Compute) error {
	// Warnings and the trace hold the agent's strings too: all of stderr
	// is escaped.
	var errb strings.Builder
	defer func() { io.WriteString(stderr, EscapeTerminal(errb.String())) }()
	c, err := compute(&errb, f)
	if err != nil {
		fmt.Fprintf(&errb, "explain: %v\n", err)
		errb.WriteString(c.Trace)
		return err
	}
	name := f.Pod.Namespace + "/" + f.Pod.Name
	containers := compareContainers(c.ResolvConf, f.Containers)
	if format == FormatJSON {
		r := Report{Pod: name, NodeName: f.Pod.Spec.NodeName, Agent: f.Agent, Render: c.Render, Node: f.Settings, Containers: containers,
			Topology: f.Topology.Report()}
		b, err := r.indent()
		if err != nil {
			fmt.Fprintf(&errb, "explain: %v\n", err)
			return err
		}
		stdout.Write(escapeJSONControls(b))
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# pod %s on node %s: settings of %s agent %s (%s), host %s generation %d%s\n", name, f.Pod.Spec.NodeName,
		f.Settings.Kind, f.Agent, f.Settings.Version, f.Settings.Host.Path, f.Settings.Host.Generation, hostState(f.Settings.Host))
	b.WriteString(c.ResolvConf)
	b.WriteString(c.Trace)
	writeContainers(&b, containers)
	writeTopology(&b, f.Topology.Report())
	io.WriteString(stdout, EscapeTerminal(b.String()))
	return nil
}

// MarshalJSON writes Render's fields between Agent and Node, as an
// embedded struct would.
func (r Report) MarshalJSON() ([]byte, error) {
	head, err := json.Marshal(struct {
		Pod      string `json:"pod"`
		NodeName string `json:"nodeName"`
		Agent    string `json:"agent"`
	}{r.Pod, r.NodeName, r.Agent})
	if err != nil {
		return nil, err
	}
	mid, err := json.Marshal(r.Render)
	if err != nil {
		return nil, err
	}
	tail, err := json.Marshal(struct {
		Node       nodesettings.Settings `json:"node"`
		Containers []Container           `json:"containers,omitempty"`
		Topology   *TopologyReport       `json:"topology,omitempty"`
	}{r.Node, r.Containers, r.Topology})
	if err != nil {
		return nil, err
	}
	out := head[:len(head)-1]
	if inner := bytes.TrimSpace(mid); len(inner) > 2 && inner[0] == '{' {
		out = append(append(out, ','), inner[1:len(inner)-1]...)
	}
	return append(append(out, ','), tail[1:]...), nil
}

// indent is the report as an indented JSON document, as writeOutput
// prints render's.
func (r Report) indent() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// EscapeTerminal makes text from containers and agents safe for a
// terminal, as kubectl does since CVE-2021-25743: every control character
// but newline and tab (ESC of an OSC 52 clipboard write or a line erase, a
// carriage return that overwrites "differs" with "matches"), DEL, the C1
// controls and invalid UTF-8 are written as Go escapes (\x1b, \r, \u009b).
func EscapeTerminal(s string) string {
	safe := func(r rune) bool {
		return r == '\n' || r == '\t' || (r >= 0x20 && r != 0x7f && (r < 0x80 || r > 0x9f) && r != utf8.RuneError)
	}
	if !strings.ContainsFunc(s, func(r rune) bool { return !safe(r) }) {
		return s
	}
	var b strings.Builder
	for i, w := 0, 0; i < len(s); i += w {
		r, n := utf8.DecodeRuneInString(s[i:])
		w = n
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case safe(r) || r == utf8.RuneError:
			b.WriteString(s[i : i+n])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
	}
	return b.String()
}

// escapeJSONControls writes the control characters encoding/json leaves
// raw (DEL and the C1 controls, which a terminal may act on) as \u
// escapes. They occur only inside strings, so the JSON means the same.
func escapeJSONControls(b []byte) []byte {
	if !bytes.ContainsFunc(b, func(r rune) bool { return r >= 0x7f && r <= 0x9f }) {
		return b
	}
	out := make([]byte, 0, len(b)+64)
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r >= 0x7f && r <= 0x9f {
			out = fmt.Appendf(out, `\u%04x`, r)
		} else {
			out = append(out, b[i:i+n]...)
		}
		i += n
	}
	return out
}

// hostState is what the text header says of a host file with a problem.
func hostState(h nodesettings.Host) string {
	switch {
	case h.Error != "":
		return " (unusable: " + h.Error + ")"
	case h.Problem != "":
		return " (last good copy; the file: " + h.Problem + ")"
	}
	return ""
}

// compareContainers compares each container's file with want, line by
// line after both are parsed and formatted as resolv.conf.
func compareContainers(want string, files []File) []Container {
	var out []Container
	wantLines := lines(want)
	for _, f := range files {
		c := Container{Name: f.Name}
		if f.Err != nil {
			c.Status, c.Reason = "unreadable", f.Err.Error()
			out = append(out, c)
			continue
		}
		var got []string
		if cfg, err := resolvconf.ParseBytes(f.Data); err == nil {
			got = lines(resolvconf.Format(cfg))
		} else {
			got = lines(string(f.Data))
		}
		c.Status = "matches"
		if !slices.Equal(got, wantLines) {
			c.Status = "differs"
			c.Missing, c.Extra = minus(wantLines, got), minus(got, wantLines)
			if c.Missing == nil && c.Extra == nil {
				c.Reason = "the same lines in another order"
			}
		}
		out = append(out, c)
	}
	return out
}

// writeContainers prints the comparison as # lines: - for an expected line
// the container lacks, + for one it has besides.
func writeContainers(b *strings.Builder, cs []Container) {
	if cs == nil {
		return
	}
	b.WriteString("# containers (/etc/resolv.conf)\n")
	for _, c := range cs {
		fmt.Fprintf(b, "# %s: %s", c.Name, c.Status)
		if c.Reason != "" {
			fmt.Fprintf(b, ": %s", c.Reason)
		}
		b.WriteString("\n")
		for _, l := range c.Missing {
			fmt.Fprintf(b, "#      - %s\n", l)
		}
		for _, l := range c.Extra {
			fmt.Fprintf(b, "#      + %s\n", l)
		}
	}
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// minus is the lines of a not in b, in a's order.
func minus(a, b []string) []string {
	var out []string
	for _, l := range a {
		if !slices.Contains(b, l) {
			out = append(out, l)
		}
	}
	return out
}
