package podfacts

import (
	"slices"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

func TestOverLimitsAndRejectMessage(t *testing.T) {
	ns := policy.Warning{Reason: policy.ReasonDNSConfigForming, Limit: policy.LimitNameservers, Before: 4, Omitted: []string{"10.0.0.3"}}
	search := policy.Warning{Reason: policy.ReasonDNSConfigForming, Limit: policy.LimitSearches, Before: 34, Omitted: []string{"a.example", "b.example"}}
	other := policy.Warning{Reason: policy.ReasonDNSConfigForming, Limit: "future", Message: "something else"}
	info := policy.Warning{Reason: policy.ReasonHostnameTruncated, Message: "hostname truncated"}
	const head = `dnsconfigurer: pod "team/big" (uid u-big) exceeds the DNS limits (limits mode reject):`
	tests := []struct {
		name     string
		warnings []policy.Warning
		over     []policy.Warning
		message  string
	}{
		{"none", []policy.Warning{info}, nil, head},
		{"nameservers", []policy.Warning{info, ns}, []policy.Warning{ns},
			head + " 4 nameservers, at most 3 allowed; over the limit: 10.0.0.3"},
		{"both", []policy.Warning{ns, info, search}, []policy.Warning{ns, search},
			head + " 4 nameservers, at most 3 allowed; over the limit: 10.0.0.3;" +
				" 34 search paths, at most 32 entries of at most 253 characters and 2048 characters in all; over the limit: a.example b.example"},
		{"a limit this build does not know", []policy.Warning{other}, []policy.Warning{other},
			head + " future: something else"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			over := OverLimits(tt.warnings)
			if !slices.EqualFunc(over, tt.over, func(a, b policy.Warning) bool { return a.Limit == b.Limit && a.Before == b.Before }) {
				t.Errorf("OverLimits = %+v, want %+v", over, tt.over)
			}
			if got := RejectMessage("team", "big", "u-big", over); got != tt.message {
				t.Errorf("RejectMessage =\n%s\nwant\n%s", got, tt.message)
			}
		})
	}
}
