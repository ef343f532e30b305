package testkit

import (
	"os/exec"
	"runtime"
	"sync"
)

// StartLocked starts cmd from an OS thread that stays locked to a
// goroutine until release is called. A parent-death signal (Pdeathsig)
// follows the thread that forked, not the process: a thread that ends, as
// InNetNS's do, would take the child with it. Call release once the child
// has exited or may die with the test process.
func StartLocked(cmd *exec.Cmd) (release func(), err error) {
	started, done := make(chan error, 1), make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		started <- cmd.Start()
		<-done
	}()
	if err := <-started; err != nil {
		close(done)
		return nil, err
	}
	return sync.OnceFunc(func() { close(done) }), nil
}
