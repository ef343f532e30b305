//go:build race

package forward_test

// raceEnabled: the race detector slows the server about tenfold, so load
// tests send less (UDP datagrams beyond what it reads in time are dropped by
// the kernel, which is not what they measure).
const raceEnabled = true
