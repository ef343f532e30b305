package apidefaults

import (
	"fmt"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/autopath"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/cri"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnscache"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/hosts"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodenet"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nriplugin"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/topology"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/webhook"
)

// TestFallbacksAreTheAPIDefaults: each component's fallback (or copy of a
// rule's bound) equals the api/v1alpha1 default of its setting.
func TestFallbacksAreTheAPIDefaults(t *testing.T) {
	tests := []struct {
		component string
		got, api  any
	}{
		// The pure core keeps copies: it may not import the api.
		{"policy.ClusterFirst", string(policy.ClusterFirst), v1alpha1.DNSPolicyClusterFirst},
		{"policy.ClusterFirstWithAutopath", string(policy.ClusterFirstWithAutopath), v1alpha1.DNSPolicyClusterFirstWithAutopath},
		{"policy.AnnotationDNSPolicy", policy.AnnotationDNSPolicy, v1alpha1.LabelDNSPolicy},
		{"autopath.DefaultOptionCode", autopath.DefaultOptionCode, v1alpha1.DefaultOptionCode},
		{"autopath.MinOptionCode", autopath.MinOptionCode, v1alpha1.MinLocalOptionCode},
		{"autopath.MaxOptionCode", autopath.MaxOptionCode, v1alpha1.MaxLocalOptionCode},
		{"topology.DefaultOptionCode", topology.DefaultOptionCode, v1alpha1.DefaultTopologyOptionCode},
		{"store.MaxTTL", store.MaxTTL, v1alpha1.MaxRecordTTL},

		// Constants serve's flags add up (it may not call Bytes in a
		// constant).
		{"dnscache.DefaultSuccessBytes", int64(dnscache.DefaultSuccessBytes), v1alpha1.DefaultSuccessBytes.Bytes()},
		{"dnscache.DefaultDenialBytes", int64(dnscache.DefaultDenialBytes), v1alpha1.DefaultDenialBytes.Bytes()},
		{"clusterdns.DefaultReplyCacheBytes", int64(clusterdns.DefaultReplyCacheBytes), v1alpha1.DefaultZoneBytes.Bytes()},

		// The rest read the api; listed so that none goes back to a literal.
		{"dnscache.DefaultMaxTTL", dnscache.DefaultMaxTTL, v1alpha1.DefaultMaxTTL.Duration()},
		{"dnscache.DefaultMaxNegativeTTL", dnscache.DefaultMaxNegativeTTL, v1alpha1.DefaultMaxNegativeTTL.Duration()},
		{"dnscache.DefaultStaleTTL", dnscache.DefaultStaleTTL, v1alpha1.DefaultStaleTTL.Duration()},
		{"dnscache.DefaultPrefetchWindow", dnscache.DefaultPrefetchWindow, v1alpha1.DefaultPrefetchWindow.Duration()},
		{"dnscache.DefaultPrefetchPercentage", dnscache.DefaultPrefetchPercentage, v1alpha1.DefaultPrefetchPercentage},
		{"forward.DefaultTimeout", forward.DefaultTimeout, v1alpha1.DefaultTimeout.Duration()},
		{"forward.DefaultHealthCheck", forward.DefaultHealthCheck, v1alpha1.DefaultHealthCheck.Duration()},
		{"forward.DefaultExpire", forward.DefaultExpire, v1alpha1.DefaultExpire.Duration()},
		{"forward.DefaultMaxFails", forward.DefaultMaxFails, v1alpha1.DefaultMaxFails},
		{"forward.DefaultMaxConcurrent", forward.DefaultMaxConcurrent, v1alpha1.DefaultMaxConcurrent},
		{"dnsserver.DefaultMaxUDPInFlight", dnsserver.DefaultMaxUDPInFlight, v1alpha1.DefaultUDPInFlight},
		{"dnsserver.DefaultMaxTCPConns", dnsserver.DefaultMaxTCPConns, v1alpha1.DefaultTCPConnections},
		{"dnsserver.DefaultMaxTCPConnsPerClient", dnsserver.DefaultMaxTCPConnsPerClient, v1alpha1.DefaultTCPConnectionsPerClient},
		{"dnsserver.DefaultUDPSockets", dnsserver.DefaultUDPSockets, v1alpha1.DefaultUDPSockets},
		{"dnsserver.DefaultTCPIdleTimeout", dnsserver.DefaultTCPIdleTimeout, v1alpha1.DefaultTCPIdleTimeout.Duration()},
		{"dnsserver.DefaultTCPWriteTimeout", dnsserver.DefaultTCPWriteTimeout, v1alpha1.DefaultTCPWriteTimeout.Duration()},
		{"hosts.DefaultTTL", hosts.DefaultTTL, v1alpha1.DefaultHostsTTL.Duration()},
		{"hosts.DefaultInterval", hosts.DefaultInterval, v1alpha1.DefaultHostsReload.Duration()},
		{"nodenet.DefaultInterface", nodenet.DefaultInterface, v1alpha1.DefaultNodeLocalInterface},
		{"hostresolv.DefaultPath", hostresolv.DefaultPath, v1alpha1.DefaultResolvConf},
		{"webhook.DefaultMaxRequestBytes", webhook.DefaultMaxRequestBytes, v1alpha1.DefaultMaxRequestBytes},
		{"webhook.DefaultReadTimeout", webhook.DefaultReadTimeout, v1alpha1.DefaultReadTimeout},
		{"webhook.DefaultWriteTimeout", webhook.DefaultWriteTimeout, v1alpha1.DefaultWriteTimeout},
		{"webhook.DefaultBodyProgressTimeout", webhook.DefaultBodyProgressTimeout, v1alpha1.DefaultBodyProgressTimeout},
		{"cri.DefaultMaxConns", cri.DefaultMaxConns, v1alpha1.DefaultShimMaxConnections},
		{"cri.LimitsTrim", string(cri.LimitsTrim), v1alpha1.LimitsTrim},
		{"cri.LimitsReject", string(cri.LimitsReject), v1alpha1.LimitsReject},
		{"cri.FailOpen", string(cri.FailOpen), v1alpha1.FailurePolicyOpen},
		{"cri.FailClosed", string(cri.FailClosed), v1alpha1.FailurePolicyClose},
		{"nriplugin.DefaultSocket", nriplugin.DefaultSocket, v1alpha1.DefaultNRISocket},
		{"nriplugin.DefaultName", nriplugin.DefaultName, v1alpha1.DefaultNRIPluginName},
		{"nriplugin.DefaultIndex", nriplugin.DefaultIndex, v1alpha1.DefaultNRIPluginIndex},
		{"nriplugin.LimitsTrim", string(nriplugin.LimitsTrim), v1alpha1.LimitsTrim},
		{"nriplugin.LimitsReject", string(nriplugin.LimitsReject), v1alpha1.LimitsReject},
		{"hostresolv.LastGood", hostresolv.LastGood.String(), v1alpha1.ResolvConfModeLastGood},
		{"hostresolv.Strict", hostresolv.Strict.String(), v1alpha1.ResolvConfModeStrict},
	}
	for _, tt := range tests {
		if fmt.Sprint(tt.got) != fmt.Sprint(tt.api) {
			t.Errorf("%s = %v, but the api default is %v", tt.component, tt.got, tt.api)
		}
	}
}

// TestModesParse: the values the api accepts are the ones the components
// parse, and their zero value is the api default.
func TestModesParse(t *testing.T) {
	for _, s := range []string{v1alpha1.ResolvConfModeLastGood, v1alpha1.ResolvConfModeStrict} {
		m, err := hostresolv.ParseMode(s)
		if err != nil || m.String() != s {
			t.Errorf("hostresolv.ParseMode(%q) = %v, %v", s, m, err)
		}
	}
	if m, _ := hostresolv.ParseMode(""); m.String() != v1alpha1.DefaultResolvConfMode {
		t.Errorf("hostresolv.ParseMode(\"\") = %v, want the api default %q", m, v1alpha1.DefaultResolvConfMode)
	}
	for _, p := range []string{v1alpha1.DNSPolicyClusterFirst, v1alpha1.DNSPolicyClusterFirstWithAutopath} {
		if _, err := policy.New(policy.Node{DefaultPolicy: policy.Policy(p)}); err != nil {
			t.Errorf("policy.New refuses defaultDNSPolicy %q the api accepts: %v", p, err)
		}
	}
	for _, n := range []int{0, v1alpha1.MaxNdots} {
		if _, err := policy.New(policy.Node{Ndots: &n}); err != nil {
			t.Errorf("policy.New refuses ndots %d the api accepts: %v", n, err)
		}
	}
	over := v1alpha1.MaxNdots + 1
	if _, err := policy.New(policy.Node{Ndots: &over}); err == nil || err.Error() != "ndots: "+v1alpha1.ValidateNdots(over).Error() {
		t.Errorf("policy.New(ndots %d) = %v, want the api's refusal", over, err)
	}
}
