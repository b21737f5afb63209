package record

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// maxHeaderLine bounds the first line, read before the file says its caps:
// a file of garbage is refused after this many bytes.
const maxHeaderLine = 64 << 10

// File reads a record file as a stream: the header on Open, then one line
// at a time (Next), so that memory stays bounded by the longest line the
// header's caps allow, whatever the file's size.
type File struct {
	Header  Header
	Plugins []PluginInfo // the plugin lines read so far (Open reads those before the first call)
	// End is the end line's summary, once Next returned io.EOF; nil if the
	// file has none (the run crashed, or is still writing).
	End *Summary

	path    string
	f       *os.File
	r       *bufio.Reader
	maxLine int
	lineNo  int
	next    *Call // the call Open read ahead
	err     error // Open's read-ahead error, for Next
}

// Open opens path and reads its header and the plugin lines before the
// first call. A file that is not a record file, or of another version, is
// refused (ErrFormat).
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	rf := &File{path: path, f: f, r: bufio.NewReaderSize(f, 64<<10), maxLine: maxHeaderLine}
	b, err := rf.line()
	if err == io.EOF {
		err = rf.errorf("empty file")
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	if err := json.Unmarshal(b, &rf.Header); err != nil || rf.Header.Version == 0 {
		f.Close()
		return nil, rf.errorf("not a morph record file (its first line is not a morph_record header)")
	}
	if rf.Header.Version != Version {
		f.Close()
		return nil, rf.errorf("version %d; this morph reads version %d (record the run again with this morph)", rf.Header.Version, Version)
	}
	// A call line holds two payloads of MaxCallBytes each, base64 at worst
	// (4/3), JSON-escaped scrubbed text at worst (6x for \u00XX): room
	// for that and the line's other fields.
	lim := rf.Header.Limits.MaxCallBytes
	if lim <= 0 || lim > MaxCallBytesLimit {
		f.Close()
		return nil, rf.errorf("limits.max_call_bytes %d out of range", lim)
	}
	rf.maxLine = int(12*lim) + 1<<20
	rf.next, rf.err = rf.read()
	return rf, nil
}

// Path is the file's path.
func (f *File) Path() string { return f.path }

// Close closes the file.
func (f *File) Close() error { return f.f.Close() }

// Next is the next call, in the order recorded; io.EOF after the last.
// A damaged line (cut, not JSON) is an ErrFormat error naming its line.
func (f *File) Next() (*Call, error) {
	if f.next != nil || f.err != nil {
		c, err := f.next, f.err
		f.next, f.err = nil, nil
		return c, err
	}
	return f.read()
}

// read reads lines up to the next call, taking plugin lines and the end.
func (f *File) read() (*Call, error) {
	for {
		if f.End != nil {
			return nil, io.EOF
		}
		b, err := f.line()
		if err != nil {
			return nil, err
		}
		var l line
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, f.errorf("not a record line: %v", err)
		}
		switch {
		case l.Load != nil:
			f.Plugins = append(f.Plugins, *l.Load)
		case l.End:
			f.End = l.Summary
			if f.End == nil {
				f.End = &Summary{}
			}
		case l.Seq > 0 && l.Plugin != "" && l.Export != "":
			c := &Call{Seq: l.Seq, Plugin: l.Plugin, Export: l.Export, Hook: l.Hook, Tool: l.Tool, Session: l.Session, Turn: l.Turn,
				Fault: l.Fault, Duration: time.Duration(l.DurationNS), Redacted: l.Redacted}
			c.Input, c.InputTruncated = l.Input.decode()
			c.Output, c.OutputTruncated = l.Output.decode()
			return c, nil
		default:
			return nil, f.errorf("a line that is neither a call, a plugin nor the end")
		}
	}
}

// line is the next line without its newline, at most maxLine bytes; a
// last line without a newline is a cut line (the writer stopped mid-line).
func (f *File) line() ([]byte, error) {
	f.lineNo++
	var buf []byte
	for {
		chunk, err := f.r.ReadSlice('\n')
		if len(buf)+len(chunk) > f.maxLine {
			return nil, f.errorf("longer than %d bytes: not a line this file's caps allow", f.maxLine)
		}
		buf = append(buf, chunk...)
		switch {
		case err == nil:
			return bytes.TrimSuffix(buf, []byte("\n")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(buf) == 0:
			return nil, io.EOF
		case err == io.EOF:
			return nil, f.errorf("cut short (no newline at its end): the run stopped while writing it")
		default:
			return nil, fmt.Errorf("record: %s: %w", f.path, err)
		}
	}
}

func (f *File) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s line %d: %s", ErrFormat, f.path, f.lineNo, fmt.Sprintf(format, args...))
}
