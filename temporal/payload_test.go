package temporal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/morphhost/morph/config"
)

// A payload above the threshold goes to the store and comes back whole; a
// small one stays as it is.
func TestPayloadCodecRoundTrip(t *testing.T) {
	dir := t.TempDir()
	codec := &PayloadCodec{Store: DirStore{Dir: dir}, Threshold: 1 << 10, Max: 1 << 20}
	dc := converter.GetDefaultDataConverter()
	big, _ := dc.ToPayload(strings.Repeat("history ", 1000))
	small, _ := dc.ToPayload("hello")
	enc, err := codec.Encode([]*commonpb.Payload{big, small})
	if err != nil {
		t.Fatal(err)
	}
	if n := proto.Size(enc[0]); n > 200 {
		t.Errorf("the large payload encoded in %d bytes, want at most 200 (a reference)", n)
	}
	if got := string(enc[0].Metadata[converter.MetadataEncoding]); got != claimCheck {
		t.Errorf("the large payload's encoding %q, want %q", got, claimCheck)
	}
	if !proto.Equal(enc[1], small) {
		t.Errorf("the small payload encoded as %v, want it as it was, %v", enc[1], small)
	}
	blobs, _ := filepath.Glob(filepath.Join(dir, "*", "*"))
	if len(blobs) != 1 {
		t.Fatalf("blobs %v", blobs)
	}
	dec, err := codec.Decode(enc)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if !proto.Equal(dec[0], big) {
		t.Errorf("the large payload decoded as %v, want it as it was", dec[0])
	}
	if !proto.Equal(dec[1], small) {
		t.Errorf("the small payload decoded as %v, want %v", dec[1], small)
	}
	if _, err := codec.Encode([]*commonpb.Payload{big}); err != nil { // stored again: harmless
		t.Fatal(err)
	}
}

// A reference the codec cannot trust is an error naming the key and the
// store (ErrPayload), never a read outside the store's directory: a key
// that escapes it, a blob that is a symbolic link out of it, a missing
// blob, a blob larger than allowed (said so by its reference or not), a
// blob whose content does not match its key, a reference that is not one.
func TestPayloadCodecAttacks(t *testing.T) {
	dir := t.TempDir()
	store := DirStore{Dir: filepath.Join(dir, "store")}
	codec := &PayloadCodec{Store: store, Threshold: 16, Max: 1 << 10}
	secret := filepath.Join(dir, "secret")
	os.WriteFile(secret, []byte("not for payloads"), 0o644)
	key := func(data string) string { s := sha256.Sum256([]byte(data)); return hex.EncodeToString(s[:]) }
	plant := func(k string, data []byte) { // a blob as an attacker with the directory would write it
		os.MkdirAll(filepath.Join(store.Dir, k[:2]), 0o755)
		if err := os.WriteFile(filepath.Join(store.Dir, k[:2], k), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	huge := key("huge")
	plant(huge, make([]byte, 2<<10))
	tampered := key("original")
	plant(tampered, []byte("changed"))
	link := key("link")
	os.MkdirAll(filepath.Join(store.Dir, link[:2]), 0o755)
	os.Symlink(secret, filepath.Join(store.Dir, link[:2], link))
	ref := func(data string) *commonpb.Payload {
		return &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(claimCheck)}, Data: []byte(data)}
	}
	for _, c := range []struct {
		name, ref, want string
	}{
		{"escape", `{"Key":"../secret","Size":16}`, `key "../secret" is not a SHA-256`},
		{"escape in hex", `{"Key":"../../` + key("x")[6:] + `","Size":16}`, "is not a SHA-256"},
		{"symlink", fmt.Sprintf(`{"Key":%q,"Size":16}`, link), "blob " + link},
		{"missing", fmt.Sprintf(`{"Key":%q,"Size":16}`, key("absent")), "blob " + key("absent") + " is missing"},
		{"huge, said", fmt.Sprintf(`{"Key":%q,"Size":%d}`, huge, 1<<40), "blob " + huge + " is 1099511627776 bytes, more than 1024"},
		{"huge, unsaid", fmt.Sprintf(`{"Key":%q,"Size":16}`, huge), "blob " + huge + " is larger than 1024 bytes"},
		{"wrong hash", fmt.Sprintf(`{"Key":%q,"Size":7}`, tampered), "blob " + tampered + " does not match its key"},
		{"not a reference", `[1,2]`, "a reference that is not one"},
	} {
		_, err := codec.Decode([]*commonpb.Payload{ref(c.ref)})
		if !errors.Is(err, ErrPayload) {
			t.Errorf("%s: %v, want an ErrPayload", c.name, err)
			continue
		}
		for _, says := range []string{c.want, store.String()} {
			if !strings.Contains(err.Error(), says) {
				t.Errorf("%s: %v, want it to say %q", c.name, err, says)
			}
		}
	}
}

// A session whose history is larger than the threshold, on a worker and a
// client with payload_dir: the turns see their whole history, which lands
// in payload_dir, and the workflow's Temporal history holds only
// references (no event as large as a task).
func TestSessionPayloadsInStore(t *testing.T) {
	dir := t.TempDir()
	path := appendConfig(t, writeConfig(t,
		`{"type":"final","final":{"thought":"done","output":1}}`, `{"type":"final","final":{"thought":"done","output":2}}`),
		fmt.Sprintf("\n[temporal]\npayload_dir = %q\npayload_threshold_kb = 4\n", dir))
	c, queue := storeWorker(t, path)
	id := "payloads-" + t.Name()
	task := strings.Repeat("a long task ", 2<<10) // 24 KiB
	for range 2 {
		if res := sessionTurn(t, c, queue, id, SessionLimits{}, task); res.Final == nil {
			t.Fatalf("turn: %+v", res)
		}
	}
	q, err := c.QueryWorkflow(context.Background(), SessionWorkflowID(id), "", QuerySession)
	var state SessionState
	if err != nil {
		t.Fatalf("query the session: %v", err)
	}
	if err := q.Get(&state); err != nil {
		t.Fatalf("the session's state: %v", err)
	}
	if len(state.History) != 4 {
		t.Fatalf("history of %d messages, want 4", len(state.History))
	}
	if state.History[2].Content != task {
		t.Errorf("history[2] of %d bytes, want the second task, of %d", len(state.History[2].Content), len(task))
	}
	if blobs, _ := filepath.Glob(filepath.Join(dir, "*", "*")); len(blobs) == 0 {
		t.Errorf("no blob in %s", dir)
	}
	_, events := sessionEvents(t, dev(t), id)
	for _, ev := range events {
		if n := proto.Size(ev); n > 8<<10 {
			t.Errorf("event %d (%s) is %d bytes", ev.EventId, ev.EventType, n)
		}
	}
}

// A 120 KiB task, as a session's turn and as a turn of its own, on a
// worker and a client with payload_dir at its default threshold: what the
// workflows' Temporal histories keep of it is a reference, their whole
// history under 16 KiB of JSON (as `temporal workflow show --output json`
// prints it) where the task alone is 120 KiB.
func TestLargeTaskHistoryIsSmall(t *testing.T) {
	dir := t.TempDir()
	path := appendConfig(t, writeConfig(t, `{"type":"final","final":{"thought":"done","output":1}}`),
		fmt.Sprintf("\n[temporal]\npayload_dir = %q\n", dir))
	c, queue := storeWorker(t, path)
	task := strings.Repeat("a large task ", 120<<10/13)
	id := "large-" + t.Name()
	if res := sessionTurn(t, c, queue, id, SessionLimits{}, task); res.Final == nil {
		t.Fatalf("session turn: %+v", res)
	}
	ctx := context.Background()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, TurnWorkflow, TurnInput{SessionID: "s", Task: task})
	if err != nil {
		t.Fatal(err)
	}
	var res TurnResult
	if err := run.Get(ctx, &res); err != nil || res.Final == nil {
		t.Fatalf("turn: %+v, %v", res, err)
	}
	_, session := sessionEvents(t, dev(t), id)
	for name, events := range map[string][]*historypb.HistoryEvent{"session": session, "turn": workflowEvents(t, dev(t), run.GetID(), run.GetRunID())} {
		size, largest, largestType := 0, 0, ""
		for _, ev := range events {
			b, err := protojson.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			if size += len(b); len(b) > largest {
				largest, largestType = len(b), ev.EventType.String()
			}
		}
		t.Logf("the %s's history is %d bytes of JSON, its largest event %s %d bytes", name, size, largestType, largest)
		if size > 16<<10 {
			t.Errorf("the %s's history is %d bytes of JSON, its largest event %s %d bytes; want under 16 KiB", name, size, largestType, largest)
		}
	}
}

// storeWorker loads the config at path, whose payload_dir the client's and
// the worker's data converters share, and returns a client with that
// converter (closed at the test's end) and the queue of a worker started on
// the config.
func storeWorker(t *testing.T, path string) (client.Client, string) {
	t.Helper()
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewClientFromExisting(dev(t), client.Options{DataConverter: DataConverter(cfg.Temporal), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, startWorker(t, c, cfg)
}
