// Command pause is the sandbox ("infra") process of the e2e pod sandboxes.
//
// It holds the pod's namespaces open and does nothing else: it sleeps until
// SIGTERM or SIGINT and, being PID 1 of the pod's PID namespace, reaps every
// child that is reparented to it. It is built with CGO_ENABLED=0 so the image
// needs no libc.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every exited child without blocking. Signals coalesce, so
// one SIGCHLD may stand for several children.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
