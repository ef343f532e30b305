// Package testkit is the one kit the tests share. It has a fake DNS
// upstream, metric reading, waiting on a condition, a locked buffer, a
// manual clock and the standard node.
//
//   - NewUpstream: UDP and TCP on 127.0.0.1:0 (or At, or ListenIn a
//     namespace), answering with a handler (Reply, AnswerA, Silent), with
//     Delay, Count and Queries; ClientQueries leaves the forwarder's
//     probes (Probe) out, AskedFor counts one name.
//   - Ask, AskFrom: one exchange with a server, failing the test when no
//     reply comes; NewQuery: a query, with EDNS0 and options when asked;
//     Exchange: Ask of a plain question returning the error instead;
//     ThroughWire: a message as the other end reads it.
//     Named: an upstream whose TXT answer names it, for routing tests.
//     ListenBoth, ListenTCP: UDP and TCP on one port, or TCP, on loopback;
//     Accept: a handler per connection until the test ends; Pipe: two
//     connections joined.
//   - Gather, Scrape: a registry or a /metrics page as Metrics, one value
//     per series (Want: values wanted); Value for one series; GetOK for a
//     /readyz. Registry: a pedantic registry holding the collectors a test
//     built.
//   - WaitFor, WaitEqual, WaitEvery: poll a condition, fail with its last
//     error; Holds: nothing happens for a while; Poll: a wait that may end
//     unmet; Closed: a done channel's state. No test sleeps to wait.
//     WantErr, WantErrPrefix: the want-an-error-or-none check of a table
//     test.
//   - SARIFSchema, CheckSARIF: the SARIF 2.1.0 schema and a log checked
//     against it (validate -o sarif).
//   - Go, Start, RunSynced: a run stopped and checked when the test ends.
//     Every: the pace of a load or a sampler. Parallel: n calls at once,
//     every error reported.
//   - InNetNS: a function run inside a network namespace (its sockets
//     stay there); NetNSClient: an HTTP client dialing inside one;
//     StartLocked: a child started from a thread kept alive, so that its
//     parent-death signal holds.
//   - Buffer (with WaitMatch for a log line), Logger, GrepLines, Clock, FIFO;
//     WriteFile (in place) and WriteAtomic (by a rename) for watch tests;
//     EnvBin: a program a variable names.
//   - CA: certificates for a TLS server and its clients (NodeClient: a
//     kubelet's); CertManagerIssuer, CertManagerCertificate for decoding
//     manifests. ReadTar: the entries of a tar stream; ImageLayer: those
//     of an image's one layer; GoVersionM: the modules of a Go binary.
//   - StartServer: a DNS server on loopback, shut down when the test
//     ends; Counting: a handler's ServeDNS calls counted, AnswerWire kept.
//   - Node, NodeWithNodeLocal, ClusterDNS...: the node every test uses;
//     KubeletDNS: what kubelet gives a pod on it.
//
// Only tests and the test/ helper packages import it; the layering test
// keeps it out of the binary.
package testkit
