package temporal

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// testJournal is a journal in a directory of the test's, at most max bytes
// a record.
// checkRefused checks that a lookup, of what, found no record and failed
// with ErrJournal saying each of says.
func checkRefused(t *testing.T, what string, found bool, err error, says ...string) {
	t.Helper()
	if found {
		t.Errorf("%s: found a record, want a refusal", what)
	}
	if !errors.Is(err, ErrJournal) {
		t.Errorf("%s: err = %v, want ErrJournal", what, err)
		return
	}
	for _, s := range says {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s: err = %v, want it to say %q", what, err, s)
		}
	}
}

func testJournal(t *testing.T, max int64) (*Journal, string) {
	dir := filepath.Join(t.TempDir(), "journal")
	return &Journal{Store: DirStore{Dir: dir, Private: true}, Max: max}, dir
}

// files are the paths of the files under dir, relative to it.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return err
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return out
}

// A call's result comes back as recorded, and only for that call: calls
// whose IDs differ in any part, or hold separators and path elements,
// have records of their own, each a file named by a SHA-256 inside the
// directory, and no temporary file is left.
func TestJournalRecords(t *testing.T) {
	j, dir := testJournal(t, 1<<20)
	calls := []Call{
		{Namespace: "default", Workflow: "morph-session-a", Run: "r1", Activity: "5", Type: "Chat"},
		{Namespace: "default", Workflow: "morph-session-a", Run: "r1", Activity: "6", Type: "CallTool"},
		{Namespace: "default", Workflow: "morph-session-a", Run: "r2", Activity: "5", Type: "Chat"},
		{Namespace: "other", Workflow: "morph-session-a", Run: "r1", Activity: "5", Type: "Chat"},
		{Namespace: "default", Workflow: "../../etc/passwd", Run: "/r1", Activity: "5/..", Type: "Chat"},
		{Namespace: "default", Workflow: "a/b", Run: "c", Activity: "5", Type: "Chat"},
		{Namespace: "default", Workflow: "a", Run: "b/c", Activity: "5", Type: "Chat"},
		{Namespace: "default", Workflow: strings.Repeat("w", 1000), Run: "r", Activity: "1", Type: "Chat"},
	}
	for i, c := range calls {
		if _, found, err := j.Lookup(c); found || err != nil {
			t.Fatalf("%v before it is recorded: found %v, %v", c, found, err)
		}
		if err := j.Record(c, json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range calls {
		rec, found, err := j.Lookup(c)
		if err != nil {
			t.Errorf("%v: %v", c, err)
			continue
		}
		if !found {
			t.Errorf("%v: not found", c)
			continue
		}
		if want := fmt.Sprintf(`{"n":%d}`, i); string(rec.Result) != want {
			t.Errorf("%v: Result = %s, want %s", c, rec.Result, want)
		}
		if rec.Failure != nil {
			t.Errorf("%v: Failure = %+v, want none", c, rec.Failure)
		}
	}
	got := files(t, dir)
	name := regexp.MustCompile(`^[0-9a-f]{2}/[0-9a-f]{64}$`)
	for _, f := range got {
		if !name.MatchString(filepath.ToSlash(f)) {
			t.Errorf("file %q in the journal: want <2 hex>/<SHA-256> only", f)
		}
		// the records are the calls' results: the workers' user's alone
		file, err1 := os.Stat(filepath.Join(dir, f))
		sub, err2 := os.Stat(filepath.Dir(filepath.Join(dir, f)))
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		if file.Mode().Perm() != 0o600 || sub.Mode().Perm() != 0o700 {
			t.Errorf("record %q: modes %v in %v, want 0600 in 0700", f, file.Mode(), sub.Mode())
		}
	}
	if len(got) != len(calls) {
		t.Errorf("%d files for %d calls: %v", len(got), len(calls), got)
	}
	// A second record of a call keeps the first: the attempt Temporal
	// took answered that one.
	if err := j.Record(calls[0], json.RawMessage(`{"n":"again"}`)); err != nil {
		t.Fatal(err)
	}
	if rec, _, _ := j.Lookup(calls[0]); string(rec.Result) != `{"n":0}` {
		t.Errorf("recorded again: %s, want the first record", rec.Result)
	}
}

// A result larger than the journal's cap is refused, loudly (ErrJournal
// naming the key), and nothing is recorded; a record larger than the cap
// is refused unread.
func TestJournalCap(t *testing.T) {
	j, dir := testJournal(t, 200)
	c := Call{Namespace: "default", Workflow: "w", Run: "r", Activity: "1", Type: "CallTool"}
	err := j.Record(c, json.RawMessage(`"`+strings.Repeat("x", 200)+`"`))
	if !errors.Is(err, ErrJournal) || !strings.Contains(err.Error(), "journal_max_kb") {
		t.Fatalf("a result over the cap: %v", err)
	}
	if f := files(t, dir); len(f) != 0 {
		t.Fatalf("files after a refused record: %v", f)
	}
	if err := j.Record(c, json.RawMessage(`"small"`)); err != nil {
		t.Fatal(err)
	}
	j.Max = 20
	_, found, err := j.Lookup(c)
	checkRefused(t, "a record over the cap", found, err, "journal_max_kb")
}

// A record that is not one (cut short, garbage) or is another call's is
// refused loudly (ErrJournal, naming the record and what to do), never
// taken for a missing one, which would make the call again silently.
func TestJournalCorrupt(t *testing.T) {
	j, dir := testJournal(t, 1<<20)
	a := Call{Namespace: "default", Workflow: "w", Run: "r", Activity: "1", Type: "Chat"}
	b := Call{Namespace: "default", Workflow: "w", Run: "r", Activity: "2", Type: "Chat"}
	for _, c := range []Call{a, b} {
		if err := j.Record(c, json.RawMessage(`{"Text":"hello"}`)); err != nil {
			t.Fatal(err)
		}
	}
	path := func(c Call) string { return filepath.Join(dir, c.key()[:2], c.key()) }
	good, _ := os.ReadFile(path(a))
	for name, data := range map[string][]byte{"cut short": good[:len(good)/2], "garbage": []byte("\x00\x01"),
		"another call's": mustRead(t, path(b)), "another type's": []byte(strings.Replace(string(good), `"Chat"`, `"CallTool"`, 1))} {
		os.WriteFile(path(a), data, 0o644)
		_, found, err := j.Lookup(a)
		checkRefused(t, name, found, err, "corrupt", a.key())
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A record is written whole or not at all: a write a crash cut short (a
// temporary file left) is no record, and writers racing on one call leave
// one whole record, never a mix.
func TestJournalAtomic(t *testing.T) {
	j, dir := testJournal(t, 1<<20)
	c := Call{Namespace: "default", Workflow: "w", Run: "r", Activity: "1", Type: "CallTool"}
	os.MkdirAll(filepath.Join(dir, c.key()[:2]), 0o755)
	os.WriteFile(filepath.Join(dir, c.key()[:2], c.key()+tmpInfix+"crashed"), []byte(`{"Call":{`), 0o644)
	if _, found, err := j.Lookup(c); found || err != nil {
		t.Fatalf("a write cut short: found %v, %v", found, err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if err := j.Record(c, json.RawMessage(fmt.Sprintf(`{"Output":%q}`, strings.Repeat(fmt.Sprint(i), 100_000)))); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	rec, found, err := j.Lookup(c)
	var out ToolResult
	if err != nil {
		t.Fatalf("after racing writers: %v", err)
	}
	if !found {
		t.Fatal("after racing writers: no record")
	}
	if err := json.Unmarshal(rec.Result, &out); err != nil {
		t.Fatalf("after racing writers: the record's result: %v", err)
	}
	if len(out.Output) != 100_000 {
		t.Fatalf("after racing writers: an output of %d bytes, want 100000", len(out.Output))
	}
	if n := strings.Count(out.Output, out.Output[:1]); n != 100_000 {
		t.Errorf("after racing writers: %d of the output's bytes are its first, want all 100000 (one writer's)", n)
	}
	if f := files(t, dir); len(f) != 2 { // the record and the crashed write's
		t.Errorf("files %v", f)
	}
}

// Prune removes the records and crashed writes older than its time, and
// keeps the others.
func TestJournalPrune(t *testing.T) {
	j, dir := testJournal(t, 1<<20)
	old := Call{Namespace: "default", Workflow: "w", Run: "r", Activity: "1", Type: "Chat"}
	recent := Call{Namespace: "default", Workflow: "w", Run: "r", Activity: "2", Type: "Chat"}
	for _, c := range []Call{old, recent} {
		if err := j.Record(c, json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	crashed := filepath.Join(dir, old.key()[:2], old.key()+tmpInfix+"x")
	os.WriteFile(crashed, nil, 0o644)
	week := time.Now().Add(-8 * 24 * time.Hour)
	for _, p := range []string{filepath.Join(dir, old.key()[:2], old.key()), crashed} {
		os.Chtimes(p, week, week)
	}
	n, err := DirStore{Dir: dir}.Prune(time.Now().Add(-7 * 24 * time.Hour))
	if err != nil || n != 2 {
		t.Fatalf("pruned %d, %v; want 2", n, err)
	}
	if _, found, _ := j.Lookup(old); found {
		t.Error("the old record stays")
	}
	if _, found, _ := j.Lookup(recent); !found {
		t.Error("the recent record is gone")
	}
	if n, err := (DirStore{Dir: filepath.Join(dir, "none")}).Prune(time.Now()); n != 0 || err != nil {
		t.Errorf("a directory not made yet: %d, %v", n, err)
	}
}

// BenchmarkJournal is what the journal adds to a call: a lookup that
// finds nothing and the record of a 4 KiB result (written, synced,
// renamed, its directory synced).
func BenchmarkJournal(b *testing.B) {
	j := &Journal{Store: DirStore{Dir: b.TempDir()}, Max: 1 << 20}
	result := json.RawMessage(fmt.Sprintf(`{"Text":%q}`, strings.Repeat("x", 4<<10)))
	for i := 0; b.Loop(); i++ {
		c := Call{Namespace: "default", Workflow: "w", Run: "r", Activity: fmt.Sprint(i), Type: "Chat"}
		if _, found, err := j.Lookup(c); found || err != nil {
			b.Fatal(found, err)
		}
		if err := j.Record(c, result); err != nil {
			b.Fatal(err)
		}
	}
}

// recordPath is c's record in j's directory dir.
func recordPath(dir string, c Call) string { return filepath.Join(dir, c.key()[:2], c.key()) }

// Whoever can write the journal's directory (a shared volume) cannot make
// a worker read a record larger than the cap: a sparse file of 4 GiB at a
// record's path is refused (ErrJournal naming journal_max_kb and the
// record), unread: the lookup allocates far less than the file.
func TestJournalHugeRecord(t *testing.T) {
	j, dir := testJournal(t, 1<<20)
	c := Call{Namespace: "default", Workflow: "w", Run: "r", Activity: "1", Type: "Chat"}
	os.MkdirAll(filepath.Dir(recordPath(dir, c)), 0o700)
	f, err := os.Create(recordPath(dir, c))
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(f.Truncate(4<<30), f.Close()); err != nil {
		t.Skipf("no sparse file of 4 GiB here: %v", err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, found, err := j.Lookup(c)
	runtime.ReadMemStats(&after)
	checkRefused(t, "a 4 GiB record", found, err, "journal_max_kb", c.key())
	if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
		t.Errorf("the lookup allocated %d bytes for a record it refused", n)
	}
}

// Whoever can write the journal's directory cannot make a worker read
// outside it, nor hang it: a record that is a symbolic link out of the
// directory (to another journal's valid record, to /dev/zero), a FIFO no
// one writes, a directory, or a record in a shard directory that is a
// link out, is refused (ErrJournal naming the record), promptly, never
// taken for a missing record, and the record outside is neither read nor
// answered; and a result is not taken for recorded over it.
func TestJournalHostileRecord(t *testing.T) {
	c := Call{Namespace: "default", Workflow: "w", Run: "r", Activity: "1", Type: "CallTool"}
	// A valid record of c, in a journal the attacker's links point to.
	outside, outDir := testJournal(t, 1<<20)
	if err := outside.Record(c, json.RawMessage(`{"Output":"forged"}`)); err != nil {
		t.Fatal(err)
	}
	for name, plant := range map[string]func(record string) error{
		"a link to a record outside": func(r string) error { return os.Symlink(recordPath(outDir, c), r) },
		"a link to /dev/zero":        func(r string) error { return os.Symlink("/dev/zero", r) },
		"a FIFO":                     func(r string) error { return syscall.Mkfifo(r, 0o600) },
		"a link to a FIFO outside":   func(r string) error { return errors.Join(syscall.Mkfifo(r+".fifo", 0o600), os.Symlink(r+".fifo", r)) },
		"a directory":                func(r string) error { return os.Mkdir(r, 0o700) },
		"a shard that links outside": func(r string) error {
			os.Remove(filepath.Dir(r))
			return os.Symlink(filepath.Dir(recordPath(outDir, c)), filepath.Dir(r))
		},
	} {
		t.Run(name, func(t *testing.T) {
			j, dir := testJournal(t, 1<<20)
			os.MkdirAll(filepath.Dir(recordPath(dir, c)), 0o700)
			if err := plant(recordPath(dir, c)); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, found, err := j.Lookup(c)
				if found {
					err = fmt.Errorf("found a record: %v", err)
				}
				done <- err
			}()
			select {
			case err := <-done:
				checkRefused(t, "lookup", false, err, c.key())
				for _, not := range []string{"forged", "journal_max_kb"} {
					if err != nil && strings.Contains(err.Error(), not) {
						t.Errorf("lookup: err = %v, which says %q", err, not)
					}
				}
			case <-time.After(time.Minute):
				t.Fatal("the lookup hangs")
			}
			// nor is a result taken for recorded over it: the call fails
			// loudly now, not its next attempt
			if err := j.Record(c, json.RawMessage(`{"Output":"mine"}`)); !errors.Is(err, ErrJournal) {
				t.Errorf("a record over it: %v; want ErrJournal", err)
			}
		})
	}
}

// Prune removes nothing outside the journal's directory: a shard that is a
// link to a directory outside is not walked into (the link, old, goes; the
// files it points to stay), nor is a record that is a link (the link goes,
// not its target).
func TestJournalPruneStaysInside(t *testing.T) {
	_, dir := testJournal(t, 1<<20)
	outside := t.TempDir()
	victims := []string{filepath.Join(outside, "shard", "0123"), filepath.Join(outside, "file")}
	os.Mkdir(filepath.Join(outside, "shard"), 0o700)
	for _, v := range victims {
		if err := os.WriteFile(v, []byte("keep"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(dir, "ab"), 0o700)
	links := []string{filepath.Join(dir, "cd"), filepath.Join(dir, "ab", strings.Repeat("a", 64))}
	if err := errors.Join(os.Symlink(filepath.Join(outside, "shard"), links[0]), os.Symlink(victims[1], links[1])); err != nil {
		t.Fatal(err)
	}
	// Everything is older than an hour from now: a walk into the link
	// would remove what it finds.
	if _, err := (DirStore{Dir: dir}).Prune(time.Now().Add(time.Hour)); err != nil {
		t.Fatalf("prune: %v", err)
	}
	for _, v := range victims {
		if _, err := os.Stat(v); err != nil {
			t.Errorf("prune removed %s, outside the journal: %v", v, err)
		}
	}
	for _, l := range links {
		if _, err := os.Lstat(l); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the old link %s stays: %v", l, err)
		}
	}
}
