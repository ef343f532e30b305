package corefile

// bareRefused are the plugins CoreDNS 1.15 refuses at setup when they
// come alone, with neither arguments nor a block, and its words, as its
// binary prints them for ". { PLUGIN }" (TestBareRefused;
// test/convert's TestBarePlugins runs CoreDNS on each). kubernetes,
// route53 and clouddns are refused there for want of credentials, not of
// arguments; k8s_external for want of a kubernetes in its block, which
// k8sexternal.go checks.
var bareRefused = map[string]string{
	"autopath":  "no resolv-conf specified",
	"bind":      "at least one address or interface name is expected",
	"dnstap":    argErr("dnstap").Error(),
	"dynupdate": "file is required",
	"file":      argErr("file").Error(),
	"forward":   argErr("forward").Error(),
	"geoip":     argErr("geoip").Error(),
	"grpc":      argErr("grpc").Error(),
	"header":    argErr("header").Error(),
	"on":        argErr("on").Error(),
	"rewrite":   "no rule type specified for rewrite",
	"root":      argErr("root").Error(),
	"secondary": "secondary zones require a transfer from property",
	"sign":      argErr("sign").Error(),
	"template":  argErr("template").Error(),
	"timeouts":  "timeouts block with no timeouts specified",
	"tls":       "ACME requires at least one domain",
	"transfer":  "'to' is required",
	"view":      argErr("view").Error(),
}

// refuseBare refuses d when CoreDNS refuses it bare; ok is false then.
func (c *converter) refuseBare(d Directive) bool {
	reason, refused := bareRefused[d.Name]
	if !refused || len(d.Args) > 0 || len(d.Options) > 0 {
		return true
	}
	c.refuse(d.Where, d.Name, "%s", reason)
	return false
}
