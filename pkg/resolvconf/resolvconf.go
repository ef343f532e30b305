package resolvconf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/dnsconfigurer/dnsconfigurer/internal/safefile"
)

// MaxFileSize is the most kubelet reads of a resolv.conf (utilio.ReadAtMost).
const MaxFileSize = 10 << 20

// ErrTooLarge reports a resolv.conf larger than MaxFileSize.
var ErrTooLarge = safefile.ErrTooLarge

// ErrNotRegular reports a path that names something other than a regular
// file (a named pipe, a device, a socket, a directory): ReadFile refuses it
// rather than block on it or read it without end.
var ErrNotRegular = safefile.ErrNotRegular

// ErrEmptyNameserver reports a "nameserver" line without an address. kubelet
// words it "nameserver list is empty".
var ErrEmptyNameserver = errors.New("nameserver list is empty")

// Config is a parsed resolv.conf: the three things a pod's resolver config is
// made of. Slices are never nil after Parse.
type Config struct {
	Nameservers []string `json:"nameservers"`
	Searches    []string `json:"searches"`
	Options     []string `json:"options"`
}

// ParseError is a problem on one line of a resolv.conf. Parsing goes on past
// it so that every problem is reported, as kubelet aggregates them.
type ParseError struct {
	Line int
	Err  error
}

func (e *ParseError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *ParseError) Unwrap() error { return e.Err }

// Parse reads a resolv.conf with kubelet's rules. On a line-level problem it
// returns the config parsed so far together with an error joining every
// ParseError; callers that follow kubelet treat any error as fatal.
func Parse(r io.Reader) (Config, error) {
	data, err := safefile.ReadAtMost(r, MaxFileSize, 0)
	if err != nil {
		return Config{}, err
	}
	return ParseBytes(data)
}

// Lines are the 1-based line numbers, in the file a Config was parsed
// from, of what it holds: a trace names them.
type Lines struct {
	// Nameservers has the line of each Config.Nameservers entry.
	Nameservers []int `json:"nameservers,omitempty"`
	// Search is the search line that counts (the last one); 0 without.
	Search int `json:"search,omitempty"`
	// Options are the options lines, in order.
	Options []int `json:"options,omitempty"`
}

// ParseBytes is Parse on a buffer already read. It does not apply the size cap.
func ParseBytes(data []byte) (Config, error) { return parse(data, nil) }

// ParseLines is ParseBytes, and the lines each part of the config was
// read from.
func ParseLines(data []byte) (Config, Lines, error) {
	var l Lines
	cfg, err := parse(data, &l)
	return cfg, l, err
}

// parse is ParseBytes, recording the lines in l when it is not nil.
func parse(data []byte, l *Lines) (Config, error) {
	cfg := Config{Nameservers: []string{}, Searches: []string{}, Options: []string{}}
	var errs []error
	line := 0
	for len(data) > 0 {
		line++
		var raw []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			raw, data = data[:i], data[i+1:]
		} else {
			raw, data = data, nil
		}
		text := strings.TrimSpace(string(raw))
		if text == "" || text[0] == '#' {
			continue
		}
		fields := strings.Fields(text)
		switch fields[0] {
		case "nameserver":
			if len(fields) < 2 {
				errs = append(errs, &ParseError{Line: line, Err: ErrEmptyNameserver})
				continue
			}
			cfg.Nameservers = append(cfg.Nameservers, fields[1])
			if l != nil {
				l.Nameservers = append(l.Nameservers, line)
			}
		case "search":
			if l != nil {
				l.Search = line
			}
			cfg.Searches = cfg.Searches[:0:0]
			for _, s := range fields[1:] {
				if s == "." {
					continue
				}
				cfg.Searches = append(cfg.Searches, strings.TrimSuffix(s, "."))
			}
		case "options":
			cfg.Options = appendOptions(cfg.Options, fields[1:])
			if l != nil {
				l.Options = append(l.Options, line)
			}
		}
	}
	return cfg, errors.Join(errs...)
}

// ParseFile reads (ReadFile) and parses path. Errors name the file.
func ParseFile(path string) (Config, error) {
	cfg, _, err := ParseFileLines(path)
	return cfg, err
}

// ParseFileLines is ParseFile, and the lines each part was read from.
func ParseFileLines(path string) (Config, Lines, error) {
	data, err := ReadFile(path)
	if err != nil {
		return Config{}, Lines{}, err
	}
	cfg, l, err := ParseLines(data)
	if err != nil {
		return cfg, l, fmt.Errorf("parse %q: %w", path, err)
	}
	return cfg, l, nil
}

// ReadFile reads path, at most MaxFileSize bytes, without blocking on what
// is not a regular file. The file is opened non-blocking (a named pipe
// without a writer would otherwise block the open for as long as it has
// none) and anything but a regular file is ErrNotRegular. A file whose size
// is over MaxFileSize is ErrTooLarge without a byte read, and one that grows
// while it is read is cut at MaxFileSize+1 bytes and is ErrTooLarge too; the
// buffer is sized from the file, so at most MaxFileSize+1 bytes are held.
// Errors name the file.
func ReadFile(path string) ([]byte, error) {
	data, _, err := safefile.Read(path, MaxFileSize)
	return data, err
}

// OptionName is the part of a resolver option before the first ':'.
func OptionName(opt string) string {
	if i := strings.IndexByte(opt, ':'); i >= 0 {
		return opt[:i]
	}
	return opt
}

// FormatOption renders an option from its name and value as kubelet's
// mergeDNSOptions does: the bare name when the value is empty, else
// "name:value".
func FormatOption(name, value string) string {
	if value == "" {
		return name
	}
	return name + ":" + value
}

// NormalizeOption re-renders opt from its name and value (FormatOption), so
// "ndots:" becomes "ndots". It returns opt itself when nothing changes.
func NormalizeOption(opt string) string {
	if len(opt) > 0 && opt[len(opt)-1] == ':' && strings.IndexByte(opt, ':') == len(opt)-1 {
		return opt[:len(opt)-1]
	}
	return opt
}

// appendOptions is kubelet's parser rule for successive options lines
// (appendOptions in pkg/kubelet/network/dns) with a stable order: both
// sides are keyed by the name before the first ':' (OptionName); an option
// whose name is already present replaces it in place, a new name is
// appended. base is not modified and should hold each name once. A pod's
// dnsConfig.options merge by another rule, in pkg/policy.
func appendOptions(base, opts []string) []string {
	out := make([]string, len(base), len(base)+len(opts))
	copy(out, base)
next:
	for _, o := range opts {
		name := OptionName(o)
		for i, have := range out {
			if OptionName(have) == name {
				out[i] = o
				continue next
			}
		}
		out = append(out, o)
	}
	return out
}

// Format renders cfg the way containerd writes a sandbox resolv.conf: a
// search line, one nameserver line per server, an options line; empty parts
// are omitted.
func Format(cfg Config) string {
	var b strings.Builder
	if len(cfg.Searches) > 0 {
		b.WriteString("search ")
		b.WriteString(strings.Join(cfg.Searches, " "))
		b.WriteByte('\n')
	}
	for _, ns := range cfg.Nameservers {
		b.WriteString("nameserver ")
		b.WriteString(ns)
		b.WriteByte('\n')
	}
	if len(cfg.Options) > 0 {
		b.WriteString("options ")
		b.WriteString(strings.Join(cfg.Options, " "))
		b.WriteByte('\n')
	}
	return b.String()
}

// IsLoopback reports a nameserver on the loopback network (127.0.0.0/8,
// ::1, and IPv4-mapped forms), such as systemd-resolved's 127.0.0.53 stub.
func IsLoopback(ns string) bool {
	a, err := netip.ParseAddr(ns)
	return err == nil && a.Unmap().IsLoopback()
}

// WithoutLoopback is the loopback rule: a node's loopback nameservers are
// never handed to a pod, because a stub listening on the node's loopback
// cannot answer inside a pod's network namespace. It returns cfg without
// them and the servers it removed (nil, and cfg itself, when there are
// none). cfg is not modified.
func WithoutLoopback(cfg Config) (Config, []string) {
	var dropped []string
	for _, ns := range cfg.Nameservers {
		if IsLoopback(ns) {
			dropped = append(dropped, ns)
		}
	}
	if dropped == nil {
		return cfg, nil
	}
	out := cfg
	out.Nameservers = make([]string, 0, len(cfg.Nameservers)-len(dropped))
	for _, ns := range cfg.Nameservers {
		if !IsLoopback(ns) {
			out.Nameservers = append(out.Nameservers, ns)
		}
	}
	return out, dropped
}

// Filled is c with empty slices for nil ones, so that JSON shows [] and
// not null.
func (c Config) Filled() Config {
	return Config{Nameservers: filled(c.Nameservers), Searches: filled(c.Searches), Options: filled(c.Options)}
}

func filled(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
