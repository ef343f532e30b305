package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodesettings"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podspec"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/resolvconf"
)

// explainJSON is the -o json contract of explain: render's fields, the
// pod, its node's agent and the settings used, and the containers.
type explainJSON struct {
	Pod      string `json:"pod"`
	NodeName string `json:"nodeName"`
	Agent    string `json:"agent"`
	renderJSON
	Node       nodesettings.Settings `json:"node"`
	Containers []containerJSON       `json:"containers,omitempty"`
}

// containerJSON is what one container has: status "matches", "differs"
// (missing: expected lines it lacks, extra: lines it has besides) or
// "unreadable" (reason).
type containerJSON struct {
	Name    string   `json:"name"`
	Status  string   `json:"status"`
	Reason  string   `json:"reason,omitempty"`
	Missing []string `json:"missing,omitempty"`
	Extra   []string `json:"extra,omitempty"`
}

// writeExplain prints the facts as -o asks: the pod's resolv.conf as the
// node's agent computes it, the trace and the containers' comparison.
// It is explain's pure part.
func writeExplain(stdout, stderr io.Writer, out string, f explainFacts) int {
	// Warnings and the trace hold the agent's strings too: all of stderr
	// is escaped.
	var errb strings.Builder
	defer func() { io.WriteString(stderr, escapeTerminal(errb.String())) }()
	eng, err := nodeEngine(f.settings.NodeDNS(), f.settings.PodPolicy, f.settings.NodeIPs, slog.New(slog.DiscardHandler))
	if err != nil {
		fmt.Fprintf(&errb, "explain: the settings of agent %s: %v\n", f.agent, err)
		return exitFail
	}
	in := podspec.Input(f.pod)
	in.NamespacePolicy = f.nsPolicy
	res, trace, err := eng.ComputeExplained(in, f.settings.Host.Policy())
	warnings := printWarnings(&errb, eng, res)
	name := f.pod.Namespace + "/" + f.pod.Name
	if err != nil {
		fmt.Fprintf(&errb, "explain: the %s agent fails the sandbox of pod %q: %v\n", f.settings.Kind, name, err)
		writeTrace(&errb, trace)
		return exitFail
	}
	want := resolvconf.Format(res.Config())
	containers := compareContainers(want, f.containers)
	if out == outJSON {
		j := explainJSON{Pod: name, NodeName: f.pod.Spec.NodeName, Agent: f.agent, Node: f.settings, Containers: containers,
			renderJSON: newRenderJSON(res, warnings, trace)}
		var b bytes.Buffer
		if err := writeOutput(&b, outJSON, j); err != nil {
			fmt.Fprintf(&errb, "explain: %v\n", err)
			return exitFail
		}
		stdout.Write(escapeJSONControls(b.Bytes()))
		return exitOK
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# pod %s on node %s: settings of %s agent %s (%s), host %s generation %d%s\n", name, f.pod.Spec.NodeName,
		f.settings.Kind, f.agent, f.settings.Version, f.settings.Host.Path, f.settings.Host.Generation, hostState(f.settings.Host))
	b.WriteString(want)
	writeTrace(&b, trace)
	writeContainers(&b, containers)
	io.WriteString(stdout, escapeTerminal(b.String()))
	return exitOK
}

// escapeTerminal makes text from containers and agents safe for a
// terminal, as kubectl does since CVE-2021-25743: every control character
// but newline and tab (ESC of an OSC 52 clipboard write or a line erase, a
// carriage return that overwrites "differs" with "matches"), DEL, the C1
// controls and invalid UTF-8 are written as Go escapes (\x1b, \r, \u009b).
func escapeTerminal(s string) string {
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
func compareContainers(want string, files []containerFile) []containerJSON {
	var out []containerJSON
	wantLines := lines(want)
	for _, f := range files {
		c := containerJSON{Name: f.name}
		if f.err != nil {
			c.Status, c.Reason = "unreadable", f.err.Error()
			out = append(out, c)
			continue
		}
		var got []string
		if cfg, err := resolvconf.ParseBytes(f.data); err == nil {
			got = lines(resolvconf.Format(cfg))
		} else {
			got = lines(string(f.data))
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
func writeContainers(b *strings.Builder, cs []containerJSON) {
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
