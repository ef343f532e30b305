package corefile

import (
	"net/netip"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

// hostsDirective: a hosts file and inline entries (overrides).
func (c *converter) hostsDirective(s scope, d Directive) {
	file := ""
	if len(d.Args) > 0 {
		file = d.Args[0]
	}
	// A zone block's hosts file that the root zone's block reads too
	// answers every zone in CoreDNS as well.
	if len(d.Args) > 1 || !s.main && (file == "" || file != c.mainHosts) {
		c.add(d.Where, d.Name, Differs, "its names are answered for every query, not only in zones %s", strings.Join(append(d.Args[min(1, len(d.Args)):], s.zones...), " "))
	}
	var entries, opts []Option
	for _, o := range d.Options {
		if _, err := netip.ParseAddr(o.Name); err == nil {
			entries = append(entries, o)
		} else {
			opts = append(opts, o)
		}
	}
	if file == "" && len(entries) == 0 {
		file = "/etc/hosts"
	}
	done := []string{}
	switch {
	case file != "" && c.hosts != "" && file == c.cfg.Hosts.File:
		// The file again in another block (kubespray puts it in every
		// block): one hosts.file serves it for all of them.
		done = append(done, "hosts.file "+file+", the same file as at "+c.hosts)
	case file != "" && c.hosts != "":
		c.add(d.Where, d.Name, Dropped, "a second hosts file %s (the first is at %s); workaround: merge the files into one", file, c.hosts)
		return
	case file != "":
		c.hosts = d.Where
		c.cfg.Hosts.File = file
		done = append(done, "hosts.file "+file)
	case len(d.Args) == 0:
		c.add(d.Where, d.Name, Differs, "CoreDNS also reads its container's /etc/hosts here; only the inline entries are served")
	}
	fell := false
	for _, o := range opts {
		switch {
		case o.Name == "ttl" && len(o.Args) == 1:
			c.cfg.Hosts.TTL = v1alpha1.Duration(o.Args[0] + "s")
			done = append(done, "ttl "+o.Args[0]+"s")
		case o.Name == "reload" && len(o.Args) == 1:
			c.cfg.Hosts.Reload = v1alpha1.Duration(o.Args[0])
			done = append(done, "reload "+o.Args[0])
		case o.Name == "fallthrough":
			fell = true
		case o.Name == "no_reverse":
			c.add(o.Where, d.Name, Differs, "no_reverse: PTR records of its addresses are served")
		default:
			c.add(o.Where, d.Name, Dropped, "%s: not supported", o.Name)
		}
	}
	if !fell {
		c.add(d.Where, d.Name, Differs, "names it does not list are forwarded, as with fallthrough; CoreDNS answers them NXDOMAIN")
	}
	n := c.overrides(entries)
	if n > 0 {
		done = append(done, "overrides for the inline entries")
	}
	c.add(d.Where, d.Name, Converted, "%s", strings.Join(done, ", "))
}

// overrides turns inline hosts lines into overrides, one per name.
func (c *converter) overrides(entries []Option) int {
	n := 0
	cluster := fqdn(c.clusterDomain())
	for _, e := range entries {
		for _, name := range e.Args {
			fq := fqdn(name)
			if fq == cluster || strings.HasSuffix(fq, "."+cluster) {
				c.add(e.Where, "hosts", Dropped, "%s: inside the cluster domain, whose names come from the cluster only; workaround: a Service of type ExternalName or with that address", name)
				continue
			}
			found := false
			for i := range c.cfg.Overrides {
				if fqdn(c.cfg.Overrides[i].Name) == fq {
					c.cfg.Overrides[i].Addresses = append(c.cfg.Overrides[i].Addresses, e.Name)
					found = true
				}
			}
			if !found {
				c.cfg.Overrides = append(c.cfg.Overrides, v1alpha1.Override{Name: name, Addresses: []string{e.Name}})
			}
			n++
		}
	}
	return n
}

// hostsFile is the file a block's hosts directive reads, or "".
func hostsFile(b Block) string {
	for _, d := range b.Directives {
		if d.Name == "hosts" && len(d.Args) > 0 {
			return d.Args[0]
		}
	}
	return ""
}
