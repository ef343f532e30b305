package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNRIFlags(t *testing.T) {
	def, _, err := nriCommand.parse(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if def.Socket != "/var/run/nri/nri.sock" || def.PluginName != "dnsconfigurer" || def.PluginIndex != "10" ||
		def.StateDir != "/run/dnsconfigurer/nri" || def.Limits != "trim" || *def.ResolvConf != "/etc/resolv.conf" {
		t.Errorf("defaults = %+v", def)
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "nri.yaml")
	if err := os.WriteFile(file, []byte("apiVersion: dnsconfigurer.io/v1alpha1\nkind: NRIConfiguration\n"+
		"clusterDNS: [10.96.0.10]\nclusterDomain: corp.local\nlimits: reject\nsocket: /run/nri/a.sock\nstateDir: /run/a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := nriCommand.parse([]string{"--config", file, "--limits", "trim", "--plugin-index", "20", "--resolv-conf", "auto",
		"--pod-lookup-timeout", "1500ms"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Limits != "trim" || cfg.PluginIndex != "20" || cfg.Domain() != "corp.local" || cfg.Socket != "/run/nri/a.sock" ||
		cfg.StateDir != "/run/a" || len(cfg.ClusterDNS) != 1 || *cfg.ResolvConf != "auto" || cfg.PodLookupTimeout != "1500ms" {
		t.Errorf("config with flags = %+v", cfg)
	}

	wantRefused(t, "nriCommand", func(args []string) error { _, _, err := nriCommand.parse(args, io.Discard); return err }, []refusedArgs{
		{[]string{"--plugin-index", "1"}, `--plugin-index (pluginIndex): "1" must be two digits`},
		{[]string{"--plugin-name", "a/b"}, "--plugin-name (pluginName)"},
		{[]string{"--state-dir", "rel"}, "--state-dir (stateDir)"},
		{[]string{"--socket", "nri.sock"}, "--socket (socket)"},
		{[]string{"--limits", "cut"}, "--limits (limits)"},
		{[]string{"--pod-lookup-timeout", "20s"}, "--pod-lookup-timeout (podLookupTimeout)"},
		{[]string{"--cluster-dns", "x"}, "--cluster-dns (clusterDNS[0])"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	})
}

// refusedArgs are arguments a command refuses, with a part of the error.
type refusedArgs struct {
	args []string
	want string
}

// wantRefused fails t for each of refused that parse (a command's, named
// name) accepts, or refuses with an error lacking its part.
func wantRefused(t *testing.T, name string, parse func(args []string) error, refused []refusedArgs) {
	t.Helper()
	for _, r := range refused {
		if err := parse(r.args); err == nil || !strings.Contains(err.Error(), r.want) {
			t.Errorf("%s.parse(%q) = %v, want an error containing %q", name, r.args, err, r.want)
		}
	}
}
