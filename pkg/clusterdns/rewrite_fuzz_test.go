package clusterdns

import (
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

// FuzzRewriteReply (issue 55): a rewrite rule as the configuration allows
// it (validated), a question, and an upstream reply to the rewritten
// question (an A record and a CNAME whose names the fuzzer chooses too).
// Rewriting never panics and makes a valid name or an error; rewriting
// the reply's names back makes a reply that packs, or an error (the
// reply is SERVFAIL).
func FuzzRewriteReply(f *testing.F) {
	f.Add("regex", `^(.+)\.corp\.internal\.$`, "{1}.svc.cluster.local", `^(.+)\.svc\.cluster\.local\.$`, "{1}.corp.internal", "db.prod.corp.internal.", "db.prod.svc.cluster.local.", "x.prod.svc.cluster.local.")
	f.Add("exact", "db.example.com", "db.prod.svc.cluster.local", "", "", "DB.example.com.", "db.prod.svc.cluster.local.", "other.example.")
	f.Add("suffix", ".example.org", ".svc.cluster.local", "", "", "a.b.example.org.", "a.b.svc.cluster.local.", "a.b.svc.cluster.local.")
	f.Add("substring", "old", "new", "", "", "old.old.example.", "new.old.example.", "\\.new.")
	f.Add("prefix", "www.", "", "", "", "www.example.", "example.", "www.example.")
	f.Add("regex", `(.*)`, "{1}{1}{1}{1}", `(.*)`, "{1}{1}{1}{1}{1}", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.", "a.", "a.")
	f.Fuzz(func(t *testing.T, match, from, to, answerFrom, answerTo, qname, owner, target string) {
		cfg := &v1alpha1.ServerConfiguration{Mode: v1alpha1.ModeCluster, Listen: []string{"127.0.0.1:53"},
			Rewrites: []v1alpha1.Rewrite{{Match: match, From: from, To: to, AnswerFrom: answerFrom, AnswerTo: answerTo}}}
		cfg.SetDefaults()
		if cfg.Validate() != nil {
			return
		}
		rw, err := newRewriter(cfg.Rewrites)
		if err != nil {
			t.Fatalf("validated rules refused: %v", err)
		}
		if _, ok := dns.IsDomainName(qname); !ok {
			return
		}
		asked := []dns.Question{{Name: dns.Fqdn(qname), Qtype: dns.TypeA, Qclass: dns.ClassINET}}
		rev, err := rw.rewrite(lowerFQDN(asked[0].Name))
		if err != nil || rev == nil {
			return
		}
		name := rev.name()
		if _, ok := dns.IsDomainName(name); !ok {
			t.Fatalf("rewrite made %q of %q", name, qname)
		}
		reply := new(dns.Msg)
		reply.SetQuestion(dns.Fqdn(name), dns.TypeA)
		reply.Response = true
		if _, ok := dns.IsDomainName(owner); ok {
			reply.Answer = append(reply.Answer, &dns.A{Hdr: dns.RR_Header{Name: dns.Fqdn(owner), Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: []byte{192, 0, 2, 1}})
		}
		if _, ok := dns.IsDomainName(target); ok {
			reply.Answer = append(reply.Answer, &dns.CNAME{Hdr: dns.RR_Header{Name: dns.Fqdn(name), Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 5}, Target: dns.Fqdn(target)})
		}
		if _, err := reply.Pack(); err != nil {
			return // the upstream's reply itself does not pack
		}
		if err := rev.msg(reply); err != nil {
			if !strings.Contains(err.Error(), "invalid name after rewriting the answer back") {
				t.Fatalf("reversal: %v", err)
			}
			return // SERVFAIL
		}
		if _, err := reply.Pack(); err != nil {
			t.Fatalf("the reply rewritten back does not pack: %v\n%v", err, reply)
		}
	})
}
