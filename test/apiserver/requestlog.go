package apiserver

import (
	"fmt"
	"net/http"
	"slices"
	"sync"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// Request is one API request a client made: method, path and query, and
// the response status or the transport error.
type Request struct {
	Method, Path, Query string
	Status              int
	Err                 error
}

func (r Request) String() string {
	q := ""
	if r.Query != "" {
		q = "?" + r.Query
	}
	if r.Err != nil {
		return fmt.Sprintf("%s %s%s: %v", r.Method, r.Path, q, r.Err)
	}
	return fmt.Sprintf("%s %s%s %d", r.Method, r.Path, q, r.Status)
}

// RequestLog records the API requests of a client: cfg.Wrap(log.Wrap).
type RequestLog struct {
	mu   sync.Mutex
	list []Request
}

// Wrap is a rest.Config wrapper recording each request in l. Its transport
// is a utilnet.RoundTripperWrapper, so CloseIdleConnectionsFor reaches
// through.
func (l *RequestLog) Wrap(rt http.RoundTripper) http.RoundTripper {
	return &loggingTransport{rt: rt, log: l}
}

// All returns the requests so far.
func (l *RequestLog) All() []Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.list)
}

// Count returns how many recorded requests match.
func (l *RequestLog) Count(match func(Request) bool) int {
	n := 0
	for _, r := range l.All() {
		if match(r) {
			n++
		}
	}
	return n
}

// Summary lists the distinct requests, for failure messages.
func (l *RequestLog) Summary() []string {
	var out []string
	for _, r := range l.All() {
		if s := r.String(); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

type loggingTransport struct {
	rt  http.RoundTripper
	log *RequestLog
}

var _ utilnet.RoundTripperWrapper = (*loggingTransport)(nil)

func (t *loggingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(r)
	rq := Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Err: err}
	if resp != nil {
		rq.Status = resp.StatusCode
	}
	t.log.mu.Lock()
	t.log.list = append(t.log.list, rq)
	t.log.mu.Unlock()
	return resp, err
}

func (t *loggingTransport) WrappedRoundTripper() http.RoundTripper { return t.rt }
