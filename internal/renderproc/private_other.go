//go:build !unix

package renderproc

import "io/fs"

// checkPrivate: without Unix permissions (Windows), the user cache
// directory, in the user's profile, is private by its access control list.
func checkPrivate(fs.FileInfo) error { return nil }
