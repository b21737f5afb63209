//go:build !unix

package mockllm

import "os/exec"

// setProcessGroup: without process groups, there is nothing to set.
func setProcessGroup(*exec.Cmd) {}

// killGroup kills c alone, without process groups.
func killGroup(c *exec.Cmd) error { return c.Process.Kill() }
