package hosts

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/internal/filewatch"
	"github.com/dnsconfigurer/dnsconfigurer/internal/safefile"
)

// Bounds of a hosts file. A file beyond one of them is refused whole (an
// error, the last good table stays in service); a bad line within them is
// only skipped (a Warning).
const (
	// MaxFileSize is the largest hosts file read. ReadFile refuses a bigger
	// file from its size, before reading a byte.
	MaxFileSize = 16 << 20
	// MaxLineLength is the longest line, in bytes, without its line end.
	MaxLineLength = 64 << 10
	// MaxEntries is the most (address, name) pairs a table holds, file and
	// overrides together, duplicates counted once. Each pair costs one
	// forward record and one PTR record.
	MaxEntries = 100_000
	// MaxWarnings is the most warnings Parse lists one by one; the rest
	// are summed up in one last Warning with Line 0.
	MaxWarnings = 100
)

// DefaultTTL is the TTL of the records when Config.TTL is zero (CoreDNS's
// hosts plugin default).
const DefaultTTL = 3600 * time.Second

// Errors that refuse a whole file. They are wrapped with the file name or
// the line number; check them with errors.Is.
var (
	ErrTooLarge       = errors.New("hosts: file larger than 16 MiB")
	ErrNotRegular     = errors.New("hosts: not a regular file")
	ErrLineTooLong    = errors.New("hosts: line longer than 65536 bytes")
	ErrTooManyEntries = errors.New("hosts: more than 100000 entries")
)

// Warning is a problem with one line of a hosts file: the line, or the one
// name of it the message quotes, was skipped and the rest of the file was
// used.
type Warning struct {
	// Line is the 1-based line number; 0 for the summary of the warnings
	// beyond MaxWarnings.
	Line int
	// Message quotes the offending field: `"300.1.1.1": not an IP address`.
	Message string
}

// String is `line 7: "300.1.1.1": not an IP address`.
func (w Warning) String() string {
	if w.Line == 0 {
		return w.Message
	}
	return fmt.Sprintf("line %d: %s", w.Line, w.Message)
}

// pair is one (address, name) of the file: name lowercase and fully
// qualified, address unmapped and without zone.
type pair struct {
	addr netip.Addr
	name string
}

// parsed is the content of a hosts file.
type parsed struct {
	pairs    []pair    // in file order, without duplicates
	warnings []Warning // at most MaxWarnings+1
	problems int       // every warning, listed or not
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// parse reads a hosts file from r within the bounds.
func parse(r io.Reader) (parsed, error) {
	var p parsed
	cr := &countingReader{r: io.LimitReader(r, MaxFileSize+1)}
	sc := bufio.NewScanner(cr)
	// Room for the longest line, its "\r\n" and one byte more to see that
	// a line is too long.
	sc.Buffer(make([]byte, 0, 4096), MaxLineLength+3)
	seen := map[pair]struct{}{}
	warn := func(line int, format string, args ...any) {
		p.problems++
		if len(p.warnings) < MaxWarnings {
			p.warnings = append(p.warnings, Warning{Line: line, Message: fmt.Sprintf(format, args...)})
		}
	}
	line := 0
	for sc.Scan() {
		line++
		text := sc.Bytes()
		if len(text) > MaxLineLength {
			return parsed{}, fmt.Errorf("line %d: %w", line, ErrLineTooLong)
		}
		if i := bytes.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		fields := strings.Fields(string(text))
		if len(fields) == 0 {
			continue
		}
		addr, err := parseAddr(fields[0])
		if err != nil {
			warn(line, "%q: %v", fields[0], err)
			continue
		}
		if len(fields) == 1 {
			warn(line, "%q: no host name", fields[0])
			continue
		}
		for _, f := range fields[1:] {
			name, err := normalizeName(f)
			if err != nil {
				warn(line, "%q: %v", f, err)
				continue
			}
			pr := pair{addr: addr, name: name}
			if _, dup := seen[pr]; dup {
				continue
			}
			if len(p.pairs) == MaxEntries {
				return parsed{}, fmt.Errorf("line %d: %w", line, ErrTooManyEntries)
			}
			seen[pr] = struct{}{}
			p.pairs = append(p.pairs, pr)
		}
	}
	if cr.n > MaxFileSize {
		return parsed{}, ErrTooLarge
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return parsed{}, fmt.Errorf("line %d: %w", line+1, ErrLineTooLong)
		}
		return parsed{}, fmt.Errorf("read: %w", err)
	}
	if n := p.problems - len(p.warnings); n > 0 {
		p.warnings = append(p.warnings, Warning{Message: fmt.Sprintf("%d more problems not listed", n)})
	}
	return p, nil
}

// parseAddr parses the address field of a line. An IPv6 zone is dropped
// (it means nothing in a DNS answer) and an IPv4-mapped IPv6 address is
// its IPv4 address.
func parseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, errors.New("not an IP address")
	}
	return a.WithZone("").Unmap(), nil
}

// normalizeName checks a host name and returns it lowercase and fully
// qualified: at most 253 characters without the final dot, labels of 1 to
// 63 letters, digits, hyphens and underscores.
func normalizeName(s string) (string, error) {
	n := strings.TrimSuffix(s, ".")
	if n == "" {
		return "", errors.New("not a host name")
	}
	if len(n) > 253 {
		return "", fmt.Errorf("longer than 253 characters (%d)", len(n))
	}
	label := 0
	for i := 0; i < len(n); i++ {
		switch c := n[i]; {
		case c == '.':
			if label == 0 {
				return "", errors.New("empty label")
			}
			label = 0
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
			label++
			if label > 63 {
				return "", errors.New("label longer than 63 characters")
			}
		default:
			return "", fmt.Errorf("invalid character %q", n[i:i+1])
		}
	}
	if label == 0 {
		return "", errors.New("empty label")
	}
	return strings.ToLower(n) + ".", nil
}

// Parse reads a hosts file from r and builds its Table with the defaults
// (Config{}). Bad lines are skipped and returned as warnings; an error
// (a bound exceeded, a read error) refuses the whole file.
func Parse(r io.Reader) (*Table, []Warning, error) {
	return ParseConfig(r, Config{})
}

// ParseConfig is Parse with a Config: its TTL, reverse setting and
// overrides. An invalid cfg is an error (Config.Validate's).
func ParseConfig(r io.Reader, cfg Config) (*Table, []Warning, error) {
	c, err := cfg.compile()
	if err != nil {
		return nil, nil, err
	}
	p, err := parse(r)
	if err != nil {
		return nil, nil, err
	}
	t, err := build(p, c)
	if err != nil {
		return nil, nil, err
	}
	return t, p.warnings, nil
}

// readFile reads path, at most MaxFileSize bytes, without blocking on what
// is not a regular file: the file is opened non-blocking (a named pipe
// without a writer would block the open) and anything but a regular file is
// ErrNotRegular; a file over MaxFileSize is ErrTooLarge from its size,
// before a byte is read, and one that grows past it while read is
// ErrTooLarge too. It also returns what tells this version of the file from
// the next. Errors name the file.
func readFile(path string) ([]byte, filewatch.Stamp, error) {
	data, fi, err := safefile.Read(path, MaxFileSize)
	switch {
	case errors.Is(err, safefile.ErrTooLarge):
		return nil, filewatch.Stamp{}, fmt.Errorf("%w: %w", ErrTooLarge, err)
	case errors.Is(err, safefile.ErrNotRegular):
		return nil, filewatch.Stamp{}, fmt.Errorf("%w: %w", ErrNotRegular, err)
	case err != nil:
		return nil, filewatch.Stamp{}, err
	}
	return data, filewatch.StampOf(fi), nil
}
