package attack

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// seedsFile keeps the seeds of failed scenarios, one a line with a
// comment; every run replays them first.
const seedsFile = "testdata/seeds"

// readSeeds returns the seeds of path, in order; a missing file has none.
func readSeeds(path string) ([]uint64, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var seeds []uint64
	s := bufio.NewScanner(f)
	for n := 1; s.Scan(); n++ {
		line, _, _ := strings.Cut(s.Text(), "#")
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		seed, err := strconv.ParseUint(line, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, n, err)
		}
		seeds = append(seeds, seed)
	}
	return seeds, s.Err()
}

var seedsMu sync.Mutex

// keepSeed appends seed with comment to path, unless it is there.
func keepSeed(path string, seed uint64, comment string) error {
	seedsMu.Lock()
	defer seedsMu.Unlock()
	seeds, err := readSeeds(path)
	if err != nil {
		return err
	}
	for _, s := range seeds {
		if s == seed {
			return nil
		}
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%d # %s\n", seed, strings.ReplaceAll(comment, "\n", " "))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
