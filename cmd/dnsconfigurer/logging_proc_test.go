package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/miekg/dns"
)

// TestServeJSONLogProcess runs `dnsconfigurer serve --log-format json` in
// a process of its own through a start (with a forward route to a watched
// resolv.conf), a query, a broken resolv.conf its watcher warns about (a
// sub-component's line), a reload and a shutdown, and reads every line it logged as a log
// pipeline would: each is one JSON object with each key once (at every
// depth), the first says which build runs, and durations are Go duration
// strings.
func TestServeJSONLogProcess(t *testing.T) {
	runChild()
	objects, err := filepath.Abs("../../examples/objects")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "server.yaml")
	config := func(ttl int) {
		t.Helper()
		testkit.WriteAtomic(t, path, fmt.Sprintf("apiVersion: dnsconfigurer.io/v1alpha1\nkind: ServerConfiguration\nobjects: %s\nttl: %d\n"+
			"forward:\n- zone: .\n  upstreams: [%s]\n", objects, ttl, resolv))
	}
	config(5)
	c := startChild(t, "TestServeJSONLogProcess", "serve", "--listen", "127.0.0.1:0", "--log-format", "json",
		"--log-queries", "--lameduck", "100ms", "--config", path)
	m := jsonAddrRe.FindStringSubmatch(c.waitStderr(t, 30*time.Second, `"msg":"serving DNS"`))
	if m == nil {
		t.Fatalf("no address in the log:\n%s", c.stderr.String())
	}
	if err := os.WriteFile(resolv, []byte("nameserver\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.waitStderr(t, 30*time.Second, `"msg":"resolver file is broken; pods keep the last good config","component":"dnsserver.hostresolv"`)
	r, err := testkit.Exchange("udp", m[1], "web.prod.svc.cluster.local.", dns.TypeA)
	if err != nil || len(r.Answer) != 1 {
		t.Fatalf("query: %v %v", r, err)
	}
	config(9)
	c.waitStderr(t, 15*time.Second, `"msg":"config reloaded"`)
	c.terminate(t, 5*time.Second)

	lines := strings.Split(strings.TrimSuffix(c.stderr.String(), "\n"), "\n")
	var msgs []string
	for i, line := range lines {
		rec, err := decodeUnique(line)
		if err != nil {
			t.Errorf("line %d: %v\n%s", i+1, err, line)
			continue
		}
		msg, _ := rec["msg"].(string)
		msgs = append(msgs, msg)
		switch {
		case i == 0:
			for _, k := range []string{"version", "revision", "goVersion", "platform"} {
				if s, _ := rec[k].(string); s == "" {
					t.Errorf("the first line has no %s: %s", k, line)
				}
			}
			if msg != "starting" || rec["command"] != "serve" {
				t.Errorf("the first line is not serve's start-up line: %s", line)
			}
		case msg == "query":
			if s, ok := rec["duration"].(string); !ok || !isDuration(s) {
				t.Errorf("the query's duration is not a duration string: %s", line)
			}
		case strings.HasPrefix(msg, "lameduck"):
			if rec["for"] != "100ms" {
				t.Errorf("the lameduck is not \"100ms\": %s", line)
			}
		}
	}
	for _, want := range []string{"starting", "query", "config reloaded", "lameduck: still answering, /readyz failing"} {
		if !strings.Contains(strings.Join(msgs, "\n"), want) {
			t.Errorf("no %q line among %q", want, msgs)
		}
	}
}

// jsonAddrRe is addrRe for --log-format json.
var jsonAddrRe = regexp.MustCompile(`"msg":"serving DNS".*"listen":\["([0-9.:]+)"\]`)

func isDuration(s string) bool {
	_, err := time.ParseDuration(s)
	return err == nil
}

// decodeUnique decodes one JSON object, rejecting a key that occurs twice
// in one object at any depth (encoding/json keeps the last silently;
// Elasticsearch refuses the document), and text after it.
func decodeUnique(line string) (map[string]any, error) {
	dec := json.NewDecoder(strings.NewReader(line))
	dec.UseNumber()
	if err := uniqueValue(dec); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("text after the object")
	}
	var rec map[string]any
	if err := json.NewDecoder(bytes.NewReader([]byte(line))).Decode(&rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// uniqueValue reads one value from dec, checking the keys of its objects.
func uniqueValue(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return err
			}
			key := k.(string)
			if seen[key] {
				return fmt.Errorf("key %q twice", key)
			}
			seen[key] = true
			if err := uniqueValue(dec); err != nil {
				return err
			}
		}
		_, err = dec.Token() // '}'
		return err
	case json.Delim('['):
		for dec.More() {
			if err := uniqueValue(dec); err != nil {
				return err
			}
		}
		_, err = dec.Token() // ']'
		return err
	}
	return nil
}
