package nodenet

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// TableName is the nftables table (family inet) NftNotrack manages.
const TableName = "dnsconfigurer-nodelocal"

// Notrack installs, checks and removes the rules that take DNS to and from
// the addresses out of connection tracking.
type Notrack interface {
	// Apply replaces the rules with those for ips and port, atomically.
	Apply(ips []netip.Addr, port uint16) error
	// Present reports whether the rules for ips and port are all in place.
	Present(ips []netip.Addr, port uint16) (bool, error)
	// Remove removes the rules and reports whether there were any; it is
	// not an error when there are none.
	Remove() (bool, error)
}

// NftNotrack is Notrack on nftables, in the network namespace of a file
// descriptor (or the process's with NewNftNotrack(-1)).
type NftNotrack struct {
	nsFD int
}

var _ Notrack = (*NftNotrack)(nil)

// NewNftNotrack returns the nftables Notrack of the namespace nsFD (-1:
// the current one).
func NewNftNotrack(nsFD int) *NftNotrack { return &NftNotrack{nsFD: nsFD} }

func (n *NftNotrack) conn() (*nftables.Conn, error) {
	var opts []nftables.ConnOption
	if n.nsFD >= 0 {
		opts = append(opts, nftables.WithNetNSFd(n.nsFD))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("nftables: %w", err)
	}
	return c, nil
}

// chains of the table, and what each holds per address and protocol.
var chainHooks = []struct {
	name string
	hook *nftables.ChainHook
	// matches: true for "to the address's port", false for "from it".
	matches []bool
}{
	{"prerouting", nftables.ChainHookPrerouting, []bool{true}},
	{"output", nftables.ChainHookOutput, []bool{false, true}},
}

var protocols = []byte{unix.IPPROTO_UDP, unix.IPPROTO_TCP}

func table() *nftables.Table {
	return &nftables.Table{Family: nftables.TableFamilyINet, Name: TableName}
}

// Apply implements Notrack: the table is deleted and made again in one
// transaction.
func (n *NftNotrack) Apply(ips []netip.Addr, port uint16) error {
	c, err := n.conn()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	t := table()
	c.AddTable(t) // so that the delete never fails on a missing table
	c.DelTable(t)
	c.AddTable(t)
	policy := nftables.ChainPolicyAccept
	for _, ch := range chainHooks {
		chain := c.AddChain(&nftables.Chain{Name: ch.name, Table: t, Type: nftables.ChainTypeFilter,
			Hooknum: ch.hook, Priority: nftables.ChainPriorityRaw, Policy: &policy})
		for _, ip := range ips {
			for _, proto := range protocols {
				for _, to := range ch.matches {
					c.AddRule(&nftables.Rule{Table: t, Chain: chain, Exprs: notrackExprs(ip, proto, port, to)})
				}
			}
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: add table %s: %w", TableName, err)
	}
	return nil
}

// Present implements Notrack: the table has both chains with one rule per
// address, protocol and direction.
func (n *NftNotrack) Present(ips []netip.Addr, port uint16) (bool, error) {
	c, err := n.conn()
	if err != nil {
		return false, err
	}
	defer c.CloseLasting()
	if _, err := c.ListTableOfFamily(TableName, nftables.TableFamilyINet); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, fmt.Errorf("nftables: list table %s: %w", TableName, err)
	}
	t := table()
	for _, ch := range chainHooks {
		rules, err := c.GetRules(t, &nftables.Chain{Name: ch.name, Table: t})
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("nftables: list chain %s: %w", ch.name, err)
		}
		if len(rules) != len(ips)*len(protocols)*len(ch.matches) {
			return false, nil
		}
	}
	return true, nil
}

// Remove implements Notrack.
func (n *NftNotrack) Remove() (bool, error) {
	c, err := n.conn()
	if err != nil {
		return false, err
	}
	defer c.CloseLasting()
	_, err = c.ListTableOfFamily(TableName, nftables.TableFamilyINet)
	if errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("nftables: list table %s: %w", TableName, err)
	}
	t := table()
	c.AddTable(t) // so that the delete never fails on a table gone meanwhile
	c.DelTable(t)
	if err := c.Flush(); err != nil {
		return false, fmt.Errorf("nftables: delete table %s: %w", TableName, err)
	}
	return true, nil
}

// notrackExprs is "meta nfproto <family> <ip> daddr|saddr <ip> meta l4proto
// <proto> th dport|sport <port> counter notrack".
func notrackExprs(ip netip.Addr, proto byte, port uint16, to bool) []expr.Any {
	ip = ip.Unmap()
	family, addrOff, addrLen := byte(unix.NFPROTO_IPV4), uint32(12), uint32(4) // IPv4 saddr
	if ip.Is6() {
		family, addrOff, addrLen = unix.NFPROTO_IPV6, 8, 16 // IPv6 saddr
	}
	portOff := uint32(0) // source port
	if to {
		addrOff += addrLen // the destination follows the source in both headers
		portOff = 2
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{family}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: addrOff, Len: addrLen},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ip.AsSlice()},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: portOff, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
		&expr.Counter{},
		&expr.Notrack{},
	}
}
