package dnsserver

import "sync/atomic"

// maxIdleWorkers bounds the goroutines a workers keeps waiting.
const maxIdleWorkers = 16

// workers run jobs of type J, each at once: on a goroutine that ran one
// and waits for the next, or on a new one when none waits. A kept
// goroutine's stack has grown to what ServeDNS needs: a new goroutine per
// query grows a small stack again each time. At most maxIdleWorkers wait.
// The UDP sockets and the TCP connections each have one.
type workers[J any] struct {
	serve func(J)
	work  chan J
	idle  atomic.Int32
}

func newWorkers[J any](serve func(J)) *workers[J] {
	return &workers[J]{serve: serve, work: make(chan J)}
}

// run serves j at once.
func (w *workers[J]) run(j J) {
	select {
	case w.work <- j:
	default:
		go w.loop(j)
	}
}

// loop serves j, then waits for more while fewer than maxIdleWorkers wait.
func (w *workers[J]) loop(j J) {
	for {
		w.serve(j)
		if w.idle.Add(1) > maxIdleWorkers {
			w.idle.Add(-1)
			return
		}
		var ok bool
		j, ok = <-w.work
		w.idle.Add(-1)
		if !ok {
			return
		}
	}
}

// close ends the waiting goroutines; call it once run is called no more.
func (w *workers[J]) close() { close(w.work) }
