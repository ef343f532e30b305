package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"unicode"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/explain"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodesettings"
)

// unescapeTerminal reverses escapeTerminal for text without a backslash:
// each Go escape becomes the byte or rune it stands for.
func unescapeTerminal(s string) (string, error) {
	var b strings.Builder
	for len(s) > 0 {
		v, multibyte, tail, err := strconv.UnquoteChar(s, 0)
		if err != nil {
			return "", err
		}
		if multibyte || v >= utf8.RuneSelf && !strings.HasPrefix(s, `\x`) {
			b.WriteRune(v)
		} else {
			b.WriteByte(byte(v))
		}
		s = tail
	}
	return b.String(), nil
}

// terminalSafe reports the first thing in out a terminal would act on:
// invalid UTF-8, or a control character (C0, DEL, C1) but newline and tab.
func terminalSafe(out []byte) error {
	if !utf8.Valid(out) {
		return errors.New("invalid UTF-8")
	}
	for i, r := range string(out) {
		if r != '\n' && r != '\t' && unicode.IsControl(r) {
			return errors.New("control character " + strconv.QuoteRune(r) + " at byte " + strconv.Itoa(i))
		}
	}
	return nil
}

// validUTF8 is s with each byte that is not UTF-8 replaced by U+FFFD, as
// encoding/json writes it.
func validUTF8(s string) string {
	var b strings.Builder
	for _, r := range s {
		b.WriteRune(r) // range yields utf8.RuneError for each invalid byte
	}
	return b.String()
}

// FuzzEscapeTerminal: whatever a container or an agent sends, the escaped
// text is valid UTF-8 without a control character but newline and tab;
// text that needs no escape is unchanged, the escaped text needs none, and
// text without a backslash can be read back from its escaped form, so two
// such texts never look the same on the operator's terminal.
//
//	go test -run '^$' -fuzz '^FuzzEscapeTerminal$' -fuzztime 50000x ./cmd/dnsconfigurer/
func FuzzEscapeTerminal(f *testing.F) {
	for _, s := range []string{
		"nameserver 10.0.0.1\n\toptions ndots:2\n",
		"\x1b]52;c;ZXZpbA==\x07",
		"differs\r# app: matches",
		"\x1b[2K\x1b[1A\x7f",
		"csi\u009b31m \u0085 \u00a0",
		"bad \xff\xfe\xc2 byte \xc2\x9b",
		"straße ünïcode \ufffd \u202e \u2028",
		"\x00\x01\x08\x0b\x0c\x1f",
		`literal \x1b and \\ and \u009b`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := explain.EscapeTerminal(in)
		if err := terminalSafe([]byte(out)); err != nil {
			t.Fatalf("escapeTerminal(%q) = %q: %v", in, out, err)
		}
		if again := explain.EscapeTerminal(out); again != out {
			t.Fatalf("escaped text %q escaped again: %q", out, again)
		}
		if terminalSafe([]byte(in)) == nil && out != in {
			t.Fatalf("safe text %q changed to %q", in, out)
		}
		if len(out) > 10*len(in) {
			t.Fatalf("%d bytes escaped to %d", len(in), len(out))
		}
		if strings.Contains(in, `\`) {
			return // a literal backslash may read as an escape (kubectl's escaping is not reversible either)
		}
		back, err := unescapeTerminal(out)
		if err != nil || back != in {
			t.Fatalf("escapeTerminal(%q) = %q reads back as %q (%v)", in, out, back, err)
		}
	})
}

// FuzzExplain feeds explain what it reads from others: an agent's
// /node-settings body (decoded by the same HTTP client code), a
// container's /etc/resolv.conf and an exec error. The body decodes to a
// clear error naming the path, or to settings whose JSON form reads back
// as the same JSON; explain's output, text or JSON, on stdout and stderr,
// is terminal safe (valid UTF-8, no control character but newline and
// tab), bounded by its input, and the JSON parses with each container's
// status one of the three.
//
//	go test -run '^$' -fuzz '^FuzzExplain$' -fuzztime 50000x ./cmd/dnsconfigurer/
func FuzzExplain(f *testing.F) {
	good, err := json.Marshal(explainSettings(nil))
	if err != nil {
		f.Fatal(err)
	}
	hostile := strings.NewReplacer(`"v0.0.0-test"`, `"v1\u001b]52;c;eA==\u0007"`, `"corp.example.com"`, `"corp\u009b2J.example\r.com"`,
		`"/etc/resolv.conf"`, `"/etc/\u001b[31mresolv.conf"`).Replace(string(good))
	bad := strings.Replace(string(good), `"timeout:2"`, `"ndots:\u001b[2K"`, 1)
	for _, s := range []struct {
		settings, resolv, reason string
		json                     bool
	}{
		{string(good), "# generated\n" + clusterFirstFile, "", false},
		{string(good), clusterFirstFile, "exec cat /etc/resolv.conf (no cat in the image?): exit 126", true},
		{string(good), "nameserver 10.0.0.66\x1b]52;c;Y3VybA==\x07\n\x1b[2K\x1b[1A\r# app: matches\x9b\xff\n", "exec: \x1b[31mfake\x1b[0m\rok", false},
		{string(good), "nameserver 10.0.0.66\u009b2J\nsearch a\x7fb \xc2\x9b\n", "\u0085", true},
		{hostile, clusterFirstFile, "", false},
		{hostile, clusterFirstFile, "", true},
		{bad, "options ndots:\x1b[2K\n", "", false},
		{`{"kind": "shim", "clusterDomain": "x\u0000y", "clusterDNS": ["1.2.3.4\u001b"], "host": {"path": "", "error": "\u001b[2J"}}`, "", "", false},
		{`{"kind": "nri", "host": {"disabled": true}, "podPolicy": {"ndots": -1}}`, "nameserver 1.1.1.1\n", "", true},
		{`{"kind": 7}`, "", "", false},
		{`{"clusterDNS": null, "nodeIPs": [], "host": {"lines": {"nameservers": [1e9]}}}`, "", "", true},
		{"[]", "", "", false},
		{"HTTP/1.1 500 bad\x1b[2J\u009b\r\nContent-Length: 0\r\n\r\n", "", "", false},
		{"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{\"kind\":\"", "", "", false},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", "", "", true},
		{"HTTP/1.1 404 Not Found\r\n\r\n", "", "", false},
		{"", "", "", false},
		{`{"version": "` + strings.Repeat("\xff", 40) + `"}`, "", "", false},
	} {
		f.Add([]byte(s.settings), []byte(s.resolv), s.reason, s.json)
	}
	pod, err := readPod(filepath.Join("testdata", "pods", "clusterfirst.yaml"), nil)
	if err != nil {
		f.Fatal(err)
	}
	pod.Spec.NodeName = "node-a"
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "sidecar"})
	var body atomic.Pointer[[]byte]
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		b := *body.Load()
		if !bytes.HasPrefix(b, []byte("HTTP/1.")) {
			w.Write(b)
			return
		}
		// The whole response as the agent writes it: status line,
		// headers and body.
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			c.Write(b)
			c.Close()
		}
	}))
	f.Cleanup(agent.Close)
	f.Fuzz(func(t *testing.T, settings, resolv []byte, reason string, jsonOut bool) {
		body.Store(&settings)
		s, err := explain.GetNodeSettings(t.Context(), agent.URL+nodesettings.Path)
		if err != nil {
			if !strings.Contains(err.Error(), nodesettings.Path) {
				t.Fatalf("error %q does not name %s", err, nodesettings.Path)
			}
			s = explainSettings(nil)
		} else {
			once, err := json.Marshal(s)
			if err != nil {
				t.Fatalf("decoded settings do not encode: %v", err)
			}
			var back nodesettings.Settings
			if err := json.Unmarshal(once, &back); err != nil {
				t.Fatalf("settings %s do not read back: %v", once, err)
			}
			if twice, _ := json.Marshal(back); !bytes.Equal(once, twice) {
				t.Fatalf("settings change when read back:\n%s\n%s", once, twice)
			}
			if len(once) > 6*len(settings)+1024 {
				t.Fatalf("%d bytes of settings decoded to %d", len(settings), len(once))
			}
		}
		out := "text"
		if jsonOut {
			out = outJSON
		}
		var stdout, stderr bytes.Buffer
		fac := explain.Facts{Pod: pod, Agent: "dnsconfigurer-node/shim-x", Settings: s,
			Containers: []explain.File{{Name: "app", Data: resolv}, {Name: "sidecar", Err: errors.New(reason)}}}
		code := writeExplain(&stdout, &stderr, out, fac)
		for name, b := range map[string][]byte{"stdout": stdout.Bytes(), "stderr": stderr.Bytes()} {
			if err := terminalSafe(b); err != nil {
				t.Fatalf("%s is not terminal safe: %v\n%q", name, err, b)
			}
			if limit := 64<<10 + 12*(len(settings)+len(resolv)+len(reason)); len(b) > limit {
				t.Fatalf("%s: %d bytes, over %d", name, len(b), limit)
			}
		}
		switch {
		case code == exitFail:
			if stderr.Len() == 0 || stdout.Len() != 0 {
				t.Fatalf("exit 1 with stdout %q, stderr %q", stdout.Bytes(), stderr.Bytes())
			}
		case code != exitOK:
			t.Fatalf("exit %d", code)
		case jsonOut:
			var j explainJSON
			if err := json.Unmarshal(stdout.Bytes(), &j); err != nil {
				t.Fatalf("json output does not parse: %v\n%s", err, stdout.Bytes())
			}
			if len(j.Containers) != 2 || j.Containers[0].Status == "unreadable" || j.Containers[1].Status != "unreadable" {
				t.Fatalf("containers %+v", j.Containers)
			}
			if j.Containers[1].Reason != validUTF8(reason) {
				t.Fatalf("reason %q, want %q", j.Containers[1].Reason, reason)
			}
		default:
			if !strings.Contains(stdout.String(), "\n# app: ") || !strings.Contains(stdout.String(), "\n# sidecar: unreadable") {
				t.Fatalf("containers missing from the output:\n%s", stdout.Bytes())
			}
		}
	})
}
