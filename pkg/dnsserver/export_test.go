package dnsserver

// PerDatagram makes s read and write one datagram at a time, the path
// where batching is unavailable.
func PerDatagram(s *Server) { s.perDatagram = true }

// SocketReads are the datagrams each UDP socket of s has read, in the
// order of Listen, then of the sockets of each address.
func SocketReads(s *Server) []uint64 {
	return socketCounts(s, func(u *udpSocket) uint64 { return u.read.Load() })
}

// SocketBatches are the reads of each UDP socket of s that returned
// datagrams (SocketReads's order).
func SocketBatches(s *Server) []uint64 {
	return socketCounts(s, func(u *udpSocket) uint64 { return u.batches.Load() })
}

// socketCounts reads one counter of each UDP socket of s.
func socketCounts(s *Server, count func(*udpSocket) uint64) []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.udp == nil {
		return nil
	}
	var n []uint64
	for _, u := range s.udp.socks {
		n = append(n, count(u))
	}
	return n
}

// MaxIdleWorkers bounds the goroutines kept waiting for datagrams.
const MaxIdleWorkers = maxIdleWorkers

// IdleWorkers is the number of goroutines of s waiting for a datagram.
func IdleWorkers(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.udp == nil {
		return 0
	}
	return int(s.udp.work.idle.Load())
}

// TCPPipelined bounds the queries of one TCP connection answered at once.
const TCPPipelined = tcpPipelined

// TCPLimits sets s's pipelining bounds before Start: per connection, in
// total, per client, and the slots kept for clients under their share.
func TCPLimits(s *Server, pipelined, inFlight, perClient, reserve int) {
	s.tcpLimits = tcpLimits{pipelined, inFlight, perClient, reserve}
}
