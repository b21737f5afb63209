package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/morphhost/morph/abi"
)

// imageTool answers a caption and one image (data, or a small PNG's start).
type imageTool struct {
	testTool
	data string
}

func (t *imageTool) ExecuteImages(context.Context, map[string]any) (string, []abi.Image, error) {
	return "a chart [image 1: image/png]", []abi.Image{{MimeType: "image/png", Data: cmp.Or(t.data, "iVBORw0KGgo=")}}, nil
}

// A tool result's images reach the model with its observation when the
// model takes images, and only then; the text is the same either way.
func TestToolImagesReachTheModel(t *testing.T) {
	for _, on := range []bool{true, false} {
		m := script(toolCall("chart", `{}`), finalReply("done"))
		tool := &imageTool{testTool: testTool{name: "chart", schema: `{"type":"object"}`}}
		e := New(m, nil, WithBuiltinTools(tool), WithImages(on))
		if _, _, err := e.Run(context.Background(), "draw", RunOptions{}); err != nil {
			t.Fatal(err)
		}
		obs := m.last().Messages[len(m.last().Messages)-1]
		if obs.Content != "Tool Result (chart):\na chart [image 1: image/png]" {
			t.Errorf("images %v: observation %q", on, obs.Content)
		}
		switch {
		case !on && len(obs.Images) != 0:
			t.Errorf("images off: the model got %d images, want none", len(obs.Images))
		case on && len(obs.Images) != 1:
			t.Errorf("images on: the model got %d images, want 1", len(obs.Images))
		case on && obs.Images[0].Data != "iVBORw0KGgo=":
			t.Errorf("images on: the image's Data = %q, want the tool's %q", obs.Images[0].Data, "iVBORw0KGgo=")
		}
	}
}

// Images do not go around the observation's limit nor around a middleware
// that rewrote the result (a redaction cannot see them): both drop them,
// with a warning.
func TestToolImagesDropped(t *testing.T) {
	redact := &Funcs{ID: "redact", AfterToolCall: func(_ context.Context, in abi.AfterToolCallInput) (abi.AfterToolCallOutput, error) {
		s := "[redacted]"
		return abi.AfterToolCallOutput{Output: &s}, nil
	}}
	for _, c := range []struct {
		name string
		opts []Option
		want string
	}{
		{"rewritten", []Option{WithMiddleware(redact)}, "after_tool_call middleware rewrote the result"},
		{"too large", []Option{WithMaxObservationBytes(150)}, "their 200 bytes are over the observation limit of 150"},
	} {
		m := script(toolCall("chart", `{}`), finalReply("done"))
		var warnings []string
		tool := &imageTool{testTool: testTool{name: "chart", schema: `{"type":"object"}`}, data: strings.Repeat("A", 200)}
		opts := append([]Option{WithBuiltinTools(tool), WithImages(true),
			WithEventHandler(func(ev Event) {
				if ev.Kind == EventWarning {
					warnings = append(warnings, ev.Message)
				}
			})}, c.opts...)
		if _, _, err := New(m, nil, opts...).Run(context.Background(), "draw", RunOptions{}); err != nil {
			t.Fatal(err)
		}
		if obs := m.last().Messages[len(m.last().Messages)-1]; len(obs.Images) != 0 {
			t.Errorf("%s: images sent: %+v", c.name, obs.Images)
		}
		if len(warnings) != 1 || !strings.Contains(warnings[0], c.want) {
			t.Errorf("%s: warnings %q", c.name, warnings)
		}
	}
}

// CallToolResult gives its caller the images a model would get: with
// WithImages, the tool's; without it, or after a middleware rewrote the
// output, none.
func TestCallToolResultImages(t *testing.T) {
	redact := &Funcs{ID: "redact", AfterToolCall: func(_ context.Context, in abi.AfterToolCallInput) (abi.AfterToolCallOutput, error) {
		s := "[redacted]"
		return abi.AfterToolCallOutput{Output: &s}, nil
	}}
	for _, c := range []struct {
		name   string
		opts   []Option
		images int
		output string
	}{
		{"images on", []Option{WithImages(true)}, 1, "a chart [image 1: image/png]"},
		{"images off", nil, 0, "a chart [image 1: image/png]"},
		{"rewritten", []Option{WithImages(true), WithMiddleware(redact)}, 0, "[redacted]"},
	} {
		tool := &imageTool{testTool: testTool{name: "chart", schema: `{"type":"object"}`}}
		e := New(script(), nil, append([]Option{WithBuiltinTools(tool)}, c.opts...)...)
		res, err := e.CallToolResult(context.Background(), "s", "chart", map[string]any{}, RunOptions{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if res.Output != c.output || len(res.Images) != c.images {
			t.Errorf("%s: output %q with %d images, want %q with %d", c.name, res.Output, len(res.Images), c.output, c.images)
		}
		if c.images > 0 && res.Images[0].Data != "iVBORw0KGgo=" {
			t.Errorf("%s: image data %q, want the tool's", c.name, res.Images[0].Data)
		}
	}
}

// resultTool answers a caption, an audio item, an embedded resource and a
// structured result (a ResultTool), and reports progress and a log
// message to the call's notifier, if any, while it runs.
type resultTool struct {
	testTool
	data string
}

func (t *resultTool) ExecuteResult(ctx context.Context, _ map[string]any) (abi.ToolCallOutput, error) {
	if n := CallNotifierOf(ctx); n != nil {
		n.Progress(1, 2, "half")
		n.Log("info", "", json.RawMessage(`"working"`))
	}
	return abi.ToolCallOutput{Output: "a greeting [audio]",
		Content: []abi.Content{{Type: "audio", MimeType: "audio/wav", Data: cmp.Or(t.data, "UklGRg==")},
			{Type: "resource", URI: "test://greeting", MimeType: "text/plain", Text: "hello"}},
		Structured: json.RawMessage(`{"words":1}`)}, nil
}

// CallToolResult gives its caller a ResultTool's content and structured
// result, whether or not the model takes images; not after a middleware
// rewrote the output (a redaction cannot see them), nor over the
// observation limit, each with a warning. The model's observation is the
// text alone either way.
func TestCallToolResultContent(t *testing.T) {
	redact := &Funcs{ID: "redact", AfterToolCall: func(_ context.Context, in abi.AfterToolCallInput) (abi.AfterToolCallOutput, error) {
		s := "[redacted]"
		return abi.AfterToolCallOutput{Output: &s}, nil
	}}
	for _, c := range []struct {
		name    string
		opts    []Option
		data    string
		kept    bool
		output  string
		warning string
	}{
		{"images off", nil, "", true, "a greeting [audio]", ""},
		{"rewritten", []Option{WithMiddleware(redact)}, "", false, "[redacted]", "after_tool_call middleware rewrote the result"},
		{"too large", []Option{WithMaxObservationBytes(220)}, strings.Repeat("A", 300), false, "a greeting [audio]", "the 3 items beyond text and images of tool \"greet\"'s result are not sent: their 350 bytes are over the observation limit of 220"},
	} {
		var warnings []string
		tool := &resultTool{testTool: testTool{name: "greet", schema: `{"type":"object"}`}, data: c.data}
		e := New(script(), nil, append([]Option{WithBuiltinTools(tool), WithEventHandler(func(ev Event) {
			if ev.Kind == EventWarning {
				warnings = append(warnings, ev.Message)
			}
		})}, c.opts...)...)
		res, err := e.CallToolResult(context.Background(), "s", "greet", map[string]any{}, RunOptions{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if res.Output != c.output {
			t.Errorf("%s: output %q, want %q", c.name, res.Output, c.output)
		}
		if got := len(res.Content) == 2 && string(res.Structured) == `{"words":1}`; got != c.kept {
			t.Errorf("%s: content %+v, structured %s; want them kept: %v", c.name, res.Content, res.Structured, c.kept)
		}
		if c.kept && (res.Content[0].Type != "audio" || res.Content[1].Text != "hello") {
			t.Errorf("%s: content %+v, want the tool's", c.name, res.Content)
		}
		if c.warning == "" && len(warnings) != 0 || c.warning != "" && (len(warnings) != 1 || !strings.Contains(warnings[0], c.warning)) {
			t.Errorf("%s: warnings %q, want one with %q", c.name, warnings, c.warning)
		}
	}
}

// notes is a CallNotifier that keeps what it is told.
type notes struct{ got []string }

func (r *notes) Progress(progress, total float64, message string) {
	r.got = append(r.got, fmt.Sprintf("progress %v/%v %s", progress, total, message))
}
func (r *notes) Log(level, logger string, data json.RawMessage) {
	r.got = append(r.got, fmt.Sprintf("log %s %s", level, data))
}
func (r *notes) ProgressToken() any { return "t" }

// The CallNotifier in CallToolResult's context reaches the tool.
func TestCallNotifierReachesTheTool(t *testing.T) {
	tool := &resultTool{testTool: testTool{name: "greet", schema: `{"type":"object"}`}}
	e := New(script(), nil, WithBuiltinTools(tool))
	var r notes
	if _, err := e.CallToolResult(WithCallNotifier(context.Background(), &r), "s", "greet", map[string]any{}, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"progress 1/2 half", `log info "working"`}; !slices.Equal(r.got, want) {
		t.Errorf("the notifier got %q, want %q", r.got, want)
	}
}
