//go:build unix

package pipeline

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockRunDir takes dir's lock (LockFile, an advisory lock the operating
// system drops with the process, so a crashed run leaves none behind),
// held while a run runs there: two processes running or resuming one run
// at once would each write its checkpoint and stage files over the
// other's. release gives it back.
func lockRunDir(dir string) (release func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRunDir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is in use: another process runs or resumes this run; wait for it to end, or stop it", ErrRunDir, dir)
		}
		return nil, fmt.Errorf("%w: locking %s: %w", ErrRunDir, dir, err)
	}
	return func() { f.Close() }, nil
}
