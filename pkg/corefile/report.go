package corefile

import (
	"fmt"
	"io"
)

// Status is what became of a directive.
type Status string

// The statuses of a Finding.
const (
	// Converted: the ServerConfiguration does the same.
	Converted Status = "converted"
	// Differs: converted, with a difference the Reason names.
	Differs Status = "differs"
	// Dropped: not expressible; the Reason says why and the workaround.
	Dropped Status = "dropped"
)

// Finding is the fate of one directive (or option) of the input.
type Finding struct {
	// Where is "file:line", or a ConfigMap key.
	Where  string
	Plugin string
	Status Status
	Reason string
}

// AnyDropped reports whether any finding was dropped.
func AnyDropped(fs []Finding) bool {
	for _, f := range fs {
		if f.Status == Dropped {
			return true
		}
	}
	return false
}

// WriteReport writes one line per finding, then a summary line.
func WriteReport(w io.Writer, fs []Finding) error {
	width, pw := 0, 0
	for _, f := range fs {
		width, pw = max(width, len(f.Where)), max(pw, len(f.Plugin))
	}
	n := map[Status]int{}
	for _, f := range fs {
		n[f.Status]++
		if _, err := fmt.Fprintf(w, "%-*s  %-*s  %-9s  %s\n", width, f.Where, pw, f.Plugin, f.Status, f.Reason); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "%d directives: %d converted, %d differ, %d dropped\n",
		len(fs), n[Converted], n[Differs], n[Dropped])
	return err
}

// rank orders statuses from best to worst.
var rank = map[Status]int{Converted: 0, Differs: 1, Dropped: 2}

// merge makes one finding of those of one directive (same place and
// plugin): the worst status, the reasons joined.
func merge(fs []Finding) []Finding {
	var out []Finding
	at := map[[2]string]int{}
	for _, f := range fs {
		k := [2]string{f.Where, f.Plugin}
		i, seen := at[k]
		if !seen {
			at[k] = len(out)
			out = append(out, f)
			continue
		}
		m := &out[i]
		if rank[f.Status] > rank[m.Status] {
			m.Status = f.Status
		}
		switch {
		case m.Reason == "":
			m.Reason = f.Reason
		case f.Reason == "":
		case f.Status == Converted:
			// What was converted reads first, then what differs.
			m.Reason = f.Reason + "; " + m.Reason
		default:
			m.Reason += "; " + f.Reason
		}
	}
	return out
}
