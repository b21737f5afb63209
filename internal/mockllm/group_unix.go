//go:build unix

package mockllm

import (
	"os/exec"
	"syscall"
)

// setProcessGroup runs c in a process group of its own, for killGroup.
func setProcessGroup(c *exec.Cmd) {
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup kills c's process group: whatever node started ends with it.
func killGroup(c *exec.Cmd) error {
	return syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
}
