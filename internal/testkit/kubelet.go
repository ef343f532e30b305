package testkit

import (
	"slices"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// KubeletDNS is the DNS kubelet gives pod: the engine's, without the
// autopath annotation (kubelet does not know it), and with the options in
// an order of kubelet's own (it renders them from a map; reversed here).
func KubeletDNS(t testing.TB, eng *policy.Engine, host policy.Host, pod policy.Input) policy.Result {
	t.Helper()
	pod.PolicyAnnotation = ""
	res, err := eng.Compute(pod, host)
	if err != nil {
		t.Fatal(err)
	}
	res.Options = slices.Clone(res.Options)
	slices.Reverse(res.Options)
	return res
}
