package podfacts

import (
	"fmt"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// OverLimits are the warnings of ws that trimmed a limit (Limit set): what
// limits mode reject refuses.
func OverLimits(ws []policy.Warning) []policy.Warning {
	var over []policy.Warning
	for _, w := range ws {
		if w.Limit != "" {
			over = append(over, w)
		}
	}
	return over
}

// RejectMessage is the error text of a pod refused under limits mode
// reject. It names the pod, each limit in over (the warnings whose Limit
// is set) and the values over it. The shim fails RunPodSandbox with it,
// the NRI plugin the pod's containers.
func RejectMessage(namespace, name, uid string, over []policy.Warning) string {
	var b strings.Builder
	fmt.Fprintf(&b, "dnsconfigurer: pod %q (uid %s) exceeds the DNS limits (limits mode reject):", namespace+"/"+name, uid)
	for i, w := range over {
		if i > 0 {
			b.WriteString(";")
		}
		switch w.Limit {
		case policy.LimitNameservers:
			fmt.Fprintf(&b, " %d nameservers, at most %d allowed; over the limit: %s", w.Before, policy.MaxNameservers, strings.Join(w.Omitted, " "))
		case policy.LimitSearches:
			fmt.Fprintf(&b, " %d search paths, at most %d entries of at most %d characters and %d characters in all; over the limit: %s",
				w.Before, policy.MaxSearchPaths, policy.MaxSearchLength, policy.MaxSearchListChars, strings.Join(w.Omitted, " "))
		default:
			fmt.Fprintf(&b, " %s: %s", w.Limit, w.Message)
		}
	}
	return b.String()
}
