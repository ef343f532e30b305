package dnsserver

import (
	"log/slog"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
)

// LogQueries returns h with one log line per answered query (serve
// --log-queries, CoreDNS's `log`): client, transport, id, name, type, rcode,
// reply size and duration, at info level. Logging every query costs far
// more than answering one from the cache; it is meant for debugging.
func LogQueries(h dns.Handler, log *slog.Logger) dns.Handler {
	return dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		start := time.Now()
		rw := &recordingWriter{ResponseWriter: w, rcode: -1}
		h.ServeDNS(rw, r)
		name, qtype := "", ""
		if len(r.Question) > 0 {
			name, qtype = r.Question[0].Name, dns.TypeToString[r.Question[0].Qtype]
		}
		proto := "tcp"
		if isUDP(w) {
			proto = "udp"
		}
		rcode := "none"
		if rw.rcode >= 0 {
			rcode = dns.RcodeToString[rw.rcode]
		}
		log.Info("query", "client", w.RemoteAddr().String(), "proto", proto, "id", r.Id, "name", name,
			"type", qtype, "rcode", rcode, "size", rw.size, "duration", time.Since(start))
	})
}

// recordingWriter remembers the rcode and size of the reply written.
type recordingWriter struct {
	dns.ResponseWriter
	rcode int
	size  int
}

func (w *recordingWriter) WriteMsg(m *dns.Msg) error {
	w.rcode, w.size = m.Rcode, m.Len()
	return w.ResponseWriter.WriteMsg(m)
}

func (w *recordingWriter) Write(b []byte) (int, error) {
	w.rcode = dnsmsg.Rcode(b)
	w.size = len(b)
	return w.ResponseWriter.Write(b)
}
