//go:build linux && amd64

package containerd

// sysSetns is setns(2) on linux/amd64; package syscall does not name it.
const sysSetns = 308
