package scripted_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/llm"
	"github.com/morphhost/morph/llm/scripted"
)

func req(contents ...string) llm.Request {
	r := llm.Request{Parameters: map[string]any{"temperature": 0.2}}
	for _, c := range contents {
		r.Messages = append(r.Messages, llm.Message{Role: llm.RoleUser, Content: c})
	}
	return r
}

func TestChatRepliesInOrderWithUsage(t *testing.T) {
	pricing := llm.Pricing{"m": {InputPerMillion: 1_000_000, OutputPerMillion: 2_000_000}} // $1 / $2 per token
	c := scripted.New([]scripted.Reply{
		{Text: "first", InputTokens: 10, OutputTokens: 3},
		{Text: "twelve chars"},
	}, scripted.WithModel("m"), scripted.WithPricing(pricing))

	ctx := context.Background()
	res, err := c.Chat(ctx, req("hello"))
	if err != nil {
		t.Fatal(err)
	}
	want := llm.Usage{InputTokens: 10, OutputTokens: 3, TotalTokens: 13, Cost: 10 + 6}
	if res.Text != "first" || res.Usage != want {
		t.Fatalf("reply 1 = %q %+v, want %q %+v", res.Text, res.Usage, "first", want)
	}

	// Estimated: input (5+11 chars)/4 rounded up = 4, output 12/4 = 3.
	res, err = c.Chat(ctx, req("hello", "how are you"))
	if err != nil {
		t.Fatal(err)
	}
	want = llm.Usage{InputTokens: 4, OutputTokens: 3, TotalTokens: 7, Cost: 4 + 6}
	if res.Text != "twelve chars" || res.Usage != want {
		t.Fatalf("reply 2 = %q %+v, want %q %+v", res.Text, res.Usage, "twelve chars", want)
	}
	if c.Remaining() != 0 || c.Len() != 2 {
		t.Fatalf("Remaining %d Len %d, want 0 2", c.Remaining(), c.Len())
	}
}

func TestEstimatesAreAtLeastOne(t *testing.T) {
	c := scripted.New(scripted.Texts(""))
	res, err := c.Chat(context.Background(), llm.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Usage.InputTokens != 1 {
		t.Errorf("Usage.InputTokens = %d, want 1", res.Usage.InputTokens)
	}
	if res.Usage.OutputTokens != 1 {
		t.Errorf("Usage.OutputTokens = %d, want 1", res.Usage.OutputTokens)
	}
	if res.Usage.Cost != 0 {
		t.Errorf("Usage.Cost = %v, want 0", res.Usage.Cost)
	}
}

func TestCostUsesTheRequestModelFirst(t *testing.T) {
	pricing := llm.Pricing{"script": {InputPerMillion: 1e6}, "asked": {InputPerMillion: 2e6}}
	c := scripted.New([]scripted.Reply{{Text: "a", InputTokens: 1}, {Text: "b", InputTokens: 1}},
		scripted.WithModel("script"), scripted.WithPricing(pricing))
	r1, _ := c.Chat(context.Background(), llm.Request{Model: "asked"})
	r2, _ := c.Chat(context.Background(), llm.Request{})
	if r1.Usage.Cost != 2 || r2.Usage.Cost != 1 {
		t.Fatalf("costs %v %v, want 2 (request model) and 1 (script model)", r1.Usage.Cost, r2.Usage.Cost)
	}
}

func TestExhausted(t *testing.T) {
	c := scripted.New(scripted.Texts("only"), scripted.WithSource("demo/replies.json"))
	if _, err := c.Chat(context.Background(), req("x")); err != nil {
		t.Fatal(err)
	}
	_, err := c.Chat(context.Background(), req("y"))
	if !errors.Is(err, scripted.ErrExhausted) {
		t.Fatalf("err = %v, want ErrExhausted", err)
	}
	var ee *scripted.ExhaustedError
	if !errors.As(err, &ee) {
		t.Fatalf("err = %#v, want an *ExhaustedError", err)
	}
	if ee.Replies != 1 {
		t.Errorf("ExhaustedError.Replies = %d, want 1", ee.Replies)
	}
	if ee.Source != "demo/replies.json" {
		t.Errorf("ExhaustedError.Source = %q, want %q", ee.Source, "demo/replies.json")
	}
	for _, want := range []string{"ran out after 1 replies", "demo/replies.json"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if n := len(c.Requests()); n != 2 {
		t.Errorf("recorded %d requests, want 2 (the exhausted one too)", n)
	}
}

func TestCanceledContextUsesNoReply(t *testing.T) {
	c := scripted.New(scripted.Texts("a"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Chat(ctx, req("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if c.Remaining() != 1 || len(c.Requests()) != 0 {
		t.Fatalf("a canceled call used a reply or was recorded: remaining %d, requests %d", c.Remaining(), len(c.Requests()))
	}
}

func TestRequestsAreCopies(t *testing.T) {
	c := scripted.New(scripted.Texts("a"))
	r := req("original")
	if _, err := c.Chat(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	r.Messages[0].Content = "changed by the caller"
	r.Parameters["temperature"] = 9

	got := c.Requests()
	got[0].Messages[0].Content = "changed by the test"
	got[0].Parameters["temperature"] = 7

	again := c.Requests()[0]
	if again.Messages[0].Content != "original" || again.Parameters["temperature"] != 0.2 {
		t.Fatalf("recorded request changed: %+v", again)
	}
}

func TestConcurrentChatsUseEachReplyOnce(t *testing.T) {
	const n = 50
	texts := make([]string, n)
	for i := range texts {
		texts[i] = strings.Repeat("x", i+1)
	}
	c := scripted.New(scripted.Texts(texts...))
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		seen = map[string]bool{}
	)
	for range n + 5 {
		wg.Go(func() {
			res, err := c.Chat(context.Background(), req("q"))
			if err != nil {
				if !errors.Is(err, scripted.ErrExhausted) {
					t.Error(err)
				}
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if seen[res.Text] {
				t.Errorf("reply %q sent twice", res.Text)
			}
			seen[res.Text] = true
		})
	}
	wg.Wait()
	if len(seen) != n || len(c.Requests()) != n+5 {
		t.Fatalf("%d distinct replies, %d requests; want %d and %d", len(seen), len(c.Requests()), n, n+5)
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "replies.json")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoad(t *testing.T) {
	path := writeFile(t, `{
  "model": "scripted-demo",
  "replies": [
    {"reply": {"type": "final", "final": {"thought": "t", "output": 42}}, "input_tokens": 100, "output_tokens": 20},
    {"reply": "not JSON, sent as is"},
    {"reply": [1, 2]}
  ]
}`)
	c, err := scripted.Load(path, llm.Pricing{"scripted-demo": {InputPerMillion: 2.5, OutputPerMillion: 10}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Model() != "scripted-demo" || c.Len() != 3 {
		t.Fatalf("model %q, %d replies", c.Model(), c.Len())
	}
	wantTexts := []string{`{"type":"final","final":{"thought":"t","output":42}}`, "not JSON, sent as is", "[1,2]"}
	for i, want := range wantTexts {
		res, err := c.Chat(context.Background(), req("q"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Text != want {
			t.Errorf("reply %d = %q, want %q", i, res.Text, want)
		}
		if i != 0 {
			continue
		}
		if res.Usage.TotalTokens != 120 {
			t.Errorf("reply 0: Usage.TotalTokens = %d, want 120", res.Usage.TotalTokens)
		}
		if want := (100*2.5 + 20*10) / 1e6; res.Usage.Cost != want {
			t.Errorf("reply 0: Usage.Cost = %v, want %v", res.Usage.Cost, want)
		}
	}
	_, err = c.Chat(context.Background(), req("q"))
	if !errors.Is(err, scripted.ErrExhausted) {
		t.Fatalf("err = %v, want ErrExhausted", err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name %s", err, path)
	}
	if !strings.Contains(err.Error(), "after 3 replies") {
		t.Errorf("error %q does not say %q", err, "after 3 replies")
	}
}

func TestLoadDefaultModel(t *testing.T) {
	c, err := scripted.Load(writeFile(t, `{"replies":[{"reply":"a"}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Model() != scripted.DefaultModel {
		t.Fatalf("model %q, want %q", c.Model(), scripted.DefaultModel)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name, content, want string
	}{
		{"syntax", "{\n  \"replies\": [\n    {\"reply\": }\n  ]\n}", "line 3, column 15: invalid JSON"},
		{"empty file", "", "empty file"},
		{"not an object", `[1]`, "want object, got array"},
		{"unknown top key", `{"replys":[]}`, `unknown field "replys"`},
		{"no replies", `{"model":"m"}`, `missing "replies"`},
		{"empty replies", `{"replies":[]}`, "replies: the list is empty"},
		{"empty model", `{"model":" ","replies":[{"reply":"a"}]}`, "model: must not be empty"},
		{"model not a string", `{"model":3,"replies":[{"reply":"a"}]}`, "model: want string, got number"},
		{"missing reply", `{"replies":[{"reply":"a"},{"input_tokens":3}]}`, `replies[1]: missing "reply"`},
		{"null reply", `{"replies":[{"reply":null}]}`, `replies[0]: missing "reply"`},
		{"unknown reply key", `{"replies":[{"reply":"a"},{"reply":"b"},{"reply":"c"},{"reply":"d","output_token":3}]}`, `replies[3]: unknown field "output_token"`},
		{"tokens wrong type", `{"replies":[{"reply":"a","input_tokens":"12"}]}`, "replies[0]: input_tokens: want number, got string"},
		{"negative tokens", `{"replies":[{"reply":"a","output_tokens":-1}]}`, "replies[0].output_tokens: must not be negative"},
		{"trailing data", `{"replies":[{"reply":"a"}]} {}`, "unexpected data after the top-level value"},
		{"reply not an object", `{"replies":["a"]}`, "replies[0]: want object, got string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, tt.content)
			_, err := scripted.Load(path, nil)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q: want it to name %s and say %q", err, path, tt.want)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.json")
	_, err := scripted.Load(path, nil)
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v, want not-exist naming the file", err)
	}
}

type upper struct{}

func (upper) Name() string        { return "upper" }
func (upper) Description() string { return "upper-cases text" }
func (upper) ParameterSchema() string {
	return `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`
}
func (upper) Execute(_ context.Context, p map[string]any) (string, error) {
	return strings.ToUpper(p["text"].(string)), nil
}

// The client drives the real engine, and Requests shows what it sent.
func TestDrivesTheEngine(t *testing.T) {
	c := scripted.New(scripted.Texts(
		`{"type":"tool_call","tool_call":{"thought":"shout","tool_name":"upper","tool_params":{"text":"hi"}}}`,
		`{"type":"final","final":{"thought":"done","output":"HI","sources":["upper"]}}`,
	), scripted.WithPricing(llm.Pricing{scripted.DefaultModel: {InputPerMillion: 1, OutputPerMillion: 1}}))
	reg := engine.NewRegistry()
	reg.Register(upper{})
	final, rc, err := engine.New(c, reg).Run(context.Background(), "shout hi", engine.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if final.Output != "HI" || !strings.Contains(string(rc.RawFinalAnswer), `"sources":["upper"]`) {
		t.Fatalf("final %+v raw %s", final, rc.RawFinalAnswer)
	}
	if rc.Metrics.TotalTokens == 0 || rc.Metrics.TotalCost == 0 {
		t.Fatalf("metrics %+v: want tokens and cost", rc.Metrics)
	}
	reqs := c.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	if last.Content != "Tool Result (upper):\nHI" || !reqs[1].ForceJSON {
		t.Fatalf("second request ends with %+v (ForceJSON %v)", last, reqs[1].ForceJSON)
	}
}

// streamed collects the pieces a streamed Chat passes on.
func streamed(ctx context.Context, c *scripted.Client, r llm.Request) ([]string, llm.Result, error) {
	var got []string
	r.Stream = func(d string) { got = append(got, d) }
	res, err := c.Chat(ctx, r)
	return got, res, err
}

func TestStreamDeliversDeterministicPieces(t *testing.T) {
	long := `{"type":"final","final":{"output":42}}`
	tests := []struct {
		text string
		want []string
	}{
		{"the quick  brown\nfox ", []string{"the ", "quick  ", "brown\n", "fox "}},
		{"word", []string{"word"}},
		{"  lead", []string{"  ", "lead"}},
		{long, []string{long[:16], long[16:32], long[32:]}},
		// 2-byte characters: never cut inside one.
		{strings.Repeat("é", 11), []string{strings.Repeat("é", 8), strings.Repeat("é", 3)}},
		{"", nil},
	}
	for _, tt := range tests {
		for run := range 2 { // the same reply is cut the same way every time
			c := scripted.New([]scripted.Reply{{Text: tt.text, InputTokens: 3, OutputTokens: 4}})
			got, res, err := streamed(context.Background(), c, req("q"))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("run %d: %q streamed as %q, want %q", run, tt.text, got, tt.want)
			}
			if strings.Join(got, "") != res.Text || res.Text != tt.text {
				t.Errorf("pieces join to %q, Text %q, want %q", strings.Join(got, ""), res.Text, tt.text)
			}
			if res.Usage.TotalTokens != 7 {
				t.Errorf("usage %+v, want the reply's usage as without streaming", res.Usage)
			}
			for _, p := range got {
				if p == "" || !utf8.ValidString(p) {
					t.Errorf("piece %q is empty or cuts a character", p)
				}
			}
		}
	}
}

// Stream runs without the client's lock held, so it may use the client.
func TestStreamMayCallTheClient(t *testing.T) {
	c := scripted.New(scripted.Texts("a b", "c"))
	var remaining []int
	r := req("q")
	r.Stream = func(string) { remaining = append(remaining, c.Remaining()) }
	if _, err := c.Chat(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(remaining, []int{1, 1}) {
		t.Fatalf("Remaining seen from Stream = %v, want [1 1]", remaining)
	}
}

func TestStreamCanceledMidReply(t *testing.T) {
	c := scripted.New(scripted.Texts("one two three", "next"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []string
	r := req("q")
	r.Stream = func(d string) {
		got = append(got, d)
		cancel()
	}
	if _, err := c.Chat(ctx, r); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if !slices.Equal(got, []string{"one "}) {
		t.Fatalf("pieces %q, want only the first", got)
	}
	if c.Remaining() != 1 {
		t.Fatalf("Remaining %d, want 1: a reply cut off mid-stream counts as used", c.Remaining())
	}
}

func TestStreamExhaustedSendsNothing(t *testing.T) {
	c := scripted.New(nil)
	got, _, err := streamed(context.Background(), c, req("q"))
	if !errors.Is(err, scripted.ErrExhausted) || len(got) != 0 {
		t.Fatalf("err %v, pieces %q; want ErrExhausted and none", err, got)
	}
}

// A call numbered with WithReplyIndex gets that reply, as often as it is
// asked (a call made again on another process), and leaves the client's
// place alone; past the script, it is exhausted.
func TestNumberedCalls(t *testing.T) {
	ctx := context.Background()
	c := scripted.New(scripted.Texts("a", "b", "c"))
	for _, want := range []struct {
		at   int
		text string
	}{{1, "b"}, {1, "b"}, {0, "a"}, {2, "c"}} {
		res, err := c.Chat(scripted.WithReplyIndex(ctx, want.at), req("x"))
		if err != nil || res.Text != want.text {
			t.Fatalf("reply %d: %q, %v; want %q", want.at, res.Text, err, want.text)
		}
	}
	if c.Remaining() != 3 {
		t.Errorf("Remaining %d after numbered calls, want 3: they do not move the client's place", c.Remaining())
	}
	if res, err := c.Chat(ctx, req("x")); err != nil || res.Text != "a" {
		t.Errorf("the next unnumbered call: %q, %v; want the first reply", res.Text, err)
	}
	for _, at := range []int{3, -1} {
		if _, err := c.Chat(scripted.WithReplyIndex(ctx, at), req("x")); !errors.Is(err, scripted.ErrExhausted) {
			t.Errorf("reply %d of 3: err %v, want ErrExhausted", at, err)
		}
	}
}
