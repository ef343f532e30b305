// Package template answers questions from templates compiled once, as
// CoreDNS's template plugin does.
//
// Compile turns v1alpha1.Templates into a Set, checking every pattern and
// every record against a sample question. Set.Match picks the template
// for a question (zones, class, type, then the patterns, in order);
// Match.Answer builds its records. The package is pure: no I/O, no
// logger, no client-go; it imports api/v1alpha1 and miekg/dns only.
package template
