//go:build !unix

package pipeline

import "os/exec"

// setProcessGroup: without process groups, the context kills the shell
// only.
func setProcessGroup(*exec.Cmd) {}

// killGroup: without process groups, there is nothing left to kill.
func killGroup(*exec.Cmd) error { return nil }
