//go:build !linux

package memory

// imageFile is nothing here: memories start from a copy of the image.
type imageFile struct{}

// newSource copies the runs of mem: the image's contents.
func newSource(mem []byte, runs [][2]int) ([]byte, imageFile, func(), error) {
	src := make([]byte, len(mem))
	for _, r := range runs {
		copy(src[r[0]:r[1]], mem[r[0]:r[1]])
	}
	return src, imageFile{}, func() {}, nil
}

func (imageFile) mapOver([]byte, int) error { return errNoMapping }

func (imageFile) allocated() (uint64, bool) { return 0, false }
