package v1alpha1

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

func TestConfigErrorf(t *testing.T) {
	tests := []struct {
		name            string
		err             error
		msg             string
		marked, wrapsFS bool
	}{
		{"alone", ConfigErrorf("hosts: %q missing", "/x"), `hosts: "/x" missing`, true, false},
		{"wrapping a cause", ConfigErrorf("hosts: %w", fs.ErrNotExist), "hosts: file does not exist", true, true},
		{"wrapped again", fmt.Errorf("start: %w", ConfigErrorf("ttl")), "start: ttl", true, false},
		{"a plain error", errors.New("register"), "register", false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err.Error() != tc.msg {
				t.Errorf("message %q, want %q", tc.err.Error(), tc.msg)
			}
			if errors.Is(tc.err, ErrConfig) != tc.marked {
				t.Errorf("errors.Is(ErrConfig) = %v, want %v", !tc.marked, tc.marked)
			}
			if errors.Is(tc.err, fs.ErrNotExist) != tc.wrapsFS {
				t.Errorf("errors.Is(fs.ErrNotExist) = %v, want %v", !tc.wrapsFS, tc.wrapsFS)
			}
		})
	}
}
