package testkit

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics is what a registry or a /metrics page holds, one value per
// series: `name{a="x",b="y"}` (labels sorted; no braces without labels) →
// value. A histogram gives name_count{...} and name_sum{...}, a summary
// the same.
type Metrics map[string]float64

// Gather reads g (a prometheus.Registry) and fails t on error.
func Gather(t testing.TB, g prometheus.Gatherer) Metrics {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	return flatten(mfs)
}

// Scrape reads the text exposition at url (http://host:port/metrics) with
// c (nil: a plain client with a 5 s timeout). It returns an error rather
// than failing, so WaitFor can poll a process that is still starting.
func Scrape(c *http.Client, url string) (Metrics, error) {
	if c == nil {
		c = &http.Client{Timeout: 5 * time.Second}
	}
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return ParseText(resp.Body)
}

// ParseText reads a text exposition (a /metrics body).
func ParseText(r io.Reader) (Metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	mfs := make([]*dto.MetricFamily, 0, len(fams))
	for _, mf := range fams {
		mfs = append(mfs, mf)
	}
	return flatten(mfs), nil
}

// Key is the key in Metrics of the series name with labels given as name,
// value pairs, in any order.
func Key(name string, labels ...string) string {
	var pairs []string
	for i := 0; i+1 < len(labels); i += 2 {
		pairs = append(pairs, fmt.Sprintf("%s=%q", labels[i], labels[i+1]))
	}
	if len(pairs) == 0 {
		return name
	}
	sort.Strings(pairs)
	return name + "{" + strings.Join(pairs, ",") + "}"
}

// Sum is the sum over the series of name (name itself, or name{...}).
func (m Metrics) Sum(name string) float64 {
	var sum float64
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			sum += v
		}
	}
	return sum
}

// Want fails t for each series of want that m lacks or holds with another
// value.
func (m Metrics) Want(t testing.TB, want map[string]float64) {
	t.Helper()
	for series, w := range want {
		if got, ok := m[series]; !ok || got != w {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, w)
		}
	}
}

// Has reports whether m holds a series of name.
func (m Metrics) Has(name string) bool {
	for k := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			return true
		}
	}
	return false
}

func flatten(mfs []*dto.MetricFamily) Metrics {
	out := Metrics{}
	for _, mf := range mfs {
		name := mf.GetName()
		for _, m := range mf.GetMetric() {
			labels := make([]string, 0, len(m.GetLabel()))
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(labels)
			key := func(suffix string) string {
				if len(labels) == 0 {
					return name + suffix
				}
				return name + suffix + "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.GetCounter() != nil:
				out[key("")] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[key("")] = m.GetGauge().GetValue()
			case m.GetUntyped() != nil:
				out[key("")] = m.GetUntyped().GetValue()
			case m.GetHistogram() != nil:
				out[key("_count")] = float64(m.GetHistogram().GetSampleCount())
				out[key("_sum")] = m.GetHistogram().GetSampleSum()
			case m.GetSummary() != nil:
				out[key("_count")] = float64(m.GetSummary().GetSampleCount())
				out[key("_sum")] = m.GetSummary().GetSampleSum()
			}
		}
	}
	return out
}

// GetOK is nil when GET url with c (nil: a plain client with a 5 s
// timeout) answers 200, such as a /readyz; else the error or the status.
func GetOK(c *http.Client, url string) error {
	if c == nil {
		c = &http.Client{Timeout: 5 * time.Second}
	}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return nil
}

// Value is g's value of the series key (a name, or Key's form); it fails
// t when g has no such series.
func Value(t testing.TB, g prometheus.Gatherer, key string) float64 {
	t.Helper()
	v, ok := Gather(t, g)[key]
	if !ok {
		t.Fatalf("no series %s", key)
	}
	return v
}
