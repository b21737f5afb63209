//go:build unix

package pipeline

import (
	"os/exec"
	"syscall"
)

// setProcessGroup runs c in a process group of its own, and makes the
// context's cancellation kill the whole group.
func setProcessGroup(c *exec.Cmd) {
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return killGroup(c) }
}

// killGroup kills c's process group: what the command left running in the
// background ends with it.
func killGroup(c *exec.Cmd) error {
	if c.Process == nil {
		return nil
	}
	return syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
}
