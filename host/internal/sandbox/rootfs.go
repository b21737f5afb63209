package sandbox

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"syscall"
	"time"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/sys"
)

// rootFS is a granted directory as a WASI file system, confined to it.
//
// wazero's own directory mounts are not a jail (its documentation says so):
// they resolve a path with the operating system from the directory, so a
// symbolic link in it, or one the guest creates, leads anywhere on the
// host. rootFS resolves every path with os.Root instead, which refuses to
// leave the directory, and refuses to create symbolic links at all (a link
// planted in a writable grant would be a trap for host processes that later
// follow it).
//
// To keep wazero's complete file semantics (directory reads, seeks,
// non-blocking I/O, flags), OpenFile lets os.Root open the file first, which
// also creates or truncates it inside the directory, then opens it again
// through wazero's directory file system without create or truncate, and
// keeps that second handle only if it is the very same file. A process
// swapping symbolic links in the directory between the two opens can make
// the open fail, never reach another file. Only regular files and
// directories open: a named pipe or a device in a granted directory would
// block the guest's call in the host, past its deadline.
type rootFS struct {
	root     *os.Root
	dir      string             // the host directory
	wz       experimentalsys.FS // wazero's file system on dir, for the second open
	readOnly bool
	log      func() *slog.Logger
}

func openRootFS(dir string, readOnly bool, log func() *slog.Logger) (*rootFS, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &rootFS{root: root, dir: dir, wz: sysfs.DirFS(dir), readOnly: readOnly, log: log}, nil
}

func (r *rootFS) close() error { return r.root.Close() }

// String names the directory, as wazero's error messages show a mount.
func (r *rootFS) String() string { return r.dir }

// rel is wazero's path (cleaned, relative to the mount, "" for its root) as
// os.Root wants it.
func rel(p string) string {
	if p == "" || p == "/" {
		return "."
	}
	return p
}

// errno maps an error of os.Root to WASI's errno. An error that is no
// system error is os.Root refusing to leave the directory: EPERM, logged,
// since only a guest probing the sandbox or a link pointing out of the
// grant causes it.
func (r *rootFS) errno(op, p string, err error) experimentalsys.Errno {
	if err == nil {
		return 0
	}
	var en syscall.Errno
	if errors.As(err, &en) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrExist) || errors.Is(err, fs.ErrPermission) {
		return experimentalsys.UnwrapOSError(err)
	}
	r.log().Warn("guest file access outside its granted directory refused", "op", op, "path", p, "dir", r.dir, "error", err)
	return experimentalsys.EPERM
}

// writes reports whether an open with flag may change the file.
func writes(flag experimentalsys.Oflag) bool {
	return flag&(experimentalsys.O_WRONLY|experimentalsys.O_RDWR|experimentalsys.O_CREAT|experimentalsys.O_TRUNC|experimentalsys.O_APPEND) != 0
}

func (r *rootFS) OpenFile(p string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	if r.readOnly && writes(flag) {
		return nil, experimentalsys.EROFS
	}
	osFlag := os.O_RDONLY
	switch {
	case flag&experimentalsys.O_RDWR != 0:
		osFlag = os.O_RDWR
	case flag&experimentalsys.O_WRONLY != 0:
		osFlag = os.O_WRONLY
	}
	if flag&experimentalsys.O_CREAT != 0 {
		osFlag |= os.O_CREATE
	}
	if flag&experimentalsys.O_EXCL != 0 {
		osFlag |= os.O_EXCL
	}
	if flag&experimentalsys.O_TRUNC != 0 {
		osFlag |= os.O_TRUNC
	}
	// O_NONBLOCK: opening a named pipe blocks until the other end opens
	// (for ever), and reading a device may too; such files are refused below.
	confined, err := r.root.OpenFile(rel(p), osFlag|syscall.O_NONBLOCK, perm)
	if err != nil {
		return nil, r.errno("open", p, err)
	}
	defer confined.Close()
	want, err := confined.Stat()
	if err != nil {
		return nil, experimentalsys.UnwrapOSError(err)
	}
	if !want.Mode().IsRegular() && !want.IsDir() {
		r.log().Warn("guest open of a file that is neither regular nor a directory refused (a pipe, a device or a socket could block it)",
			"path", p, "dir", r.dir, "mode", want.Mode().String())
		return nil, experimentalsys.EPERM
	}
	f, errno := r.wz.OpenFile(p, flag&^(experimentalsys.O_CREAT|experimentalsys.O_EXCL|experimentalsys.O_TRUNC)|experimentalsys.O_NONBLOCK, perm)
	if errno != 0 {
		return nil, errno
	}
	got, errno := f.Stat()
	if wst := sys.NewStat_t(want); errno != 0 || got.Dev != wst.Dev || got.Ino != wst.Ino {
		f.Close()
		r.log().Warn("guest file open refused: the path changed to another file while it was opened", "path", p, "dir", r.dir)
		return nil, experimentalsys.EPERM
	}
	if r.readOnly {
		return readOnlyFile{f}, 0
	}
	return f, 0
}

func (r *rootFS) Lstat(p string) (sys.Stat_t, experimentalsys.Errno) {
	fi, err := r.root.Lstat(rel(p))
	if err != nil {
		return sys.Stat_t{}, r.errno("lstat", p, err)
	}
	return sys.NewStat_t(fi), 0
}

func (r *rootFS) Stat(p string) (sys.Stat_t, experimentalsys.Errno) {
	fi, err := r.root.Stat(rel(p))
	if err != nil {
		return sys.Stat_t{}, r.errno("stat", p, err)
	}
	return sys.NewStat_t(fi), 0
}

func (r *rootFS) Mkdir(p string, perm fs.FileMode) experimentalsys.Errno {
	if r.readOnly {
		return experimentalsys.EROFS
	}
	errno := r.errno("mkdir", p, r.root.Mkdir(rel(p), perm))
	if errno == experimentalsys.ENOTDIR {
		errno = experimentalsys.ENOENT // as wazero's own directory file system answers
	}
	return errno
}

func (r *rootFS) Chmod(p string, perm fs.FileMode) experimentalsys.Errno {
	if r.readOnly {
		return experimentalsys.EROFS
	}
	return r.errno("chmod", p, r.root.Chmod(rel(p), perm))
}

func (r *rootFS) Rename(from, to string) experimentalsys.Errno {
	if r.readOnly {
		return experimentalsys.EROFS
	}
	return r.errno("rename", from, r.root.Rename(rel(from), rel(to)))
}

func (r *rootFS) Rmdir(p string) experimentalsys.Errno {
	if r.readOnly {
		return experimentalsys.EROFS
	}
	fi, err := r.root.Lstat(rel(p))
	if err != nil {
		return r.errno("rmdir", p, err)
	}
	if !fi.IsDir() {
		return experimentalsys.ENOTDIR
	}
	return r.errno("rmdir", p, r.root.Remove(rel(p)))
}

func (r *rootFS) Unlink(p string) experimentalsys.Errno {
	if r.readOnly {
		return experimentalsys.EROFS
	}
	fi, err := r.root.Lstat(rel(p))
	if err != nil {
		return r.errno("unlink", p, err)
	}
	if fi.IsDir() {
		return experimentalsys.EISDIR
	}
	return r.errno("unlink", p, r.root.Remove(rel(p)))
}

func (r *rootFS) Link(oldPath, newPath string) experimentalsys.Errno {
	if r.readOnly {
		return experimentalsys.EROFS
	}
	return r.errno("link", oldPath, r.root.Link(rel(oldPath), rel(newPath)))
}

// Symlink is refused: see rootFS.
func (r *rootFS) Symlink(oldPath, linkName string) experimentalsys.Errno {
	if r.readOnly {
		return experimentalsys.EROFS
	}
	r.log().Warn("guest symbolic link creation refused", "link", linkName, "target", oldPath, "dir", r.dir)
	return experimentalsys.EPERM
}

func (r *rootFS) Readlink(p string) (string, experimentalsys.Errno) {
	dst, err := r.root.Readlink(rel(p))
	if err != nil {
		return "", r.errno("readlink", p, err)
	}
	return dst, 0
}

func (r *rootFS) Utimens(p string, atim, mtim int64) experimentalsys.Errno {
	if r.readOnly {
		return experimentalsys.EROFS
	}
	return r.errno("utimens", p, r.root.Chtimes(rel(p), utime(atim), utime(mtim)))
}

// utime is a WASI timestamp as os.Chtimes takes it: the zero time leaves
// the file's time as it is.
func utime(ns int64) time.Time {
	if ns == experimentalsys.UTIME_OMIT {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// readOnlyFile refuses every change through a file of a read-only grant,
// even those the operating system allows on a file opened for reading
// (its times).
type readOnlyFile struct{ experimentalsys.File }

func (readOnlyFile) Write([]byte) (int, experimentalsys.Errno) { return 0, experimentalsys.EBADF }

func (readOnlyFile) Pwrite([]byte, int64) (int, experimentalsys.Errno) {
	return 0, experimentalsys.EBADF
}

func (readOnlyFile) Truncate(int64) experimentalsys.Errno { return experimentalsys.EBADF }

func (readOnlyFile) Utimens(int64, int64) experimentalsys.Errno { return experimentalsys.EROFS }
