package buildbin

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"testing"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/yaml"
)

// Rendered is `dnsconfigurer render -o json`.
type Rendered struct {
	Nameservers []string `json:"nameservers"`
	Searches    []string `json:"searches"`
	Options     []string `json:"options"`
	Hostname    string   `json:"hostname"`
	FQDN        string   `json:"fqdn"`
}

// DNSConfig is r as the CRI carries it.
func (r Rendered) DNSConfig() *runtimeapi.DNSConfig {
	return &runtimeapi.DNSConfig{Servers: r.Nameservers, Searches: r.Searches, Options: r.Options}
}

// Render runs `dnsconfigurer render` on pod with the node flags given: the
// command users run is the tests' oracle.
func Render(t testing.TB, pod *corev1.Pod, nodeFlags ...string) Rendered {
	t.Helper()
	p := pod.DeepCopy()
	p.APIVersion, p.Kind = "v1", "Pod"
	manifest, err := yaml.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(Dnsconfigurer(t), append([]string{"render", "-f", "-", "-o", "json"}, nodeFlags...)...)
	cmd.Stdin = bytes.NewReader(manifest)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("render %s: %v\n%s", pod.Name, err, stderr.String())
	}
	var r Rendered
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("render %s: %v: %s", pod.Name, err, out)
	}
	return r
}
