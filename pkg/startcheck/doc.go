// Package startcheck tells whether serve starts on a configuration meant
// for a pod, such as one convert wrote.
//
// Run builds the server serve would run (clusterdns.Check: no port bound,
// no cluster read). The files the configuration names are the pod's, not
// this machine's, so each is stood in by a file of its own: in memory
// where the system has memfd, else in a temporary directory, removed
// before Run returns.
package startcheck
