package pipeline

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"
)

// DefaultMaxArtifactBytes bounds one artifact (ArtifactStore.MaxBytes).
const DefaultMaxArtifactBytes = 16 << 20

// ErrArtifactNotFound is returned by Retrieve for an id the store lacks.
var ErrArtifactNotFound = errors.New("artifact not found")

// artifactID is what an artifact id may be: it names a file in the store's
// directory, so nothing that could climb out of it.
var artifactID = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}$`)

// ArtifactInfo describes a stored artifact.
type ArtifactInfo struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"` // a human name, e.g. the node's label
	Size     int       `json:"size"`
	Path     string    `json:"path"`
	StoredAt time.Time `json:"stored_at"`
}

// ArtifactStore keeps a run's artifacts (an agent's output, a tool's) as
// files in one directory, so they survive a crash and a resume. It is safe
// for concurrent use.
type ArtifactStore struct {
	dir string
	// MaxBytes bounds one artifact (default DefaultMaxArtifactBytes); Store
	// refuses a larger one.
	MaxBytes int

	mu    sync.Mutex
	infos map[string]ArtifactInfo
}

// NewArtifactStore returns a store writing under dir, which it creates on
// the first Store. Artifacts already in dir (a resumed run's) are listed.
func NewArtifactStore(dir string) *ArtifactStore {
	s := &ArtifactStore{dir: dir, MaxBytes: DefaultMaxArtifactBytes, infos: map[string]ArtifactInfo{}}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() && artifactID.MatchString(e.Name()) {
			s.infos[e.Name()] = ArtifactInfo{ID: e.Name(), Name: e.Name(), Size: int(fi.Size()), Path: filepath.Join(dir, e.Name()), StoredAt: fi.ModTime()}
		}
	}
	return s
}

// BaseDir is the store's directory.
func (s *ArtifactStore) BaseDir() string { return s.dir }

// Store writes data as artifact id (replacing one of that id), atomically.
func (s *ArtifactStore) Store(id, name string, data []byte) (ArtifactInfo, error) {
	if !artifactID.MatchString(id) {
		return ArtifactInfo{}, fmt.Errorf("artifact id %q: use letters, digits, '_', '.' and '-' (at most 200), not starting with '.' or '-'", id)
	}
	limit := s.MaxBytes
	if limit <= 0 {
		limit = DefaultMaxArtifactBytes
	}
	if len(data) > limit {
		return ArtifactInfo{}, fmt.Errorf("artifact %s: %d bytes, more than the limit of %d", id, len(data), limit)
	}
	path := filepath.Join(s.dir, id)
	if err := writeFileAtomic(path, data); err != nil {
		return ArtifactInfo{}, fmt.Errorf("artifact %s: %w", id, err)
	}
	info := ArtifactInfo{ID: id, Name: name, Size: len(data), Path: path, StoredAt: time.Now()}
	s.mu.Lock()
	s.infos[id] = info
	s.mu.Unlock()
	return info, nil
}

// Retrieve returns the artifact's bytes; ErrArtifactNotFound when there is
// none of that id.
func (s *ArtifactStore) Retrieve(id string) ([]byte, error) {
	if !s.Has(id) {
		return nil, fmt.Errorf("artifact %q: %w", id, ErrArtifactNotFound)
	}
	return os.ReadFile(filepath.Join(s.dir, id))
}

// Has reports whether the store holds id.
func (s *ArtifactStore) Has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.infos[id]
	return ok
}

// List returns the artifacts, by id.
func (s *ArtifactStore) List() []ArtifactInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ArtifactInfo, 0, len(s.infos))
	for _, k := range sortedKeys(s.infos) {
		out = append(out, s.infos[k])
	}
	return out
}

// writeFileAtomic writes data to path through a temporary file in the same
// directory, synced, then renamed over path, and syncs the directory, so a
// reader (or a crash) sees the old content or the new, never a part, and
// the new survives a crash once it returns.
func writeFileAtomic(path string, data []byte) error { return writeFile(path, data, true) }

// writeFileQuick is writeFileAtomic without the syncs: readers never see a
// part, but a crash may lose the write. For files a resume does not need
// (a stage's prompt.md, response.md, status.json): the checkpoint is what
// must be durable, and each sync costs about a millisecond.
func writeFileQuick(path string, data []byte) error { return writeFile(path, data, false) }

func writeFile(path string, data []byte, durable bool) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, tempPattern(path))
	if errors.Is(err, fs.ErrNotExist) { // the first file of a directory: make it
		if err = os.MkdirAll(dir, 0o755); err == nil {
			f, err = os.CreateTemp(dir, tempPattern(path))
		}
	}
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err == nil && durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err = os.Rename(f.Name(), path); err != nil || !durable {
		return err
	}
	if d, derr := os.Open(dir); derr == nil { // make the rename durable
		d.Sync()
		d.Close()
	}
	return nil
}

// tempPattern is the os.CreateTemp pattern of writeFile's temporary file
// for path: hidden, beside it, marked as the runner's by tempInfix.
func tempPattern(path string) string { return "." + filepath.Base(path) + tempInfix + "*" }

// tempInfix marks writeFile's temporary files: a stage may write files of
// its own in the run directory, a ".x.tmp1" of its own included, and a
// resume removes only the runner's. (Runs before it named them ".tmp";
// such an orphan is left, as a stage's file could be.)
const tempInfix = ".morph-tmp"

// orphanTemp matches the names tempPattern makes (os.CreateTemp puts a
// decimal number at the '*'), and nothing else a run directory holds.
var orphanTemp = regexp.MustCompile(`^\..+` + regexp.QuoteMeta(tempInfix) + `[0-9]+$`)

// removeOrphanTemps removes writeFile's temporary files under dir, which
// only a process killed between creating and renaming one leaves: the
// caller holds dir's lock, so no writer is running. It returns the paths
// removed, and the first error met.
func removeOrphanTemps(dir string) ([]string, error) {
	var removed []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() || !orphanTemp.MatchString(d.Name()) {
			return nil
		}
		if err := os.Remove(path); err != nil {
			return err
		}
		removed = append(removed, path)
		return nil
	})
	return removed, err
}
