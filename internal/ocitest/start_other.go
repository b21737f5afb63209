//go:build !linux

package ocitest

import "os/exec"

// start starts cmd; a registry outlives a test binary killed before its
// t.Cleanup ran (Linux kills it with the binary: start_linux.go).
func start(cmd *exec.Cmd) error { return cmd.Start() }
