package ocitest

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// start starts cmd so that the kernel kills it when the test binary dies
// (Pdeathsig): a binary killed by go test's -timeout runs no t.Cleanup,
// and would leave its registries listening. Pdeathsig fires when the
// thread that started the process exits, not the process, so every start
// happens on one goroutine locked to its thread for the binary's life.
func start(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	done := make(chan error)
	starter() <- func() { done <- cmd.Start() }
	return <-done
}

var starter = sync.OnceValue(func() chan<- func() {
	c := make(chan func())
	go func() {
		runtime.LockOSThread() // never unlocked: the thread lives as long as the binary
		for f := range c {
			f()
		}
	}()
	return c
})
