package cri

import "testing"

// TestConnBudget: two descriptors a connection after the reserve.
func TestConnBudget(t *testing.T) {
	for _, tc := range []struct {
		nofile uint64
		want   int
	}{
		{0, 1}, {FDReserve, 1}, {1024, (1024 - FDReserve) / 2}, {1 << 20, (1<<20 - FDReserve) / 2},
	} {
		if got := ConnBudget(tc.nofile); got != tc.want {
			t.Errorf("ConnBudget(%d) = %d, want %d", tc.nofile, got, tc.want)
		}
	}
}
