package webhook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

const (
	// bodyQuantum is the progress a body must make within the body
	// progress timeout: 64 KiB, or the rest of a shorter body.
	bodyQuantum = 64 << 10
	// minBodyBuffer is the first buffer of a body, taken before its first
	// byte arrives.
	minBodyBuffer = 512
)

// Errors of bodyReader.read, which the handler answers with a status each.
var (
	errBudgetWait = errors.New("too many request bytes in flight")
	errBodySlow   = errors.New("the request body is too slow")
	errBodyLarge  = errors.New("the request body is over the limit")
)

// deadliner sets a request's read deadline: an http.ResponseController.
type deadliner interface{ SetReadDeadline(time.Time) error }

// bodyRules are the limits a body is read under.
type bodyRules struct {
	limit    int64         // the body cap
	queue    time.Duration // the total wait for budget before errBudgetWait
	progress time.Duration // the time each bodyQuantum has to arrive
	read     time.Duration // the time the whole body has, from the start
}

// bodyReader reads a request body into one buffer. The buffer's capacity is
// taken from the budget as it grows, by doubling once it is full: a body
// holds at most twice the bytes it has sent (at least minBodyBuffer), never
// more than its declared length or the cap. A slow sender is cut off: each
// bodyQuantum bytes must arrive within rules.progress, and the whole body
// within rules.read.
type bodyReader struct {
	r      io.Reader
	budget *byteBudget
	rules  bodyRules
	dl     deadliner
	now    func() time.Time

	buf      []byte
	held     int64 // bytes taken from the budget; the caller releases them
	target   int64 // the largest capacity the buffer may need
	waited   time.Duration
	hard     time.Time // the whole body's deadline
	quantum  time.Time // the current quantum's start
	quantumN int64     // bytes of the current quantum so far
}

func newBodyReader(r io.Reader, declared int64, budget *byteBudget, rules bodyRules, dl deadliner) *bodyReader {
	target := rules.limit
	if declared >= 0 && declared < target {
		target = declared
	}
	return &bodyReader{r: r, budget: budget, rules: rules, dl: dl, now: time.Now, target: target}
}

// read reads the whole body into b.buf. Whatever it returns, b.held bytes
// are to be released to the budget once the body is no longer used.
func (b *bodyReader) read(ctx context.Context) error {
	start := b.now()
	b.hard, b.quantum = start.Add(b.rules.read), start
	b.setDeadline()
	defer b.dl.SetReadDeadline(b.hard) // decoding is not the sender's time
	for {
		if len(b.buf) == cap(b.buf) {
			if int64(cap(b.buf)) >= b.target {
				done, err := b.probe()
				if done || err != nil {
					return err
				}
				continue
			}
			if err := b.grow(ctx); err != nil {
				return err
			}
		}
		n, err := b.r.Read(b.buf[len(b.buf):cap(b.buf)])
		b.advance(n)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return b.readError(err)
		}
	}
}

// probe reads past a full buffer of the target size: the body must end
// there.
func (b *bodyReader) probe() (done bool, err error) {
	var one [1]byte
	n, err := b.r.Read(one[:])
	switch {
	case n > 0 && b.target == b.rules.limit:
		return true, fmt.Errorf("%w of %d bytes", errBodyLarge, b.rules.limit)
	case n > 0:
		return true, fmt.Errorf("the request body is longer than its Content-Length of %d bytes", b.target)
	case err == io.EOF:
		return true, nil
	case err != nil:
		return true, b.readError(err)
	}
	return false, nil
}

// grow doubles the buffer, up to the target, with bytes from the budget.
func (b *bodyReader) grow(ctx context.Context) error {
	size := min(b.target, max(2*int64(cap(b.buf)), minBodyBuffer))
	n := size - int64(cap(b.buf))
	if !b.budget.tryAcquire(n) {
		if err := b.wait(ctx, n); err != nil {
			return err
		}
	}
	b.held += n
	buf := make([]byte, len(b.buf), size)
	copy(buf, b.buf)
	b.buf = buf
	return nil
}

// wait waits in line for n bytes of budget, for what is left of the
// queue time. The wait is not the sender's fault: its deadlines move by
// as much.
func (b *bodyReader) wait(ctx context.Context, n int64) error {
	left := b.rules.queue - b.waited
	if left <= 0 {
		return errBudgetWait
	}
	b.dl.SetReadDeadline(b.hard)
	start := b.now()
	wctx, cancel := context.WithTimeout(ctx, left)
	err := b.budget.acquire(wctx, n, b.held)
	cancel()
	d := b.now().Sub(start)
	b.waited += d
	b.quantum = b.quantum.Add(d)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("the client went away: %w", ctx.Err())
		}
		return errBudgetWait
	}
	b.setDeadline()
	return nil
}

// advance counts n bytes read; a full quantum starts the next.
func (b *bodyReader) advance(n int) {
	b.buf = b.buf[:len(b.buf)+n]
	b.quantumN += int64(n)
	if b.quantumN >= bodyQuantum {
		b.quantum, b.quantumN = b.now(), 0
		b.setDeadline()
	}
}

func (b *bodyReader) setDeadline() {
	// Without deadline support the server's ReadTimeout still applies.
	d := b.quantum.Add(b.rules.progress)
	if d.After(b.hard) {
		d = b.hard
	}
	_ = b.dl.SetReadDeadline(d)
}

func (b *bodyReader) readError(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w: %d bytes arrived in %v; each %d KiB must arrive within %v and the whole body within %v",
			errBodySlow, len(b.buf), b.now().Sub(b.hard.Add(-b.rules.read)).Round(time.Millisecond),
			bodyQuantum>>10, b.rules.progress, b.rules.read)
	}
	return err
}
