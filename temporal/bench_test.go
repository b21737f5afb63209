package temporal

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/engine"
)

// statelessModel is an OpenAI-compatible server whose reply depends only
// on the request: a calc call for each of the first calls assistant turns,
// then a final. Any number of turns, on any number of workers, get the
// same replies.
func statelessModel(b testing.TB, calls int) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Messages []struct{ Role string } }
		json.NewDecoder(r.Body).Decode(&req)
		n := 0
		for _, m := range req.Messages {
			if m.Role == "assistant" {
				n++
			}
		}
		reply := fmt.Sprintf(`{"type":"tool_call","tool_call":{"thought":"t","tool_name":"calc","tool_params":{"expression":"%d+1"}}}`, n)
		if n >= calls {
			reply = `{"type":"final","final":{"thought":"done","output":42}}`
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`, reply)
	}))
	b.Cleanup(s.Close)
	return s
}

// benchConfig is a morph.toml on model, with the go-hooks plugin when
// hooks is set (its prompt and params hooks and its middleware: 15 hook
// calls in a turn of 4 tool calls).
func benchConfig(b testing.TB, model string, hooks bool) *config.Config {
	dir := b.TempDir()
	cfg := fmt.Sprintf("[llm]\nprovider = \"openai\"\nmodel = \"m\"\nbase_url = %q\napi_key_env = \"\"\n\n[tools]\nbuiltin = [\"calc\"]\n\n"+
		"[discovery]\nproject = false\nuser = false\n", model+"/v1")
	if hooks {
		abs, _ := filepath.Abs("../examples/go-hooks/go-hooks.wasm")
		cfg += fmt.Sprintf("\n[[plugins]]\nname = \"go-hooks\"\npath = %q\n", abs)
	}
	path := filepath.Join(dir, "morph.toml")
	os.WriteFile(path, []byte(cfg), 0o644)
	c, err := config.Load(path)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkTurn is a turn of 5 model calls and 4 tool calls (and, with
// hooks, go-hooks' hooks), run locally and on Temporal (one in-process
// worker, the dev server on loopback): the difference over the calls is
// the cost of durability per activity.
func BenchmarkTurn(b *testing.B) {
	model := statelessModel(b, 4)
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, hooks := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "go-hooks"}[hooks]
		b.Run("local/"+name, func(b *testing.B) {
			rt, err := benchConfig(b, model.URL, hooks).Open(ctx, logger)
			if err != nil {
				b.Fatal(err)
			}
			defer rt.Close(ctx)
			for b.Loop() {
				if _, _, err := rt.Engine.Run(ctx, "count", engine.RunOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("temporal/"+name, func(b *testing.B) {
			c := dev(b)
			a, err := NewActivities(ctx, benchConfig(b, model.URL, hooks), logger)
			if err != nil {
				b.Fatal(err)
			}
			defer a.Close(ctx)
			queue := strings.ReplaceAll(b.Name(), "/", "-")
			w := NewWorker(c, queue, a)
			if err := w.Start(); err != nil {
				b.Fatal(err)
			}
			defer w.Stop()
			for b.Loop() {
				run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, TurnWorkflow, TurnInput{Task: "count"})
				if err != nil {
					b.Fatal(err)
				}
				var res TurnResult
				if err := run.Get(ctx, &res); err != nil || res.Final == nil {
					b.Fatal(err, res.Error)
				}
			}
		})
	}
}
