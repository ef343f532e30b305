// Package testkit is the one kit the tests share: a fake DNS upstream,
// metric reading, WaitFor, a locked buffer and the standard node.
//
// Only tests and the test/ helper packages import it; the layering test
// keeps it out of the binary.
package testkit
