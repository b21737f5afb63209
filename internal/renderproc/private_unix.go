//go:build unix

package renderproc

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// checkPrivate refuses a directory that another user owns or can write.
func checkPrivate(fi fs.FileInfo) error {
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("other users can write it (%s): chmod 700 it", perm)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("no owner in %T", fi.Sys())
	}
	if uid := os.Geteuid(); int(st.Uid) != uid {
		return fmt.Errorf("owned by user %d, not by %d", st.Uid, uid)
	}
	return nil
}
