package clusterdns

import (
	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns/wirerotate"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
)

// WithUDPAnswerLimit cuts, in every UDP reply this server makes (the
// zone's and autopath's, not a forwarded one), an A or AAAA RRset of more
// than n records to n: dnsmsg.LimitAnswer, TC clear. Over TCP the reply
// holds them all. 0 (default) is off.
func WithUDPAnswerLimit(n int) Option { return func(h *Handler) { h.udpLimit = n } }

// udpCut is how a UDP reply was cut to the answer limit: its answer
// before the cut and the counter its window was taken at.
type udpCut struct {
	full []dns.RR
	c    uint32
}

// limitUDP cuts m's answer to the UDP answer limit (a TCP reply is left
// whole), and says how; nil when nothing was cut.
func (h *Handler) limitUDP(m *dns.Msg, tcp bool) *udpCut {
	if tcp || h.udpLimit <= 0 || len(m.Answer) <= h.udpLimit {
		return nil
	}
	c := h.cutN.Add(1)
	cut := dnsmsg.LimitAnswer(m.Answer, h.udpLimit, c)
	if len(cut) == len(m.Answer) {
		return nil
	}
	full := m.Answer
	m.Answer = cut
	return &udpCut{full: full, c: c}
}

// windowReply is what the reply cache keeps of m, a finished UDP reply
// whose answer was cut: m packed with its whole answer and the window
// that hands it out, the next records on each hit; nil when it cannot be
// served that way (m truncated, or PlanWindow's reasons). Loadbalance
// adds nothing: the window moves on every hit.
func (h *Handler) windowReply(m *dns.Msg, cut *udpCut, size int) ([]byte, *wirerotate.Window) {
	if m.Truncated {
		return nil, nil
	}
	whole := *m
	whole.Answer = cut.full
	b, err := whole.Pack()
	if err != nil {
		return nil, nil
	}
	// The cached form has RD and CD clear; they are set per request.
	b[2] &^= 0x01
	b[3] &^= 0x10
	w := wirerotate.PlanWindow(b, h.udpLimit, size, cut.c)
	if w == nil {
		return nil, nil
	}
	return b, w
}
