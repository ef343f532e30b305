//go:build !linux

package startcheck

import (
	"errors"
	"os"
)

// memFile: no files in memory here; the stand-ins go to a temporary
// directory.
func memFile(string) (*os.File, error) { return nil, errors.New("no memfd") }
