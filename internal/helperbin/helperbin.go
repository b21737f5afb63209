// Package helperbin finds the programs morph runs beside itself
// (morph-render, morph-temporal): each is a program of its own so that
// morph does not link what only one command needs.
package helperbin

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// ErrNotFound is Find's error when there is no such program.
var ErrNotFound = errors.New("not found")

// Find is the program to run: $envVar (a path, or a name looked up on
// PATH) when set, else the one beside the running executable (bin/PROGRAM
// beside bin/morph, as make build puts them), else the one on PATH. Its
// error, ErrNotFound, says how to get one; build says how it is built.
func Find(program, envVar, build string) (string, error) {
	if p := os.Getenv(envVar); p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("%s %w: %s=%s: %w", program, ErrNotFound, envVar, p, err)
		}
		return path, nil
	}
	beside := ""
	if exe, err := os.Executable(); err == nil {
		if exe, err = filepath.EvalSymlinks(exe); err == nil {
			beside = filepath.Join(filepath.Dir(exe), program)
			if path, err := exec.LookPath(beside); err == nil {
				return path, nil
			}
		}
	}
	if path, err := exec.LookPath(program); err == nil {
		return path, nil
	}
	return "", fmt.Errorf("%s %w (looked for %s, then on PATH): `make build` builds bin/%s beside bin/morph; %s; or set %s to its path",
		program, ErrNotFound, beside, program, build, envVar)
}
