package record

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// readAll opens path and returns its calls, failing the test on an error.
func readAll(t *testing.T, path string) (*File, []*Call) {
	t.Helper()
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var calls []*Call
	for {
		c, err := f.Next()
		if err == io.EOF {
			return f, calls
		}
		if err != nil {
			t.Fatal(err)
		}
		calls = append(calls, c)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl")
	r, err := Create(path, Options{MaxCallBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Plugin(PluginInfo{Name: "echo", Loader: "wazero", Manifest: json.RawMessage(`{"name":"echo"}`)}); err != nil {
		t.Fatal(err)
	}
	hostile := []byte("\x1b[2J\xff\xfe not utf-8\n")
	big := bytes.Repeat([]byte("a"), 10<<20) // a 10 MB output: only its size and hash are kept
	calls := []Call{
		{Plugin: "echo", Export: "morph_call_tool", Tool: "echo", Session: "s-1", Turn: 1, Input: []byte(`{"input": {"text": "hi"}}`), Output: []byte(`{"output":"hi"}`)},
		{Plugin: "echo", Export: "morph_before_tool_call", Hook: "before_tool_call", Input: []byte(`{}`), Output: hostile},
		{Plugin: "echo", Export: "morph_call_tool", Input: []byte(`{}`), Output: big},
		{Plugin: "echo", Export: "morph_call_tool", Input: []byte(`{}`), Fault: &Fault{Kind: "trap", Message: "wasm error: unreachable \x1b]0;x\x07"}},
	}
	for _, c := range calls {
		if err := r.Call(c); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := r.Close()
	if err != nil || sum.Calls != 4 || sum.Dropped != 0 || sum.Stopped != "" {
		t.Fatalf("Close = %+v, %v", sum, err)
	}
	raw, _ := os.ReadFile(path)
	if !utf8.Valid(raw) || bytes.Contains(raw, []byte{0x1b}) {
		t.Fatalf("the file is not escaped UTF-8 text:\n%q", raw)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	f, got := readAll(t, path)
	if f.End == nil || f.End.Calls != 4 || len(f.Plugins) != 1 || f.Plugins[0].Name != "echo" || f.Header.Limits.MaxCallBytes != 1024 {
		t.Fatalf("header %+v plugins %+v end %+v", f.Header, f.Plugins, f.End)
	}
	if len(got) != 4 {
		t.Fatalf("%d calls read, want 4", len(got))
	}
	if got[0].Seq != 1 || got[0].Tool != "echo" || got[0].Session != "s-1" || string(got[0].Output) != `{"output":"hi"}` {
		t.Errorf("call 1 = %+v", got[0])
	}
	var in map[string]any
	if err := json.Unmarshal(got[0].Input, &in); err != nil || in["input"].(map[string]any)["text"] != "hi" {
		t.Errorf("input = %s, %v", got[0].Input, err)
	}
	if !bytes.Equal(got[1].Output, hostile) {
		t.Errorf("hostile output read back as %q", got[1].Output)
	}
	if !got[2].OutputTruncated || got[2].Output != nil || got[2].InputTruncated {
		t.Errorf("10 MB output: %+v", got[2])
	}
	if got[3].Fault == nil || got[3].Fault.Kind != "trap" || strings.ContainsRune(got[3].Fault.Message, 0x1b) || got[3].Output != nil {
		t.Errorf("fault = %+v", got[3].Fault)
	}
}

func TestRecordScrubsSecrets(t *testing.T) {
	key := make([]byte, 16)
	rand.Read(key)
	secret := hex.EncodeToString(key) + `"\<tab>` // its JSON form differs from its raw form
	path := filepath.Join(t.TempDir(), "r.jsonl")
	r, err := Create(path, Options{Secrets: []Secret{{Name: "MORPH_TEST_SECRET", Value: secret}, {Name: "UNSET"}}})
	if err != nil {
		t.Fatal(err)
	}
	esc, _ := json.Marshal(map[string]string{"echo": secret})
	r.Call(Call{Plugin: "p", Export: "morph_call_tool", Input: []byte("raw " + secret), Output: esc,
		Fault: &Fault{Kind: "guest", Message: "bad " + secret}})
	r.Close()
	raw, _ := os.ReadFile(path)
	quoted, _ := json.Marshal(secret)
	for _, form := range []string{secret, string(quoted[1 : len(quoted)-1]), hex.EncodeToString(key)} {
		if bytes.Contains(raw, []byte(form)) {
			t.Fatalf("the file holds the secret as %q:\n%s", form, raw)
		}
	}
	_, calls := readAll(t, path)
	want := Marker("MORPH_TEST_SECRET")
	if c := calls[0]; !strings.Contains(string(c.Input), want) || !strings.Contains(string(c.Output), want) ||
		!strings.Contains(c.Fault.Message, want) || len(c.Redacted) != 1 || c.Redacted[0] != "MORPH_TEST_SECRET" {
		t.Fatalf("call = %+v, input %q output %q", c, c.Input, c.Output)
	}
}

func TestRecordRefusesShortSecret(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl")
	_, err := Create(path, Options{Secrets: []Secret{{Name: "TINY", Value: "abc", Source: "granted to plugin p"}}})
	if !errors.Is(err, ErrSecretTooShort) || !strings.Contains(err.Error(), "TINY granted to plugin p is 3 bytes") {
		t.Fatalf("err = %v", err)
	}
	if _, serr := os.Stat(path); !os.IsNotExist(serr) {
		t.Errorf("the file was created: %v", serr)
	}
}

func TestRecordCaps(t *testing.T) {
	call := Call{Plugin: "p", Export: "morph_call_tool", Input: []byte(`{"x":1}`), Output: []byte(`{"y":2}`)}
	for _, tc := range []struct {
		name, stopped string
		o             Options
		calls         int64
	}{
		{"max_bytes", "max_bytes", Options{MaxBytes: 1024}, 0},
		{"max_calls", "max_calls", Options{MaxCalls: 3}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			r, err := New(&buf, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			var stops int
			const n = 200
			for range n {
				if err := r.Call(call); err != nil {
					if !errors.Is(err, ErrRecordFull) || !strings.Contains(err.Error(), "record."+tc.stopped) {
						t.Fatalf("err = %v", err)
					}
					stops++
				}
			}
			sum, err := r.Close()
			if err != nil || stops != 1 || sum.Stopped != tc.stopped || sum.Calls+sum.Dropped != n || sum.Calls == 0 {
				t.Fatalf("stops %d, summary %+v, %v", stops, sum, err)
			}
			if tc.calls > 0 && sum.Calls != tc.calls {
				t.Errorf("calls %d, want %d", sum.Calls, tc.calls)
			}
			if tc.name == "max_bytes" && int64(buf.Len()) > 1024+200 { // the end line goes past the cap
				t.Errorf("%d bytes written past max_bytes 1024", buf.Len())
			}
			if !strings.Contains(buf.String(), `"stopped":"`+tc.stopped+`"`) {
				t.Errorf("end line lacks the stop: %s", buf.String())
			}
		})
	}
}

// failing is a writer whose writes fail after the first ok ones.
type failing struct{ ok int }

func (f *failing) Write(b []byte) (int, error) {
	if f.ok == 0 {
		return 0, errors.New("no space left on device")
	}
	f.ok--
	return len(b), nil
}

func TestRecordWriteErrorStops(t *testing.T) {
	r, err := New(&failing{ok: 2}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	call := Call{Plugin: "p", Export: "e", Input: []byte(`{}`)}
	if err := r.Call(call); err != nil {
		t.Fatal(err)
	}
	if err := r.Call(call); !errors.Is(err, ErrWrite) || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("err = %v", err)
	}
	for range 5 {
		if err := r.Call(call); err != nil {
			t.Fatalf("a call after the stop: %v", err)
		}
	}
	sum, err := r.Close()
	if !errors.Is(err, ErrWrite) || sum.Calls != 1 || sum.Dropped != 6 || !strings.HasPrefix(sum.Stopped, "write: ") {
		t.Fatalf("Close = %+v, %v", sum, err)
	}
}

func TestRecordOpenRefusesBadFiles(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonl")
	r, _ := Create(good, Options{})
	r.Call(Call{Plugin: "p", Export: "e", Input: []byte(`{"a":"b"}`)})
	r.Call(Call{Plugin: "p", Export: "e", Input: []byte(`{"a":"c"}`)})
	r.Close()
	whole, _ := os.ReadFile(good)
	lines := bytes.SplitAfter(whole, []byte("\n"))
	garbage := bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 1<<20) // 4 MiB, no newline
	for _, tc := range []struct{ name, body, want string }{
		{"empty", "", "empty file"},
		{"garbage", string(garbage), "longer than"},
		{"not a header", "{\"x\":1}\n", "not a morph record file"},
		{"wrong version", strings.Replace(string(whole), `"morph_record":1`, `"morph_record":7`, 1), "version 7"},
		{"cut mid-line", string(lines[0]) + string(lines[1][:len(lines[1])/2]), "line 2: cut short"},
		{"bad line", string(lines[0]) + "[1,2]\n", "line 2: not a record line"},
		// A header may not choose the reader's line buffer (12 x max_call_bytes).
		{"huge max_call_bytes", strings.Replace(string(whole), `"max_call_bytes":1048576`, `"max_call_bytes":1073741824`, 1), "out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_"))
			os.WriteFile(path, []byte(tc.body), 0o600)
			f, err := Open(path)
			if err == nil {
				_, err = f.Next()
				f.Close()
			}
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrFormat with %q", err, tc.want)
			}
		})
	}
	t.Run("no end line", func(t *testing.T) {
		path := filepath.Join(dir, "crashed")
		os.WriteFile(path, bytes.Join(lines[:3], nil), 0o600)
		f, calls := readAll(t, path)
		if len(calls) != 2 || f.End != nil {
			t.Fatalf("%d calls, end %+v", len(calls), f.End)
		}
	})
}

// counting is a writer that keeps only the number of bytes written.
type counting struct{ n int64 }

func (c *counting) Write(b []byte) (int, error) { c.n += int64(len(b)); return len(b), nil }

// A run of 200 000 calls stops at max_calls, once, and counts the rest;
// the calls after the stop cost a counter (which keeps this test fast).
func TestRecordMaxCallsFlood(t *testing.T) {
	const max, n = 1000, 200_000
	var w counting
	r, err := New(&w, Options{MaxCalls: max})
	if err != nil {
		t.Fatal(err)
	}
	call := Call{Plugin: "p", Export: "morph_call_tool", Input: []byte(`{"tool":"t","params":{}}`), Output: []byte(`{"output":"x"}`)}
	stops := 0
	for range n {
		if err := r.Call(call); errors.Is(err, ErrRecordFull) {
			stops++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	sum, err := r.Close()
	if err != nil || stops != 1 || sum.Calls != max || sum.Dropped != n-max || sum.Stopped != "max_calls" || sum.Bytes != w.n {
		t.Fatalf("stops %d, summary %+v (%d bytes written), %v", stops, sum, w.n, err)
	}
}
