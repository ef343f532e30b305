// Package wirerotate rotates the answer records of a packed DNS reply in
// place, one step per cache hit.
//
// Plan finds the runs of A, AAAA and same-priority SRV records of one
// owner, and the compression pointers into them. Each Apply then writes
// the reply with every run started one record later. PlanWindow does the
// same for a reply whose one address run is cut to a limit: each Apply
// writes the next limit records.
//
// Both refuse a reply they cannot rotate safely: a pointer that would read
// moved bytes, a record type whose data may hold names they do not know,
// or bytes that do not parse. The caller then keeps the reply as it is.
//
// The package imports only the standard library.
package wirerotate
