//go:build race

package main

// raceEnabled: the race detector slows the server about tenfold, so load
// tests send less.
const raceEnabled = true
