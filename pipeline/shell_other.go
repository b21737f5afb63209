//go:build !unix

package pipeline

import "os/exec"

// setProcessGroup: without process groups, the context kills the shell
// only.
func setProcessGroup(*exec.Cmd) {}
