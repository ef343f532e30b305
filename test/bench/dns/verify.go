package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// verifySample is how many of a case's queries verify asks each target.
const verifySample = 200

// verify asks addr and the ceiling (at ceiling) n of the queries, evenly
// spread, and returns how many it asked and how the answers that differ
// from the ceiling's differ. The ceiling's map is the reference: it holds
// the answers Kubernetes' DNS specification gives for the objects.
func verify(addr, ceiling string, qs []query, n int) (int, []string, error) {
	ask := func(m *dns.Msg, to string) (*dns.Msg, error) {
		var err error
		for range 3 {
			var r *dns.Msg
			if r, err = exchange(to, m, time.Second); err == nil {
				return r, nil
			}
		}
		return nil, err
	}
	n = min(n, len(qs))
	var diffs []string
	for i := range n {
		q := qs[i*len(qs)/n]
		m := new(dns.Msg)
		if err := m.Unpack(q.wire); err != nil {
			return 0, nil, err
		}
		want, err := ask(m, ceiling)
		if err != nil {
			return 0, nil, fmt.Errorf("ceiling: %w", err)
		}
		got, err := ask(m, addr)
		if err != nil {
			diffs = append(diffs, fmt.Sprintf("%s %s: %v", m.Question[0].Name, dns.TypeToString[m.Question[0].Qtype], err))
			continue
		}
		if d := compareAnswers(want, got); d != "" {
			diffs = append(diffs, fmt.Sprintf("%s %s: %s", m.Question[0].Name, dns.TypeToString[m.Question[0].Qtype], d))
		}
	}
	return n, diffs, nil
}

// compareAnswers returns how got differs from want in rcode, truncation and
// answer records (TTLs aside, in any order: loadbalance rotates them), or
// "" when it does not.
func compareAnswers(want, got *dns.Msg) string {
	if want.Rcode != got.Rcode {
		return fmt.Sprintf("rcode %s, want %s", dns.RcodeToString[got.Rcode], dns.RcodeToString[want.Rcode])
	}
	if want.Truncated != got.Truncated {
		return fmt.Sprintf("truncated %v, want %v", got.Truncated, want.Truncated)
	}
	w, g := answerSet(want), answerSet(got)
	if !slices.Equal(w, g) {
		return fmt.Sprintf("answer [%s], want [%s]", strings.Join(g, "; "), strings.Join(w, "; "))
	}
	return ""
}

// answerSet is the answer section as sorted lowercase strings, TTLs zero.
func answerSet(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		rr = dns.Copy(rr)
		rr.Header().Ttl = 0
		out = append(out, strings.ToLower(rr.String()))
	}
	slices.Sort(out)
	return out
}
