// Package record writes and reads morph's record files: every hook and
// tool call a run made at the ABI boundary (plugin, export, input, output,
// fault, duration), one JSON object a line, so that `morph plugin replay`
// can run the recorded inputs against a new build of a plugin and show
// what changed.
//
// A file is a header line, then plugin lines (one per plugin the run
// loaded) and call lines in the order they happened, then an end line. A
// recording is capped (Options) and scrubbed of secrets before anything
// reaches the file (see Secret). The package imports no host and no wasm
// runtime: embedders and tools can read a file with Open alone.
package record

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"
	"unicode/utf8"

	"github.com/morphhost/morph/internal/safetext"
)

// Version is the file format this package writes and reads.
const Version = 1

// Defaults of Options' caps.
const (
	DefaultMaxBytes     = 64 << 20
	DefaultMaxCallBytes = 1 << 20
	// MaxCallBytesLimit is the largest MaxCallBytes a recording may set and
	// a reader accepts: a reader buffers a line of about 12 x it, and a
	// file's header must not choose that for it.
	MaxCallBytesLimit = 64 << 20
	DefaultMaxCalls   = 100_000
	// MinSecretBytes is the shortest secret value a recording can scrub
	// without mangling unrelated text that happens to contain it.
	MinSecretBytes = 8
	// MaxFaultBytes caps a fault's message in a file.
	MaxFaultBytes = 4096
)

// Errors of a recording and of reading a file; each is matched with
// errors.Is.
var (
	// ErrRecordFull: the recording reached Options.MaxBytes or MaxCalls and
	// stopped; the run goes on, later calls are counted as dropped.
	ErrRecordFull = errors.New("record: full")
	// ErrWrite: writing the file failed (a full disk); recording stopped
	// as it does when full.
	ErrWrite = errors.New("record: write failed")
	// ErrSecretTooShort: a secret is too short to scrub (MinSecretBytes).
	ErrSecretTooShort = errors.New("record: secret too short to scrub")
	// ErrFormat: a file is not a record file this version reads, or is
	// damaged.
	ErrFormat = errors.New("record: bad file")
)

// Header is a file's first line.
type Header struct {
	Version int       `json:"morph_record"`
	Created time.Time `json:"created"`
	Morph   string    `json:"morph,omitempty"` // the morph version that wrote it
	Limits  Limits    `json:"limits"`
}

// Limits are the caps a file was written with.
type Limits struct {
	MaxBytes     int64 `json:"max_bytes"`
	MaxCallBytes int64 `json:"max_call_bytes"`
	MaxCalls     int   `json:"max_calls"`
}

// PluginInfo describes a plugin the run loaded: the replay's reference for
// its manifest and grants.
type PluginInfo struct {
	Name       string          `json:"name"`
	SHA256     string          `json:"sha256,omitempty"` // of the module's bytes
	Loader     string          `json:"loader,omitempty"` // wazero or extism
	ABIVersion int             `json:"abi_version,omitempty"`
	Path       string          `json:"path,omitempty"`
	Manifest   json.RawMessage `json:"manifest,omitempty"`
	// Grants names what the plugin was granted (environment variable
	// names, hosts, directories), never a value.
	Grants map[string][]string `json:"grants,omitempty"`
}

// Call is one call at the ABI boundary as the host saw it. Input and
// Output are the bytes as they crossed (Output nil when the call faulted
// before answering); Recorder.Call scrubs, caps and encodes them.
type Call struct {
	Seq      int64  // set by the Recorder; in a file, 1 for the first call
	Plugin   string // the plugin's configured name
	Export   string // the ABI export called
	Hook     string // the hook's name, for a hook export
	Tool     string // the tool's name, for morph_call_tool
	Session  string // the session the call was routed by
	Turn     int
	Input    []byte
	Output   []byte
	Fault    *Fault
	Duration time.Duration
	// Read back from a file: the payloads the recording could not keep
	// whole (over MaxCallBytes), and the secrets scrubbed from the call.
	InputTruncated, OutputTruncated bool
	Redacted                        []string
}

// Fault is how a call failed: Kind is the host's short name of the
// failure (trap, timeout, guest, bad_output, ...), Message what it said,
// escaped and capped.
type Fault struct {
	Kind    string `json:"kind"`
	Message string `json:"message,omitempty"`
}

// Summary is what a recording wrote, and why it stopped early if it did
// ("max_bytes", "max_calls", "write: <error>"; "" when it did not).
type Summary struct {
	Calls   int64  `json:"calls"`
	Dropped int64  `json:"dropped"`
	Bytes   int64  `json:"bytes"`
	Stopped string `json:"stopped"`
}

// payload is a Call's input or output on the wire: JSON embedded as it is
// when the bytes are valid JSON and UTF-8 (the ABI's payloads are), else
// base64; a payload over the per-call cap keeps only its size and hash.
type payload struct {
	JSON      json.RawMessage `json:"json,omitempty"`
	Base64    []byte          `json:"base64,omitempty"`
	Bytes     int             `json:"bytes"`
	Truncated bool            `json:"truncated,omitempty"`
	SHA256    string          `json:"sha256,omitempty"`
}

// line is every kind of line after the header; exactly one of its groups
// is set.
type line struct {
	// a call
	Seq        int64    `json:"seq,omitempty"`
	Plugin     string   `json:"plugin,omitempty"`
	Export     string   `json:"export,omitempty"`
	Hook       string   `json:"hook,omitempty"`
	Tool       string   `json:"tool,omitempty"`
	Session    string   `json:"session,omitempty"`
	Turn       int      `json:"turn,omitempty"`
	Input      *payload `json:"input,omitempty"`
	Output     *payload `json:"output,omitempty"`
	Fault      *Fault   `json:"fault,omitempty"`
	DurationNS int64    `json:"duration_ns,omitempty"`
	Redacted   []string `json:"redacted,omitempty"`
	// a plugin the run loaded
	Load *PluginInfo `json:"load,omitempty"`
	// the end, with the Summary's fields
	End bool `json:"end,omitempty"`
	*Summary
}

// encode is b as a payload, max bytes at most (max <= 0: no cap).
func encode(b []byte, max int64) *payload {
	if b == nil {
		return nil
	}
	p := &payload{Bytes: len(b)}
	switch {
	case max > 0 && int64(len(b)) > max:
		sum := sha256.Sum256(b)
		p.Truncated, p.SHA256 = true, hex.EncodeToString(sum[:])
	case utf8.Valid(b) && json.Valid(b):
		p.JSON = b
	default:
		p.Base64 = b
	}
	return p
}

// decode is p's bytes, and whether they were cut from the file.
func (p *payload) decode() (b []byte, truncated bool) {
	switch {
	case p == nil:
		return nil, false
	case p.Truncated:
		return nil, true
	case p.JSON != nil:
		return p.JSON, false
	case p.Base64 != nil:
		return p.Base64, false
	}
	return []byte{}, false
}

// FaultMessage is msg as a file keeps a fault's message: cut to
// MaxFaultBytes, then escaped. Replay formats a new fault's message with it
// too, so that the two compare.
func FaultMessage(msg string) string { return safetext.Escape(safetext.Truncate(msg, MaxFaultBytes)) }
