// Package replycache keeps packed DNS replies across record snapshots.
//
// A reply is keyed by its question as asked (Key). Each reply names the
// lowercase names it was made from. When a new snapshot comes, Advance
// retires the replies of the names that changed, and only those.
//
// The cache holds two generations of at most half its bytes each. A hit in
// the previous generation moves the reply to the current one. So the
// replies in use stay, while a flood of one-off names only churns the
// generations. A generation also ages out once it is idle long enough.
//
// Reads take no lock: a hit is a hash, a probe and a few atomic loads.
// Writes take one mutex. The value a reply carries is the caller's (V).
//
// Reply is the packed form a hit hands out. It patches the request's ID,
// RD and CD in, and may rotate the answer's RRsets or cut them to a
// window, in place, one step per hit. It refuses a reply it cannot change
// safely: a compression pointer that would read moved bytes, a record
// type whose data may hold names it does not know, or bytes that do not
// parse. Such a reply is served as it is.
//
// The package imports only the standard library: it reads the bytes of a
// packed message, never a DNS library's types.
package replycache
