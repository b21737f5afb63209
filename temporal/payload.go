package temporal

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"syscall"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/internal/safetext"
)

// PayloadStore keeps the payloads a PayloadCodec takes out of Temporal's
// history, each under its key: the hex SHA-256 of its content; and the
// records of a Journal, each under the SHA-256 of its call. DirStore is a
// directory; an embedding host may give another (an S3 bucket, ...).
type PayloadStore interface {
	// Put stores data under key, durably once it returns, and so that a
	// reader sees all of data or nothing; storing a key again is
	// harmless (the first data stays).
	Put(key string, data []byte) error
	// Get returns what is stored under key, refusing more than max bytes
	// without reading them. For a key never stored its error is
	// fs.ErrNotExist (errors.Is).
	Get(key string, max int64) ([]byte, error)
	// String names the store, for errors.
	String() string
}

// ErrPayload marks a payload reference the codec cannot resolve: a key
// that is not a SHA-256, a blob missing from the store, larger than
// allowed, or whose content does not match its key.
var ErrPayload = errors.New("payload store")

// payloadKey is what a key must be: a SHA-256 in lowercase hex, so that
// no key names a path outside the store.
var payloadKey = regexp.MustCompile(`^[0-9a-f]{64}$`)

// DirStore is a PayloadStore in a directory (created on the first Put),
// each blob at <first two hex digits>/<key>. No read or write leaves it: a
// key is a SHA-256, and a symbolic link out of it is not followed.
// Private makes its files 0600 and its directories 0700, for the workers'
// user alone (the result journal's); otherwise they are 0644 and 0755.
type DirStore struct {
	Dir     string
	Private bool
}

// modes are the permissions of d's files and directories.
func (d DirStore) modes() (file, dir os.FileMode) {
	if d.Private {
		return 0o600, 0o700
	}
	return 0o644, 0o755
}

func (d DirStore) String() string { return "directory " + d.Dir }

// name is key's path in d.
func (d DirStore) name(key string) (string, error) {
	if !payloadKey.MatchString(key) {
		return "", fmt.Errorf("%w %s: key %q is not a SHA-256 (64 lowercase hex digits)", ErrPayload, d, key)
	}
	return path.Join(key[:2], key), nil
}

// Put writes data to a temporary file beside its blob, syncs it and
// renames it into place, then syncs the directory: a reader sees the whole
// blob or none, and a blob Put returned survives a crash of the machine.
func (d DirStore) Put(key string, data []byte) error {
	name, err := d.name(key)
	if err != nil {
		return err
	}
	fileMode, dirMode := d.modes()
	if err := os.MkdirAll(d.Dir, dirMode); err != nil {
		return fmt.Errorf("%w %s: %w", ErrPayload, d, err)
	}
	root, err := os.OpenRoot(d.Dir)
	if err != nil {
		return fmt.Errorf("%w %s: %w", ErrPayload, d, err)
	}
	defer root.Close()
	if info, err := root.Lstat(name); err == nil {
		if !info.Mode().IsRegular() { // put there by another than a store (a shared volume's other writers)
			return fmt.Errorf("%w %s: blob %s: %w but %v, left as it is", ErrPayload, d, key, errNotRegular, info.Mode().Type())
		}
		return nil // stored already: the first data stays
	}
	tmp := name + tmpInfix + rand.Text()
	err = root.MkdirAll(path.Dir(name), dirMode)
	if err == nil {
		err = writeSynced(root, tmp, data, fileMode)
	}
	if err == nil {
		err = root.Rename(tmp, name)
	}
	if err == nil {
		err = syncDir(root, path.Dir(name))
	}
	if err != nil {
		root.Remove(tmp)
		return fmt.Errorf("%w %s: writing blob %s: %w", ErrPayload, d, key, err)
	}
	return nil
}

// tmpInfix marks a blob being written: a crash leaves it, and Prune
// removes it.
const tmpInfix = ".tmp-"

// writeSynced writes data to the new file name in root, of mode, and
// syncs it.
func writeSynced(root *os.Root, name string, data []byte, mode os.FileMode) error {
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// syncDir syncs the directory name in root, so that a rename in it
// survives a crash.
func syncDir(root *os.Root, name string) error {
	f, err := root.Open(name)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

// Prune removes the blobs written before before, and the temporary files
// of writes a crash left: the Journal's cleaning (a payload's blob is
// needed as long as the history that names it, so a payload_dir is never
// pruned). It returns how many files it removed.
func (d DirStore) Prune(before time.Time) (int, error) {
	root, err := os.OpenRoot(d.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("%w %s: %w", ErrPayload, d, err)
	}
	defer root.Close()
	removed := 0
	err = fs.WalkDir(root.FS(), ".", func(name string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) { // another worker's prune
			return nil
		}
		if err != nil || !info.ModTime().Before(before) {
			return err
		}
		if err := root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		removed++
		return nil
	})
	if err != nil {
		return removed, fmt.Errorf("%w %s: pruning: %w", ErrPayload, d, err)
	}
	return removed, nil
}

// errBlobTooLarge is in Get's failure for a blob larger than it reads,
// errNotRegular for one that is not a regular file: what is at the blob's
// path is unusable, whereas its other failures (an I/O error of a shared
// volume) may pass.
var (
	errBlobTooLarge = errors.New("larger")
	errNotRegular   = errors.New("not a regular file")
)

// Get reads key's blob, if it is no larger than max.
func (d DirStore) Get(key string, max int64) ([]byte, error) {
	name, err := d.name(key)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(d.Dir)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrPayload, d, err)
	}
	defer root.Close()
	// Whoever can write the directory (a shared volume) may put a FIFO at
	// a blob's path, whose open would wait for a writer forever: open
	// without waiting, and read only a regular file, no larger than max.
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w %s: blob %s is missing (does every worker and client share the directory?): %w", ErrPayload, d, key, err)
		}
		return nil, fmt.Errorf("%w %s: blob %s: %w", ErrPayload, d, key, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err == nil && !info.Mode().IsRegular() {
		err = fmt.Errorf("%w but %v, refused unread", errNotRegular, info.Mode().Type())
	}
	if err != nil {
		return nil, fmt.Errorf("%w %s: blob %s: %w", ErrPayload, d, key, err)
	}
	var data []byte
	if info.Size() <= max { // else refused unread
		// it may have grown since its Stat
		if data, err = io.ReadAll(io.LimitReader(f, max+1)); err != nil {
			return nil, fmt.Errorf("%w %s: reading blob %s: %w", ErrPayload, d, key, err)
		}
	}
	if info.Size() > max || int64(len(data)) > max {
		return nil, fmt.Errorf("%w %s: blob %s is %w than %d bytes, the most read", ErrPayload, d, key, errBlobTooLarge, max)
	}
	return data, nil
}

// claimCheck is the encoding of a payload the codec moved to its store:
// its data is a payloadRef.
const claimCheck = "morph/claim-check"

// payloadRef is what the history keeps of a payload in the store: its key
// and size.
type payloadRef struct {
	Key  string
	Size int64
}

// PayloadCodec is Temporal's claim-check pattern: it moves each payload
// larger than Threshold bytes (a session's history, a large tool output)
// into Store and leaves in the history a reference, its key and size. A
// reference is resolved by reading the blob, at most Max bytes, and
// checking its SHA-256 against the key: a blob missing, too large or
// changed is an error (ErrPayload) naming the key and the store.
type PayloadCodec struct {
	Store     PayloadStore
	Threshold int
	Max       int64
}

// Encode moves the payloads above the threshold to the store.
func (c *PayloadCodec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if proto.Size(p) <= c.Threshold {
			out[i] = p
			continue
		}
		data, err := proto.Marshal(p)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(data)
		ref := payloadRef{Key: hex.EncodeToString(sum[:]), Size: int64(len(data))}
		if err := c.Store.Put(ref.Key, data); err != nil {
			return nil, err
		}
		refData, err := json.Marshal(ref)
		if err != nil {
			return nil, err
		}
		out[i] = &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(claimCheck)}, Data: refData}
	}
	return out, nil
}

// Decode replaces each reference by the payload it names, checked.
func (c *PayloadCodec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != claimCheck {
			out[i] = p
			continue
		}
		var ref payloadRef
		if err := json.Unmarshal(p.GetData(), &ref); err != nil {
			return nil, fmt.Errorf("%w %s: a reference that is not one (%s): %w", ErrPayload, c.Store, safetext.Line(string(p.GetData()), 200), err)
		}
		if ref.Size > c.Max {
			return nil, fmt.Errorf("%w %s: blob %s is %d bytes, more than %d ([temporal] payload_max_kb)", ErrPayload, c.Store, ref.Key, ref.Size, c.Max)
		}
		data, err := c.Store.Get(ref.Key, c.Max)
		if err != nil {
			return nil, err
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != ref.Key {
			return nil, fmt.Errorf("%w %s: blob %s does not match its key: changed or corrupt", ErrPayload, c.Store, ref.Key)
		}
		var payload commonpb.Payload
		if err := proto.Unmarshal(data, &payload); err != nil {
			return nil, fmt.Errorf("%w %s: blob %s is not a payload: %w", ErrPayload, c.Store, ref.Key, err)
		}
		out[i] = &payload
	}
	return out, nil
}

// DataConverter is the data converter of t's clients and workers: with
// payload_dir, the default one behind a PayloadCodec on a DirStore there;
// without, nil (Temporal's default).
func DataConverter(t config.Temporal) converter.DataConverter {
	if t.PayloadDir == "" {
		return nil
	}
	t = t.WithDefaults()
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(),
		&PayloadCodec{Store: DirStore{Dir: t.PayloadDir}, Threshold: t.PayloadThresholdKB << 10, Max: int64(t.PayloadMaxKB) << 10})
}
