package memory

import (
	"errors"
	"sync"
)

// Image is a linear memory's contents, taken once and started from by many
// memories: the host's pre-initialized snapshot of a plugin (an instance's
// memory after its _initialize), which new instances start from instead of
// initializing themselves. Where the platform allows (Linux: a sealed
// memfd), a memory starts from the image by mapping it copy-on-write: the
// image's pages are shared by every memory that has not written them, and a
// memory costs the pages it writes. Elsewhere each memory gets a copy of the
// image's data pages.
//
// The file holds the pages with data; the all-zero pages between them are
// holes, and the zeros after the last one are not mapped at all (they are
// the memory's own anonymous pages). A hole read through a mapping is given
// a page of the file, shared by every memory and kept until the image
// closes: at most the span up to the last data page, once per image, which
// Bytes counts.
//
// An image is immutable once made, and safe for concurrent use.
type Image struct {
	size  int      // bytes: the memory's size when taken
	runs  [][2]int // the byte ranges of its pages that hold data, in order
	span  int      // bytes from the start to the end of the last run: what a memory maps
	data  uint64   // the runs' bytes
	src   []byte   // the contents, read-only (see newSource)
	file  imageFile
	close func()
	once  sync.Once
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
		end := min(i+page, len(mem))
		if n := len(img.runs); n > 0 && img.runs[n-1][1] == i {
			img.runs[n-1][1] = end
		} else {
			img.runs = append(img.runs, [2]int{i, end})
		}
		img.data += uint64(end - i)
		img.span = end
	}
	var err error
	if img.src, img.file, img.close, err = newSource(mem, img.runs); err != nil {
		return nil, err
	}
	return img, nil
}

// Size is the size of the memory the image was taken of, in bytes.
func (img *Image) Size() int { return img.size }

// DataBytes is the image's pages that are not all zeros.
func (img *Image) DataBytes() uint64 { return img.data }

// Bytes is what the image holds now: its data pages and, where memories
// map it, the pages of its holes that they have read (see Image).
func (img *Image) Bytes() uint64 {
	if n, ok := img.file.allocated(); ok {
		return n
	}
	return img.data
}

// Close releases the image, once. Memories started from it keep what they
// mapped of it; none may start from it after.
func (img *Image) Close() { img.once.Do(img.close) }

// errNoMapping is mapOver's answer where images cannot be mapped: memories
// get a copy.
var errNoMapping = errors.New("images are not mapped on this platform")

// copyInto writes the image's data pages into buf, a memory at least the
// image's size whose pages are zeros, and only those pages: the others stay
// untouched, and cost nothing.
func (img *Image) copyInto(buf []byte) {
	for _, r := range img.runs {
		copy(buf[r[0]:r[1]], img.src[r[0]:r[1]])
	}
}
