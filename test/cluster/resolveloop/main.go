// Command resolveloop looks names up in a loop with Go's own resolver (no
// cgo). It prints one line per lookup, as testdata/resolveloop.c does for
// glibc and musl:
//
//	<unix ms> <name> ok <duration ms> <addresses, sorted, comma-separated>
//	<unix ms> <name> fail <duration ms> <reason>
//
// test/cluster builds it with CGO_ENABLED=0 and runs it in a pod.
//
// Usage: resolveloop PAUSE_MS NAME...
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: resolveloop PAUSE_MS NAME...")
		os.Exit(2)
	}
	ms, err := strconv.Atoi(os.Args[1])
	if err != nil || ms < 0 {
		fmt.Fprintf(os.Stderr, "resolveloop: pause %q: not a number of milliseconds\n", os.Args[1])
		os.Exit(2)
	}
	pause := time.Duration(ms) * time.Millisecond
	r := &net.Resolver{PreferGo: true}
	for {
		for _, name := range os.Args[2:] {
			fmt.Println(lookup(r, name))
			time.Sleep(pause)
		}
	}
}

// lookup resolves name to IPv4 addresses and formats the result line. A
// lookup is bounded at 30 s, well past the resolver's own retries.
func lookup(r *net.Resolver, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	ips, err := r.LookupIP(ctx, "ip4", name)
	took := time.Since(start).Milliseconds()
	at := time.Now().UnixMilli()
	if err != nil {
		return fmt.Sprintf("%d %s fail %d %s", at, name, took, err)
	}
	addrs := make([]string, 0, len(ips))
	for _, ip := range ips {
		addrs = append(addrs, ip.String())
	}
	slices.Sort(addrs)
	addrs = slices.Compact(addrs)
	return fmt.Sprintf("%d %s ok %d %s", at, name, took, strings.Join(addrs, ","))
}
