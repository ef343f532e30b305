package forward

import (
	"errors"

	"github.com/miekg/dns"
)

var (
	// ErrNoUpstream is returned when no usable upstream is configured: the
	// list is empty, or every upstream is one of the server's own addresses
	// or was found to loop back (a Router: no route for the name).
	ErrNoUpstream = errors.New("forward: no upstream server")

	// ErrOverloaded is returned at once, without asking anyone, when
	// MaxConcurrent queries are already waiting for an upstream.
	ErrOverloaded = errors.New("forward: too many forwarded queries in flight")

	// ErrAllDown is returned at once, without asking anyone, when every
	// usable upstream is down by its health probes and
	// Config.FailFastAllUnhealthy is set.
	ErrAllDown = errors.New("forward: every upstream is down by its health probes")

	// ErrLoop is returned for a query that carries this Forwarder's own loop
	// marker (it went round a forwarding loop and came back), the markers of
	// more than MaxHops forwarders, or this Forwarder's own loop probe.
	ErrLoop = errors.New("forward: forwarding loop")
)

// shedError is ErrOverloaded with the rcode the Forwarder answers it with.
type shedError struct{ rcode int }

func (e *shedError) Error() string        { return ErrOverloaded.Error() }
func (e *shedError) Is(target error) bool { return target == ErrOverloaded }

// Rcode is the rcode a handler answers a client with when Exchange (of a
// Forwarder or a Router) failed with err: Config.ShedRcode for a shed query
// (ErrOverloaded), SERVFAIL for anything else.
func Rcode(err error) int {
	var s *shedError
	if errors.As(err, &s) {
		return s.rcode
	}
	return dns.RcodeServerFailure
}
