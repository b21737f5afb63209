package pipeline_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/llm/scripted"
	"github.com/morphhost/morph/pipeline"
)

// typedGates asks a freeform question, then a yes/no one.
const typedGates = `digraph typed {
  start [shape=Mdiamond]
  note  [shape=hexagon, label="Any note?", human.type=freeform]
  go    [shape=hexagon, label="Ship it?", human.type=yes_no]
  ship  [prompt="Ship"]
  hold  [prompt="Hold"]
  done  [shape=Msquare]
  start -> note -> go
  go -> ship [label="yes"]
  go -> hold [label="no"]
  ship -> done
  hold -> done
}`

// Elicitation asks each question type in a form a client can answer: a
// freeform question a string (bounded), a yes/no question a boolean; the
// text reaches the context and false routes to the no edge. An answer
// over the bound or of the wrong type fails the gate, naming the
// property.
func TestPipelineToolGateTypes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answers map[string]any // property -> value
		path    []string
		failure string
	}{
		{name: "text and no", answers: map[string]any{"text": "mind the gap", "yes": false}, path: []string{"start", "note", "go", "hold", "done"}},
		{name: "control text and yes", answers: map[string]any{"text": strings.Repeat("\x1b[2J", 1000), "yes": true}, path: []string{"start", "note", "go", "ship", "done"}},
		{name: "text too long", answers: map[string]any{"text": strings.Repeat("x", 65537)}, failure: "maxLength"},
		{name: "wrong type", answers: map[string]any{"text": 42}, failure: `want "string"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := scripted.New(scripted.Texts(final("done")))
			var (
				mu      sync.Mutex
				schemas []string
			)
			copts := sdk.ClientOptions{ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
				b, _ := json.Marshal(req.Params.RequestedSchema)
				mu.Lock()
				schemas = append(schemas, string(b))
				mu.Unlock()
				content := map[string]any{}
				for k, v := range tc.answers {
					if strings.Contains(string(b), `"`+k+`"`) {
						content[k] = v
					}
				}
				return &sdk.ElicitResult{Action: "accept", Content: content}, nil
			}}
			s := serve(t, "typed", typedGates, &pipeline.EngineBackend{Engine: engine.New(model, engine.NewRegistry())}, pipeline.ToolOptions{}, copts)
			res := s.call(context.Background(), t, "typed", "")
			if tc.failure != "" {
				if text := resultText(res); !res.IsError || !strings.Contains(text, "node note") || !strings.Contains(text, tc.failure) {
					t.Errorf("isError %v, %s; want isError at note: %s", res.IsError, text, tc.failure)
				}
				return
			}
			if res.IsError {
				t.Fatalf("isError: %s", resultText(res))
			}
			if out := outcome(t, res); !reflect.DeepEqual(out.Path, tc.path) {
				t.Errorf("path %v, want %v", out.Path, tc.path)
			}
			mu.Lock()
			defer mu.Unlock()
			want := []string{
				`{"properties":{"text":{"maxLength":65536,"title":"Answer","type":"string"}},"required":["text"],"type":"object"}`,
				`{"properties":{"yes":{"description":"yes (true) or no (false)","title":"Yes","type":"boolean"}},"required":["yes"],"type":"object"}`,
			}
			if !reflect.DeepEqual(schemas, want) {
				t.Errorf("schemas asked\n%s\nwant\n%s", strings.Join(schemas, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}
