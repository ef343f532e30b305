// Package dnsmsg holds the DNS message rules that the cluster DNS server
// (pkg/clusterdns) and the node-local stage (pkg/nodelocal) share:
//
//   - EDNSSize, the EDNS0 UDP payload size both advertise, in their replies
//     and in the queries they send upstream;
//   - Check, the queries refused before their question is looked at
//     (FORMERR, NOTIMP, BADVERS);
//   - ReplySize and Finish, the OPT of a reply and the size it is truncated
//     to (512 bytes without EDNS0, the client's EDNS0 size with it but at
//     most EDNSSize, 64 KiB over TCP);
//   - LimitAnswer, the UDP answer limit (udpAnswerLimit): an A or AAAA
//     RRset cut to a window of the limit that moves each reply;
//   - Query, how a question is asked upstream, and WithoutOPT, which drops
//     an upstream reply's OPT so the client gets only ours;
//   - ParseQuery, which reads a plain query (one question with a name that
//     prints without escapes, at most an OPT of version 0 with cookies and
//     padding) from its wire form without unpacking it, for the answers
//     made from the wire (pkg/dnscache AnswerWire): it reads only queries
//     that miekg/dns unpacks into the same question, bits and OPT and that
//     Check lets through (FuzzParseQuery), and WireQuery.ReplySize is
//     ReplySize's rule for them.
//
// The EDNS0 option code of autopath search lists is pkg/autopath's
// (DefaultOptionCode), with the rest of that protocol.
//
// It imports miekg/dns and the standard library only, so both servers can
// use it without depending on each other.
package dnsmsg
