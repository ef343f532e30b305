package forward

import "time"

// LogEvery is how often forward errors are logged per upstream at most.
const LogEvery = logEvery

// SetLogClock sets the clock of f's log rate limits; call it before the
// first Exchange.
func SetLogClock(f *Forwarder, now func() time.Time) { f.now = now }
