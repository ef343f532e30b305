package clusterdns

// fromCache appends to dst the reply to q from the reply cache, with q's
// id and RD and CD bits, and counts it in the namespace metrics; false
// when q is not cacheable or the cache has no reply for it.
func (q *query) fromCache(dst []byte) ([]byte, bool) {
	if !q.cacheable || q.z == nil {
		return dst, false
	}
	r, ok := q.h.wire.Get(q.key)
	if !ok {
		return dst, false
	}
	var b []byte
	if q.req != nil {
		b = r.AppendTo(dst, q.req.Id, q.req.RecursionDesired, q.req.CheckingDisabled)
	} else {
		b = r.AppendTo(dst, q.wire.ID, q.wire.RD, q.wire.CD)
	}
	if r.tally != 0 {
		// Counted before the reply leaves: a client that has its answer
		// sees it in the metrics.
		q.h.amp.Observe(r.tally)
	}
	return b, true
}
