package clusterdns

import (
	"sync"

	"github.com/miekg/dns"
)

// ServeDNS implements dns.Handler: the stages of query.go, in turn.
// Replies answered from the zone are cached in packed form per snapshot
// (see replyCache), so a repeated question costs a map lookup, a copy and
// a write.
func (h *Handler) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	var q query
	h.admit(&q, w.RemoteAddr(), req)
	b, hit := q.fromCache((*bp)[:0])
	if !hit {
		if b = q.answer((*bp)[:cap(*bp)]); b == nil {
			return
		}
		q.account(b)
	}
	*bp = b
	h.write(w, b)
}

func (h *Handler) write(w dns.ResponseWriter, b []byte) {
	if _, err := w.Write(b); err != nil {
		h.log.Debug("write reply", "remote", w.RemoteAddr().String(), "err", err)
	}
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}
