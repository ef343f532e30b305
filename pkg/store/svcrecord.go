package store

import (
	"encoding/binary"
	"net/netip"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/store/internal/pack"
)

// svcRecord is a Service record as the Store keeps it: packed in one
// string, which holds no pointer. The map of 100k Services held nine
// pointers a record (its names, its lists, an address's zone), and the
// collector marked them at every cycle: a third of a collection's time.
// The record is unpacked when a build reads it, one Service at a time.
//
// The string holds the type, a flag byte (PublishNotReadyAddresses), the
// ClusterIPs (a uvarint count, then each as netip.Addr.MarshalBinary
// gives it, after its uvarint length: 4 or 16 bytes, and the zone), the
// ExternalName and the ports (a
// uvarint count, then each port's name and protocol, then its number in
// 2 bytes), then the TrafficDistribution, then the ExternalIPs (as the
// ClusterIPs). Strings are a uvarint length and
// their bytes. The namespace
// and the name are the map's key.
type svcRecord string

// recordArena is where the Services set while a full Publish is pending
// keep their names and packed records: the bulk is a start's first lists
// (or a Replace), cut from shared chunks (pack.Strings). A change after
// the bulk packs its record alone. Namespaces are not copied: the feed
// interns them. The EndpointSlice and Pod records are not packed.
type recordArena struct {
	strs pack.Strings
}

// service is v's name and record, cut from the arena.
func (a *recordArena) service(v *Service) (string, svcRecord) {
	var tmp [256]byte
	return a.strs.Copy(v.Name), svcRecord(a.strs.CopyBytes(appendService(tmp[:0], v)))
}

// appendService appends v packed to b.
func appendService(b []byte, v *Service) []byte {
	var flags byte
	if v.PublishNotReadyAddresses {
		flags = 1
	}
	b = append(b, byte(v.Type), flags)
	b = binary.AppendUvarint(b, uint64(len(v.ClusterIPs)))
	for _, a := range v.ClusterIPs {
		var tmp [64]byte
		ab, _ := a.AppendBinary(tmp[:0]) // it does not fail
		b = appendStr(b, ab)
	}
	b = appendStr(b, v.ExternalName)
	b = binary.AppendUvarint(b, uint64(len(v.Ports)))
	for _, p := range v.Ports {
		b = appendStr(appendStr(b, p.Name), p.Protocol)
		b = binary.BigEndian.AppendUint16(b, p.Port)
	}
	b = appendStr(b, v.TrafficDistribution)
	b = binary.AppendUvarint(b, uint64(len(v.ExternalIPs)))
	for _, a := range v.ExternalIPs {
		var tmp [64]byte
		ab, _ := a.AppendBinary(tmp[:0]) // it does not fail
		b = appendStr(b, ab)
	}
	return b
}

func appendStr[S string | []byte](b []byte, s S) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// newSvcRecord is v packed in a string of its own.
func newSvcRecord(v *Service) svcRecord {
	var tmp [256]byte
	return svcRecord(appendService(tmp[:0], v))
}

// service is the record unpacked, with k's namespace and name. Its
// strings share the record's bytes; its lists are its own.
func (r svcRecord) service(k nsName) Service {
	s := string(r)
	v := Service{Namespace: k.ns, Name: k.name, Type: ServiceType(s[0]), PublishNotReadyAddresses: s[1]&1 != 0}
	off := 2
	v.ClusterIPs, off = recAddrs(s, off)
	v.ExternalName, off = recStr(s, off)
	n, off := recUvarint(s, off)
	if n > 0 {
		v.Ports = make([]Port, n)
		for i := range v.Ports {
			p := &v.Ports[i]
			p.Name, off = recStr(s, off)
			p.Protocol, off = recStr(s, off)
			p.Port = uint16(s[off])<<8 | uint16(s[off+1])
			off += 2
		}
	}
	v.TrafficDistribution, off = recStr(s, off)
	v.ExternalIPs, _ = recAddrs(s, off)
	return v
}

// recAddrs reads a list of addresses at off (nil when empty), and the
// offset after it.
func recAddrs(s string, off int) ([]netip.Addr, int) {
	n, off := recUvarint(s, off)
	if n == 0 {
		return nil, off
	}
	as := make([]netip.Addr, n)
	for i := range as {
		var a string
		a, off = recStr(s, off)
		as[i] = recAddr(a)
	}
	return as, off
}

// recAddr is the address a, as netip.Addr.AppendBinary made it: 4 or 16
// bytes read in place, a zoned one (never a ClusterIP) through a copy.
func recAddr(a string) netip.Addr {
	switch len(a) {
	case 4:
		return netip.AddrFrom4([4]byte{a[0], a[1], a[2], a[3]})
	case 16:
		var x [16]byte
		copy(x[:], a)
		return netip.AddrFrom16(x)
	}
	var ip netip.Addr
	ip.UnmarshalBinary([]byte(a)) // made by AppendBinary: it does not fail
	return ip
}

// recUvarint is the uvarint at s[off:] and the offset after it, as
// binary.Uvarint reads it (the record is well formed).
func recUvarint(s string, off int) (int, int) {
	var x uint64
	for shift := 0; ; shift += 7 {
		c := s[off]
		off++
		x |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return int(x), off
		}
	}
}

// recStr is the string at s[off:] and the offset after it.
func recStr(s string, off int) (string, int) {
	n, off := recUvarint(s, off)
	return s[off : off+n], off + n
}
