//go:build !unix

package mcp

import "os/exec"

// inGroup does nothing where there are no process groups.
func inGroup(*exec.Cmd) {}

// killGroup kills the server process only: where there are no process
// groups, what it started may outlive it (SECURITY.md says so).
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill() // already gone: nothing to do
	}
}
