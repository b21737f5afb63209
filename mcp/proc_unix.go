//go:build unix

package mcp

import (
	"os/exec"
	"syscall"
)

// inGroup makes cmd the leader of a process group of its own, so that
// killGroup reaches what it starts too: `npx` runs npm, which runs a shell,
// which runs node, and signalling the first alone leaves the others running.
func inGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killGroup kills cmd's process group (the server and every process it
// started that did not leave the group).
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // already gone: nothing to do
	}
}
