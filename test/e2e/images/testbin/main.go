// Command testbin is the workload of the e2e test image: a static binary
// (CGO_ENABLED=0) with a few modes that report what a container sees.
//
//	testbin resolv             print /etc/resolv.conf
//	testbin hostname           print the kernel hostname
//	testbin cat PATH...        print files
//	testbin sleep [DURATION]   sleep (forever by default) until SIGTERM/SIGINT
//	testbin lookup NAME [TYPE] resolve NAME with the Go resolver and print the answers
//
// lookup uses the pure Go resolver (there is no libc in the image), which
// reads /etc/resolv.conf itself and honours its search, ndots, timeout,
// attempts, rotate, single-request, use-vc and edns0 settings. TYPE is one of
// A (default), AAAA, IP (A and AAAA), CNAME, SRV, TXT, MX, NS or PTR (NAME is
// then an address). Answers are printed one per line; a failed lookup prints
// the error on stderr and exits 1.
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "resolv":
		err = cat([]string{"/etc/resolv.conf"})
	case "hostname":
		var h string
		if h, err = os.Hostname(); err == nil {
			fmt.Println(h)
		}
	case "cat":
		err = cat(os.Args[2:])
	case "sleep":
		err = sleep(os.Args[2:])
	case "lookup":
		err = lookup(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "testbin %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: testbin resolv|hostname|cat PATH...|sleep [DURATION]|lookup NAME [TYPE]")
	os.Exit(2)
}

func cat(paths []string) error {
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		_, err = io.Copy(os.Stdout, f)
		f.Close()
		if err != nil {
			return fmt.Errorf("read %q: %w", p, err)
		}
	}
	return nil
}

func sleep(args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if len(args) > 0 {
		d, err := time.ParseDuration(args[0])
		if err != nil {
			return fmt.Errorf("parse duration %q: %w", args[0], err)
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	<-ctx.Done()
	return nil
}

func lookup(args []string) error {
	if len(args) < 1 || len(args) > 2 {
		usage()
	}
	name, typ := args[0], "A"
	if len(args) == 2 {
		typ = strings.ToUpper(args[1])
	}
	// The resolver's own timeout and attempts (from resolv.conf) bound each
	// query; this only stops a misconfigured run from hanging a test.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := &net.Resolver{PreferGo: true}
	var out []string
	switch typ {
	case "A", "AAAA", "IP":
		network := map[string]string{"A": "ip4", "AAAA": "ip6", "IP": "ip"}[typ]
		addrs, err := r.LookupNetIP(ctx, network, name)
		if err != nil {
			return err
		}
		for _, a := range addrs {
			out = append(out, a.Unmap().String())
		}
	case "CNAME":
		c, err := r.LookupCNAME(ctx, name)
		if err != nil {
			return err
		}
		out = append(out, c)
	case "SRV":
		_, srvs, err := r.LookupSRV(ctx, "", "", name)
		if err != nil {
			return err
		}
		for _, s := range srvs {
			out = append(out, fmt.Sprintf("%d %d %d %s", s.Priority, s.Weight, s.Port, s.Target))
		}
	case "TXT":
		txts, err := r.LookupTXT(ctx, name)
		if err != nil {
			return err
		}
		out = txts
	case "MX":
		mxs, err := r.LookupMX(ctx, name)
		if err != nil {
			return err
		}
		for _, m := range mxs {
			out = append(out, fmt.Sprintf("%d %s", m.Pref, m.Host))
		}
	case "NS":
		nss, err := r.LookupNS(ctx, name)
		if err != nil {
			return err
		}
		for _, n := range nss {
			out = append(out, n.Host)
		}
	case "PTR":
		if _, err := netip.ParseAddr(name); err != nil {
			return fmt.Errorf("ptr lookup needs an address, got %q", name)
		}
		names, err := r.LookupAddr(ctx, name)
		if err != nil {
			return err
		}
		out = names
	default:
		return fmt.Errorf("unknown type %q", typ)
	}
	for _, line := range out {
		fmt.Println(line)
	}
	return nil
}
