package flaglayer_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/flaglayer"
)

// TestReadFileWrongFile: a Corefile or a DNS ConfigMap given as a config
// file is a WrongFileError that says which it is and how to convert it;
// a broken config file keeps its own error. The inputs are real ones
// (test/convert/corpus, SOURCE names each one's origin).
func TestReadFileWrongFile(t *testing.T) {
	const corpus = "../../test/convert/corpus/"
	const broken = "apiVersion: dnsconfigurer.io/v1alpha1\nkind: ServerConfiguration\nlisten: [\":53\"\n"
	tests := []struct {
		name, file, text, kind string
		// want is in the error of a WrongFileError; other, when a
		// WrongFileError is no answer, is in the error.
		want, other string
	}{
		{name: "Corefile", file: corpus + "06-terraform-forward-policy/Corefile", kind: v1alpha1.ServerKind,
			want: "this is a Corefile (a CoreDNS configuration), not a ServerConfiguration: run `dnsconfigurer convert " + corpus + "06-terraform-forward-policy/Corefile > config.yaml` first (docs/convert.md)"},
		{name: "Corefile with an import", file: corpus + "14-ocp3-egress-import-rewrite/Corefile", kind: v1alpha1.ServerKind, want: "this is a Corefile"},
		{name: "Corefile with a plugin CoreDNS lacks", file: corpus + "19-openshift-dnsnameresolver/Corefile", kind: v1alpha1.ServerKind, want: "this is a Corefile"},
		{name: "Corefile convert refuses", file: corpus + "23-refused-nested-dot-block/Corefile", kind: v1alpha1.ServerKind, want: "this is a Corefile"},
		{name: "coredns ConfigMap", file: corpus + "11-coredns-helm-default/configmap.yaml", kind: v1alpha1.ServerKind,
			want: "this is a coredns ConfigMap (its data.Corefile is a CoreDNS configuration), not a ServerConfiguration: run `dnsconfigurer convert " + corpus + "11-coredns-helm-default/configmap.yaml > config.yaml` first, or `dnsconfigurer convert --configmap dnsconfigurer-dns"},
		{name: "manifest", file: corpus + "05-k3s-manifest/manifest.yaml", kind: v1alpha1.ServerKind, want: "this is a coredns ConfigMap"},
		{name: "kubectl edit fragment", file: corpus + "12-rke2-harvester-fragment/fragment.yaml", kind: v1alpha1.ServerKind, want: "this is a coredns ConfigMap"},
		{name: "kube-dns ConfigMap", file: corpus + "31-cockroach-gke-kubedns/kubedns.yaml", kind: v1alpha1.ServerKind, want: "this is a kube-dns ConfigMap"},
		{name: "NodeLocal DNSCache ConfigMap", file: corpus + "03-kubespray-nodelocaldns/configmap.yaml", kind: v1alpha1.ServerKind, want: "this is a NodeLocal DNSCache ConfigMap"},
		{name: "Corefile for the shim", file: corpus + "06-terraform-forward-policy/Corefile", kind: v1alpha1.ShimKind, want: "this is a Corefile (a CoreDNS configuration), not a ShimConfiguration"},
		{name: "broken YAML", text: broken, kind: v1alpha1.ServerKind, other: "error converting YAML to JSON"},
		{name: "unknown field", text: "apiVersion: dnsconfigurer.io/v1alpha1\nkind: ServerConfiguration\nlistn: [\":53\"]\n", kind: v1alpha1.ServerKind, other: `unknown field "listn"`},
		{name: "JSON for a list", text: "[1, 2]", kind: v1alpha1.ServerKind, other: "cannot unmarshal array"},
		{name: "a word", text: "garbage", kind: v1alpha1.ServerKind, other: "cannot unmarshal string"},
		{name: "coredns-custom ConfigMap alone", file: corpus + "21-aks-custom-log-override/custom.yaml", kind: v1alpha1.ServerKind, other: `unknown field "data"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.file
			if tt.text != "" {
				path = filepath.Join(t.TempDir(), "config.yaml")
				if err := os.WriteFile(path, []byte(tt.text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var cfg flaglayer.File = &v1alpha1.ServerConfiguration{}
			if tt.kind == v1alpha1.ShimKind {
				cfg = &v1alpha1.ShimConfiguration{}
			}
			err := flaglayer.ReadFile(path, tt.kind, cfg)
			var wrong flaglayer.WrongFileError
			switch {
			case tt.want != "" && (!errors.As(err, &wrong) || !strings.Contains(err.Error(), "--config "+path+": "+tt.want) && !strings.Contains(err.Error(), tt.want)):
				t.Errorf("ReadFile: %v, want a WrongFileError with %q", err, tt.want)
			case tt.other != "" && (err == nil || errors.As(err, &wrong) || !strings.Contains(err.Error(), tt.other)):
				t.Errorf("ReadFile: %v, want an error with %q that is no WrongFileError", err, tt.other)
			}
		})
	}
}

// TestReadFileServerConfigurations: no ServerConfiguration of the
// repository is taken for another program's file.
func TestReadFileServerConfigurations(t *testing.T) {
	files, _ := filepath.Glob("../../charts/dnsconfigurer/files/dns*.yaml")
	files = append(files, "../../api/v1alpha1/testdata/server-full.yaml", "../../deploy/overlays/replace-coredns/dns/config.yaml")
	more, _ := filepath.Glob("../../pkg/corefile/testdata/*/config.golden.yaml")
	for _, f := range append(files, more...) {
		if err := flaglayer.ReadFile(f, v1alpha1.ServerKind, &v1alpha1.ServerConfiguration{}); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if len(files)+len(more) < 10 {
		t.Errorf("%d files, want at least 10", len(files)+len(more))
	}
}
