package autopath

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestOption(t *testing.T) {
	v := OptionValue("shop", "cluster.local.", []string{"corp.example", "cluster.local"})
	if v != "shop.svc.cluster.local,svc.cluster.local,cluster.local,corp.example" {
		t.Fatalf("OptionValue = %q", v)
	}
	list, err := ParseOption([]byte(v))
	if err != nil || !reflect.DeepEqual(list, []string{"shop.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"}) {
		t.Fatalf("ParseOption = %v, %v", list, err)
	}
	many := strings.TrimSuffix(strings.Repeat("a.example,", 32), ",")
	if l, err := ParseOption([]byte(many)); err != nil || len(l) != 32 {
		t.Errorf("32 entries: %v", err)
	}
	if _, err := ParseOption([]byte(many + ",b.example")); !errors.Is(err, ErrOptionTooMany) {
		t.Errorf("33 entries: %v", err)
	}
	long := strings.Repeat("x", 63) + "." + strings.Repeat("y", 63)        // 127 characters
	last := strings.Repeat("x", 63) + "." + strings.Repeat("y", 62) + ".a" // 128
	fits := strings.Repeat(long+",", 15) + last
	if len(fits) != 2048 {
		t.Fatalf("fixture is %d", len(fits))
	}
	if l, err := ParseOption([]byte(fits)); err != nil || len(l) != 16 {
		t.Errorf("2048 characters: %d entries, %v", len(l), err)
	}
	if _, err := ParseOption([]byte(fits + "z")); !errors.Is(err, ErrOptionTooLong) {
		t.Errorf("2049 characters: %v", err)
	}
	for _, bad := range []string{"a..b", ",a", "a b", "a\x00", strings.Repeat("q", 64) + ".example", "ok.example,bad!"} {
		if _, err := ParseOption([]byte(bad)); err == nil {
			t.Errorf("ParseOption(%q) accepted", bad)
		}
	}
	if l, err := ParseOption(nil); err != nil || l != nil {
		t.Errorf("empty option: %v %v", l, err)
	}
	// The option is kubelet's ClusterFirst search list, limits included,
	// so what the node-local stage sends always parses.
	host := strings.Split(strings.TrimSuffix(strings.Repeat("h.example,", 40), ","), ",")
	for i := range host {
		host[i] = string(rune('a'+i%26)) + host[i][1:] + string(rune('0'+i/26))
	}
	if l, err := ParseOption([]byte(OptionValue("shop", "cluster.local", host))); err != nil || len(l) != 32 {
		t.Errorf("option over 40 host searches: %d entries, %v", len(l), err)
	}
}

func TestCandidates(t *testing.T) {
	got := Candidates("web.", []string{"shop.svc.cluster.local", "svc.cluster.local.", "x.ap.k8s.io"})
	want := []string{"web.shop.svc.cluster.local.", "web.svc.cluster.local.", "web."}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Candidates = %v", got)
	}
}

func TestCheckOptionCode(t *testing.T) {
	for _, tc := range []struct {
		code uint
		ok   bool
	}{{0, false}, {12, false}, {65000, false}, {65001, true}, {65534, true}, {65535, false}, {1 << 20, false}} {
		t.Run(fmt.Sprint(tc.code), func(t *testing.T) {
			err := CheckOptionCode(tc.code)
			if (err == nil) != tc.ok {
				t.Fatalf("CheckOptionCode(%d) = %v, want ok %v", tc.code, err, tc.ok)
			}
			if err != nil && !strings.Contains(err.Error(), fmt.Sprint(tc.code)) {
				t.Errorf("error %q does not name the code", err)
			}
		})
	}
}
