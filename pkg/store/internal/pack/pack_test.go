package pack

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// TestHeader checks that a Node is its [headerWords]uint32 header: the
// records follow it at byte header.
func TestHeader(t *testing.T) {
	if got := unsafe.Sizeof(Node{}); got != header {
		t.Errorf("Node is %d bytes, want %d", got, header)
	}
	if got := unsafe.Alignof(Node{}); got > unsafe.Alignof(uint32(0)) {
		t.Errorf("Node aligns on %d bytes, more than a uint32", got)
	}
}

func TestCut(t *testing.T) {
	cases := []struct {
		name       string
		used, room int // the chunk before: length and capacity (0: none)
		n, size    int
		from       string // "chunk" (the one there), "new chunk" or "alone"
		chunkAfter int    // the chunk's length after
		chunkCap   int    // the chunk's capacity after
	}{
		{name: "first cut makes a chunk of a 32nd", n: 3, size: 256, from: "new chunk", chunkAfter: 3, chunkCap: 8},
		{name: "a first cut larger than a 32nd", n: 20, size: 256, from: "new chunk", chunkAfter: 20, chunkCap: 20},
		{name: "fits", used: 10, room: 64, n: 8, size: 64, from: "chunk", chunkAfter: 18, chunkCap: 64},
		{name: "fits exactly", used: 56, room: 64, n: 8, size: 64, from: "chunk", chunkAfter: 64, chunkCap: 64},
		{name: "no room: a new chunk twice the last", used: 14, room: 16, n: 4, size: 256, from: "new chunk", chunkAfter: 4, chunkCap: 32},
		{name: "no room: a new chunk of at most size", used: 60, room: 64, n: 5, size: 64, from: "new chunk", chunkAfter: 5, chunkCap: 64},
		{name: "a large list alone", used: 10, room: 64, n: 9, size: 64, from: "alone", chunkAfter: 10, chunkCap: 64},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var chunk []int
			if tc.room > 0 {
				chunk = make([]int, tc.used, tc.room)
			}
			before := chunk
			got := cut(&chunk, tc.n, tc.size)
			if len(got) != 0 || cap(got) != tc.n {
				t.Fatalf("cut = len %d cap %d, want 0 and %d", len(got), cap(got), tc.n)
			}
			if len(chunk) != tc.chunkAfter || cap(chunk) != tc.chunkCap {
				t.Errorf("chunk len %d cap %d, want %d and %d", len(chunk), cap(chunk), tc.chunkAfter, tc.chunkCap)
			}
			from := "alone"
			switch {
			case before != nil && unsafe.SliceData(got) == &before[:cap(before)][tc.used]:
				from = "chunk"
			case unsafe.SliceData(got) == unsafe.SliceData(chunk):
				from = "new chunk"
			}
			if from != tc.from {
				t.Errorf("cut from %s, want %s", from, tc.from)
			}
		})
	}
	// An append past a cut's room moves it: the next cut keeps its items.
	var chunk []int
	a := append(cut(&chunk, 2, 64), 1, 2)
	b := append(cut(&chunk, 2, 64), 3, 4)
	a = append(a, 5)
	if b[0] != 3 || b[1] != 4 || len(a) != 3 {
		t.Errorf("after appending to the first cut: %v %v", a, b)
	}
}

// TestNodeRecords adds records of every kind in every order to a draft,
// packs it on the heap and in a rebuild's chunk, and reads each kind back
// unmixed; a node unpacked and changed leaves the packed one alone.
func TestNodeRecords(t *testing.T) {
	a1, a2 := netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.1")
	b1, b2 := netip.MustParseAddr("fd00::2"), netip.MustParseAddr("::ffff:10.0.0.3")
	long := strings.Repeat("l", 200) + "." // a length of two uvarint bytes
	adds := map[string]func(d *Draft){
		"aaaa":  func(d *Draft) { d.AddAddr(b1) },
		"a":     func(d *Draft) { d.AddAddr(a1); d.AddAddr(a2); d.AddAddr(a1) },
		"v4map": func(d *Draft) { d.AddAddr(b2) },
		"ptr":   func(d *Draft) { d.AddPTR("z."); d.AddPTR(long); d.AddPTR("z.") },
		"txt":   func(d *Draft) { d.AddTXT("t1", "", "t2") },
		"cname": func(d *Draft) { d.SetCNAME("old."); d.SetCNAME("c.") },
		"srv": func(d *Draft) {
			d.AddSRV(SRV{Priority: 1, Weight: 2, Port: 1, Target: "s."})
			d.TakeSRV([]SRV{{Port: 65535, Weight: 100, Target: long}})
		},
	}
	orders := [][]string{
		{"aaaa", "a", "v4map", "ptr", "txt", "cname", "srv"},
		{"cname", "txt", "srv", "ptr", "a", "aaaa", "v4map"},
		{"txt", "ptr", "v4map", "srv", "aaaa", "cname", "a"},
	}
	packs := map[string]func(d *Draft) *Node{
		"heap":  (*Draft).Pack,
		"chunk": func(d *Draft) *Node { return new(Nodes).Pack(d) },
	}
	for where, pack := range packs {
		for _, order := range orders {
			d := &Draft{TTL: 7}
			for _, k := range order {
				adds[k](d)
			}
			d.Sort()
			n := pack(d)
			check := func(what string) {
				t.Helper()
				want := map[string]bool{
					"A":     slices.Equal(n.A(), []netip.Addr{a2, a1, b2.Unmap()}) && n.NumA() == 3 && n.AAt(2) == b2.Unmap(),
					"AAAA":  slices.Equal(n.AAAA(), []netip.Addr{b1}) && n.NumAAAA() == 1 && n.AAAAAt(0) == b1,
					"PTR":   slices.Equal(n.PTR(), []string{long, "z."}),
					"TXT":   slices.Equal(n.TXT(), []string{"t1", "", "t2"}),
					"CNAME": n.CNAME() == "c.",
					"SRV":   slices.Equal(n.SRV(), []SRV{{Priority: 1, Weight: 2, Port: 1, Target: "s."}, {Port: 65535, Weight: 100, Target: long}}),
					"TTL":   n.TTL == 7,
				}
				for k, ok := range want {
					if !ok {
						t.Errorf("%s, order %v, %s: %s wrong: A %v AAAA %v PTR %v TXT %v CNAME %q SRV %v",
							where, order, what, k, n.A(), n.AAAA(), n.PTR(), n.TXT(), n.CNAME(), n.SRV())
					}
				}
			}
			check("packed")
			var c Draft
			n.Unpack(&c)
			if again := c.Pack(); !Equal(again, n) {
				t.Errorf("%s, order %v: unpacked and packed again differs", where, order)
			}
			c.AddAddr(netip.MustParseAddr("10.9.9.9"))
			c.AddPTR("x.")
			c.AddSRV(SRV{Port: 3})
			c.SetCNAME("d.")
			if Equal(c.Pack(), n) {
				t.Errorf("%s, order %v: the changed copy equals its source", where, order)
			}
			check("after the copy changed")
		}
	}
	for _, n := range []*Node{Empty(5), new(Node)} {
		if len(n.A())+len(n.AAAA())+len(n.PTR())+len(n.TXT())+len(n.SRV()) != 0 || n.CNAME() != "" || n.NumA()+n.NumAAAA() != 0 {
			t.Errorf("an empty node has records")
		}
	}
}

// TestNodeLarge packs a node of more records than a list of a pooled
// draft keeps, with each kind, and reads them back.
func TestNodeLarge(t *testing.T) {
	var d Draft
	var want4, want6 []netip.Addr
	var wantSRV []SRV
	for i := range 70000 {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		b := netip.AddrFrom16([16]byte{0xfd, 15: byte(i), 14: byte(i >> 8), 13: byte(i >> 16)})
		want4, want6 = append(want4, a), append(want6, b)
		wantSRV = append(wantSRV, SRV{Port: uint16(i), Target: fmt.Sprint(i, ".")})
	}
	d.AddAddrs(append(slices.Clone(want6), want4...))
	d.TakeSRV(wantSRV)
	n := d.Pack()
	if !slices.Equal(n.A(), want4) || !slices.Equal(n.AAAA(), want6) || !slices.Equal(n.SRV(), wantSRV) {
		t.Errorf("a node of %d A, %d AAAA and %d SRV records read back wrong", n.NumA(), n.NumAAAA(), len(n.SRV()))
	}
}

// TestDraftPool: a pooled draft comes back empty, and the pool keeps
// neither long lists nor more than poolKeep drafts.
func TestDraftPool(t *testing.T) {
	var p DraftPool
	d := p.Get(5)
	d.AddAddr(netip.MustParseAddr("10.0.0.1"))
	d.AddPTR("p.")
	d.SetCNAME("c.")
	d.AddTXT("t")
	d.AddSRV(SRV{Target: "s."})
	p.Put(d)
	if got := p.Get(9); got != d || got.TTL != 9 || len(got.addrs)+len(got.ptrs)+len(got.txts)+len(got.srv) != 0 || got.cname != "" || got.nA != 0 {
		t.Errorf("a pooled draft came back as %+v", got)
	}
	big := &Draft{addrs: make([]netip.Addr, 0, draftKeep+1)}
	p.Put(big)
	if len(p.free) != 0 {
		t.Error("the pool kept a draft of a long list")
	}
	for range poolKeep + 10 {
		p.Put(&Draft{})
	}
	if len(p.free) != poolKeep {
		t.Errorf("the pool keeps %d drafts, want %d", len(p.free), poolKeep)
	}
}

// TestMergeNodes: the node of a name many units share holds what adding
// every unit's records one by one to one node makes: addresses and PTR
// targets once each and sorted, SRV records and TXT strings in order, the
// first CNAME; no input node changes.
func TestMergeNodes(t *testing.T) {
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}) }
	for _, k := range []int{2, 3, 40, 1000} {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			var nodes, copies []*Node
			want := &Draft{TTL: 5}
			for i := range k {
				d := &Draft{TTL: 5}
				for _, add := range []func(*Draft){
					func(d *Draft) { d.AddAddr(addr(k - i)) },
					func(d *Draft) { d.AddAddr(addr(i % 7)) }, // shared by several
					func(d *Draft) { d.AddAddr(netip.MustParseAddr(fmt.Sprintf("fd00::%x", i%5+1))) },
					func(d *Draft) { d.AddPTR(fmt.Sprintf("p%d.", (k-i)%11)) },
					func(d *Draft) { d.AddSRV(SRV{Port: uint16(i), Target: "t."}) },
				} {
					add(d)
					add(want)
				}
				if i%3 == 1 {
					d.AddTXT(fmt.Sprint("txt", i))
					want.AddTXT(fmt.Sprint("txt", i))
				}
				if i == 1 {
					d.SetCNAME("c.")
					want.SetCNAME("c.")
				}
				d.Sort()
				nodes, copies = append(nodes, d.Pack()), append(copies, d.Pack())
			}
			want.Sort()
			if got, w := Merge(nodes), want.Pack(); !Equal(got, w) {
				t.Errorf("merged:\n%+v\nwant:\n%+v", got, w)
			}
			for i := range nodes {
				if !Equal(nodes[i], copies[i]) {
					t.Fatalf("input node %d changed", i)
				}
			}
		})
	}
}

// TestSingleNodes: AddrNode and PTRNode equal the drafts of one record
// packed.
func TestSingleNodes(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  *Node
		add  func(d *Draft)
	}{
		{"v4", AddrNode(5, netip.MustParseAddr("10.0.0.1")), func(d *Draft) { d.AddAddr(netip.MustParseAddr("10.0.0.1")) }},
		{"v4 in v6", AddrNode(5, netip.MustParseAddr("::ffff:10.0.0.1")), func(d *Draft) { d.AddAddr(netip.MustParseAddr("10.0.0.1")) }},
		{"v6", AddrNode(5, netip.MustParseAddr("fd00::1")), func(d *Draft) { d.AddAddr(netip.MustParseAddr("fd00::1")) }},
		{"ptr", PTRNode(5, "a.web.ns.svc.cluster.local."), func(d *Draft) { d.AddPTR("a.web.ns.svc.cluster.local.") }},
	} {
		d := Draft{TTL: 5}
		tc.add(&d)
		if want := d.Pack(); !Equal(tc.got, want) {
			t.Errorf("%s: %+v, want %+v", tc.name, tc.got, want)
		}
	}
}

// TestStrings checks that an arena's strings and a nil arena's are the
// same, and that only the arena's share its chunk.
func TestStrings(t *testing.T) {
	cases := []struct {
		name string
		make func(a *Strings) string
		want string
	}{
		{"copy", func(a *Strings) string { return a.Copy("svc") }, "svc"},
		{"copy empty", func(a *Strings) string { return a.Copy("") }, ""},
		{"copy bytes", func(a *Strings) string { return a.CopyBytes([]byte("1.0.96.10.in-addr.arpa.")) }, "1.0.96.10.in-addr.arpa."},
		{"copy no bytes", func(a *Strings) string { return a.CopyBytes(nil) }, ""},
		{"concat", func(a *Strings) string { return a.Concat("web", ".", "prod", ".svc.", "cluster.local.") }, "web.prod.svc.cluster.local."},
		{"concat empty", func(a *Strings) string { return a.Concat("", "") }, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var a Strings
			if got := tc.make(&a); got != tc.want || a.Len() != len(tc.want) {
				t.Errorf("arena: %q with %d bytes used, want %q", got, a.Len(), tc.want)
			}
			if got := tc.make(nil); got != tc.want {
				t.Errorf("nil arena: %q, want %q", got, tc.want)
			}
		})
	}
}
