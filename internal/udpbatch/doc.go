// Package udpbatch reads and writes a UDP socket's datagrams a batch at a
// time, allocating nothing per datagram.
//
// On Linux a Conn reads up to Batch datagrams a call (recvmmsg) and sends
// the replies of a batch in one call (sendmmsg). It calls them on the
// socket directly (unsafeptr.RawSyscallSlice; x/sys/unix has no wrapper):
// x/net's ReadBatch allocates the client's address for every datagram. Where batching is unavailable (a kernel or sandbox
// without recvmmsg, another OS) a Conn reads and writes one datagram at a
// time, the same way.
//
// On a wildcard address (0.0.0.0, [::]) every datagram is read with its
// destination address, and its reply leaves from it, as miekg/dns does.
// Everything a batch needs (headers, iovecs, addresses, control messages,
// buffers) is made once per Conn. A Conn is read and written by one
// goroutine; WriteTo may be called from any.
package udpbatch
