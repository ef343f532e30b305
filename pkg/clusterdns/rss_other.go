//go:build !linux

package clusterdns

func releaseStartupPages() int64 { return 0 }
