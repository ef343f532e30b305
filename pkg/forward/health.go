package forward

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// probeSuffix ends the names of loop probes: <nonce>.<index>.<probeSuffix>.
const probeSuffix = "loop-probe.dnsconfigurer."

// maxProbes bounds the probes sent at once.
const maxProbes = 8

// maxLoopRecheck is the longest wait between two loop probes of an upstream
// that has not answered one yet (the wait doubles from Config.HealthCheck).
const maxLoopRecheck = 30 * time.Second

// probeRound is one loop probe of an upstream list: the upstream at index
// i was asked <nonce>.<i>.loop-probe.dnsconfigurer.
type probeRound struct {
	nonce string
	ups   []*upstream
}

// Start runs the background work (Run) until ctx ends or Close is called.
// It is a no-op after the first call.
func (f *Forwarder) Start(ctx context.Context) {
	f.bgMu.Lock()
	defer f.bgMu.Unlock()
	if f.bgDone != nil || f.closed {
		return
	}
	ctx, f.bgStop = context.WithCancel(ctx)
	f.bgDone = make(chan struct{})
	go func() {
		defer close(f.bgDone)
		_ = f.run(ctx)
	}()
}

// Run does the background work until ctx ends, then returns nil: it probes
// each upstream for loops now and whenever the list changes (again, after
// Config.HealthCheck doubling up to 30s, until the probe gets a reply: a
// peer not up yet is probed once it is), probes the down upstreams every
// Config.HealthCheck and closes the connections idle for Config.Expire. Use
// Start or Run, once.
func (f *Forwarder) Run(ctx context.Context) error {
	f.bgMu.Lock()
	if f.bgDone != nil || f.closed {
		f.bgMu.Unlock()
		return errors.New("forward: Run after Start, Run or Close")
	}
	ctx, f.bgStop = context.WithCancel(ctx)
	done := make(chan struct{})
	f.bgDone = done
	f.bgMu.Unlock()
	defer close(done)
	return f.run(ctx)
}

func (f *Forwarder) run(ctx context.Context) error {
	f.started.Store(true)
	defer f.started.Store(false)
	wake := time.NewTimer(f.cfg.HealthCheck)
	defer wake.Stop()
	var probed []string // the raw list last probed for loops
	for {
		l := f.list()
		if !slices.Equal(probed, l.raw) || f.probe.Load() == nil {
			probed = l.raw
			f.loopProbe(ctx, l.ups)
		} else if due := f.loopProbeDue(l.ups); len(due) > 0 {
			f.loopProbe(ctx, due)
		}
		f.healthProbe(ctx, l.ups)
		for _, u := range l.ups {
			u.udp.expire(f.cfg.Expire)
			u.tcp.expire(f.cfg.Expire)
		}
		wake.Reset(f.nextWake(l.ups))
		select {
		case <-ctx.Done():
			return nil
		case <-wake.C:
		case <-f.kick:
		}
	}
}

// Close stops the background work, waits for it, and closes the pooled
// connections; connections in use are closed when their query ends.
// Exchange keeps working, without pooling.
func (f *Forwarder) Close() error {
	f.bgMu.Lock()
	f.closed = true
	stop, done := f.bgStop, f.bgDone
	f.bgMu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
	for _, u := range f.cur.Load().ups {
		u.udp.close()
		u.tcp.close()
	}
	return nil
}

// each runs fn for every upstream, at most maxProbes at once, and waits.
func each(ups []*upstream, fn func(i int, u *upstream)) {
	sem := make(chan struct{}, maxProbes)
	var wg sync.WaitGroup
	for i, u := range ups {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			fn(i, u)
		}()
	}
	wg.Wait()
}

// healthProbe asks ". IN NS" of each upstream that is down or that a
// query failed with since its last probe. Any reply is healthy: it clears
// the failures and brings a down upstream back. MaxFails probes failed in
// a row mark it down; it is probed again every HealthCheck.
func (f *Forwarder) healthProbe(ctx context.Context, ups []*upstream) {
	var due []*upstream
	for _, u := range ups {
		if (u.down.Load() || u.suspect.Load()) && !u.looping.Load() {
			due = append(due, u)
		}
	}
	each(due, func(_ int, u *upstream) {
		m := new(dns.Msg)
		m.SetQuestion(".", dns.TypeNS)
		if _, err := f.probeOne(ctx, u, m); err != nil {
			if ctx.Err() != nil {
				return
			}
			f.m.healthFails.WithLabelValues(u.name).Inc()
			if n := int(u.fails.Add(1)); n >= f.cfg.MaxFails && !u.down.Swap(true) {
				f.log.Warn("upstream down: its health probes failed, probing it", "upstream", u.name, "fails", n, "err", err)
			}
			return
		}
		u.fails.Store(0)
		u.suspect.Store(false)
		if u.down.Swap(false) {
			f.log.Info("upstream up again", "upstream", u.name)
		}
	})
}

// probeOne sends m to u (UDP, then TCP when truncated; TCP with ForceTCP)
// within probeTimeout or Config.Timeout, the longer: an upstream slow to
// answer queries is as slow to answer its probe, and is alive.
func (f *Forwarder) probeOne(ctx context.Context, u *upstream, m *dns.Msg) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, max(probeTimeout, f.cfg.Timeout))
	defer cancel()
	ob := f.prepare(m)
	ob.mark.Data = u.mark
	return f.attempt(ctx, u, ob.msg, f.cfg.ForceTCP, 1)
}

// loopProbe starts a round: each upstream is asked a name of its own. One
// that forwards it back to us with our marker is found by CheckLoop, as any
// query; one that forwards it back without (a resolver on the way dropped
// the option) is marked looping in ownProbe. An upstream whose probe got
// no reply is probed again later (loopProbeDue).
func (f *Forwarder) loopProbe(ctx context.Context, ups []*upstream) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	round := &probeRound{nonce: hex.EncodeToString(b[:]), ups: ups}
	f.probe.Store(round)
	answered := make([]bool, len(ups))
	each(ups, func(i int, u *upstream) {
		m := new(dns.Msg)
		m.SetQuestion(round.nonce+"."+strconv.Itoa(i)+"."+probeSuffix, dns.TypeHINFO)
		_, err := f.probeOne(ctx, u, m)
		answered[i] = err == nil
	})
	now := time.Now()
	for i, u := range ups {
		u.checked = answered[i]
		if u.checked {
			continue
		}
		u.gap = min(max(2*u.gap, f.cfg.HealthCheck), maxLoopRecheck)
		u.probeAt = now.Add(u.gap)
	}
}

// nextWake is how long the background work may sleep: Config.HealthCheck
// while an upstream is down or suspect, until the next loop probe due
// (not less), else until the next pooled connection may expire
// (Config.Expire, not less than Config.HealthCheck). A server at rest then
// wakes every few seconds, not twice a second: each wake costs the Go
// runtime a few hundred microseconds of CPU. A failed exchange and a new
// upstream list wake it at once (kick).
func (f *Forwarder) nextWake(ups []*upstream) time.Duration {
	d := max(f.cfg.Expire, f.cfg.HealthCheck)
	now := time.Now()
	for _, u := range ups {
		switch {
		case u.looping.Load():
		case u.down.Load() || u.suspect.Load():
			return f.cfg.HealthCheck
		case !u.checked:
			d = min(d, max(u.probeAt.Sub(now), f.cfg.HealthCheck))
		}
	}
	return d
}

// loopProbeDue returns the upstreams whose loop probe got no reply and
// whose next one is due.
func (f *Forwarder) loopProbeDue(ups []*upstream) []*upstream {
	var due []*upstream
	now := time.Now()
	for _, u := range ups {
		if !u.checked && !u.looping.Load() && !now.Before(u.probeAt) {
			due = append(due, u)
		}
	}
	return due
}

// ownProbe reports whether name is a loop probe of the current round, and
// marks the upstream it was sent to as looping.
func (f *Forwarder) ownProbe(name string) bool {
	rest, ok := cutSuffixFold(name, "."+probeSuffix)
	if !ok {
		return false
	}
	round := f.probe.Load()
	if round == nil {
		return false
	}
	nonce, idx, ok := strings.Cut(rest, ".")
	if !ok || !strings.EqualFold(nonce, round.nonce) {
		return false
	}
	i, err := strconv.Atoi(idx)
	if err != nil || i < 0 || i >= len(round.ups) {
		return true // ours, but not a valid index: still not forwarded
	}
	u := round.ups[i]
	if !u.looping.Swap(true) {
		f.loopDetected.Add(1)
		f.log.Error("forwarding loop: the loop probe sent to this upstream came back without our marker (a resolver on the way drops it): not used until the upstream list changes",
			"upstream", u.name)
	}
	return true
}

func cutSuffixFold(s, suffix string) (string, bool) {
	if len(s) < len(suffix) || !strings.EqualFold(s[len(s)-len(suffix):], suffix) {
		return s, false
	}
	return s[:len(s)-len(suffix)], true
}
