package forward

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

func TestRouter(t *testing.T) {
	r, err := NewRouter([]Route{
		{Zone: ".", Upstream: testkit.Named("default")},
		{Zone: "corp.example", Except: []string{"public.corp.example."}, Upstream: testkit.Named("corp")},
		{Zone: "lab.corp.example.", Upstream: testkit.Named("lab")},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, want string }{
		{"www.example.org.", "default"},
		{"db.corp.example.", "corp"},
		{"CORP.EXAMPLE.", "corp"},
		{"x.lab.corp.example.", "lab"},
		{"www.public.corp.example.", "default"}, // excepted: the next less specific route
		{"notcorp.example.", "default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reply, err := r.Exchange(context.Background(), new(dns.Msg).SetQuestion(tc.name, dns.TypeA))
			if err != nil || reply.Answer[0].(*dns.TXT).Txt[0] != tc.want {
				t.Fatalf("%v %v, want %s", reply, err, tc.want)
			}
		})
	}
	stub, err := NewRouter([]Route{{Zone: "corp.example", Upstream: testkit.Named("corp")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stub.Exchange(context.Background(), new(dns.Msg).SetQuestion("example.org.", dns.TypeA)); !errors.Is(err, ErrNoUpstream) {
		t.Fatalf("no route: %v, want ErrNoUpstream", err)
	}
}

func TestRouterErrors(t *testing.T) {
	_, err := NewRouter([]Route{
		{Zone: "a.example", Upstream: testkit.Named("x")},
		{Zone: "A.example.", Upstream: testkit.Named("y")},
		{Zone: "b..example", Upstream: testkit.Named("z")},
		{Zone: "c.example", Except: []string{"d.example"}, Upstream: testkit.Named("z")},
		{Zone: "e.example"},
	})
	for _, want := range []string{`routes[1].zone: "A.example." is also routes[0]'s`, `routes[2].zone: "b..example" is not a domain name`,
		`routes[3].except[0]: "d.example" is not a name inside "c.example."`, "routes[4].upstream: none"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}
