package memory

// Image is a linear memory's contents, taken once and started from by many
// memories: the host's pre-initialized snapshot of a plugin (an instance's
// memory after its _initialize), which new instances start from instead of
// initializing themselves. Only its pages that hold data are kept. Where the
// platform allows (Linux: a sealed memfd), a memory starts from the image
// by mapping it copy-on-write: the image's pages are shared by every
// memory that has not written them, and a memory costs only the pages it
// writes. Elsewhere each memory gets a copy of the data pages.
//
// An image is immutable once made, and safe for concurrent use.
type Image struct {
	size  int      // bytes: the memory's size when taken
	runs  [][2]int // the byte ranges of its pages that hold data, in order
	data  uint64   // their bytes
	src   []byte   // the contents, read-only (see newSource)
	file  imageFile
	close func()
}

// NewImage takes an image of mem, a linear memory's current contents (a
// multiple of the system's page size): the caller must not run the guest
// while it is taken.
func NewImage(mem []byte) (*Image, error) {
	page := pageSize()
	img := &Image{size: len(mem)}
	for i := 0; i < len(mem); i += page {
		if zeros(mem[i:min(i+page, len(mem))]) {
			continue
		}
		if n := len(img.runs); n > 0 && img.runs[n-1][1] == i {
			img.runs[n-1][1] = min(i+page, len(mem))
		} else {
			img.runs = append(img.runs, [2]int{i, min(i+page, len(mem))})
		}
		img.data += uint64(min(page, len(mem)-i))
	}
	var err error
	if img.src, img.file, img.close, err = newSource(mem, img.runs); err != nil {
		return nil, err
	}
	return img, nil
}

// Size is the size of the memory the image was taken of, in bytes.
func (img *Image) Size() int { return img.size }

// DataBytes is what the image holds: its pages that are not all zeros,
// which the memories started from it share where they are mapped.
func (img *Image) DataBytes() uint64 { return img.data }

// Close releases the image. Memories started from it keep what they
// mapped of it.
func (img *Image) Close() { img.close() }

// copyInto writes the image's data pages into buf, a memory at least the
// image's size whose pages are zeros, and only those pages: the others stay
// untouched, and cost nothing.
func (img *Image) copyInto(buf []byte) {
	for _, r := range img.runs {
		copy(buf[r[0]:r[1]], img.src[r[0]:r[1]])
	}
}
