//go:build !unix

package memory

// mapped is not available on this platform: memories are Go slices.
type mapped struct{ share }

func reserve(uint64) *mapped { return nil }

func (*mapped) Reallocate(uint64) []byte { return nil }
func (*mapped) Free()                    {}
func (*mapped) unmap()                   {}
func (*mapped) reserved() uint64         { return 0 }
func (*mapped) resident() uint64         { return 0 }
func (*mapped) trimZeros() uint64        { return 0 }
func (*mapped) start(*Image) bool        { return false }
