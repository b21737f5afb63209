package host

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/host/internal/guest"
	"github.com/morphhost/morph/internal/safetext"
)

// invoke is the typed call every adapter uses: JSON in, JSON out. An output
// that is not the export's payload is ErrBadOutput; an empty output decodes
// as the zero payload.
func invoke[Out, In any](ctx context.Context, p *Plugin, export string, in In) (Out, error) {
	return invokeChecked[Out](ctx, p, export, in, nil)
}

// invokeChecked is invoke that also runs check, when not nil, on the decoded
// output (the zero payload included) as part of the call: an output check
// refuses is ErrBadOutput, counted as a fault, and retires the instance, as
// an output that does not decode does.
func invokeChecked[Out, In any](ctx context.Context, p *Plugin, export string, in In, check func(*Out) error) (Out, error) {
	var out Out
	// out is decoded into, and checked, through copies of it made where
	// they are needed, which go to the heap: out itself stays on the stack,
	// and an observing hook's empty answer allocates nothing.
	err := callEncoded(ctx, p, export, func() ([]byte, error) { return json.Marshal(in) }, func(view []byte) error {
		if len(view) > 0 {
			v := new(Out)
			if err := guest.DecodeJSON(view, p.limits.MaxJSONDepth, v); err != nil {
				return err
			}
			out = *v
		}
		if check == nil {
			return nil
		}
		v := out
		err := check(&v)
		out = v
		return err
	})
	return out, err
}

// callEncoded calls export with the input encode encodes, and hands the
// output to read (see CallFunc): a read that fails is ErrBadOutput.
func callEncoded(ctx context.Context, p *Plugin, export string, encode func() ([]byte, error), read func(view []byte) error) error {
	raw, err := encode()
	if err != nil {
		return fmt.Errorf("plugin %q export %s: marshal input: %w", p.name, export, err)
	}
	return p.CallFunc(ctx, export, raw, read)
}

// hookOptions are the engine options for the engine hooks (build_prompt,
// build_params, on_tool_success, fallback_final) the plugin implements and
// has enabled; failures follow the engine's rules for failing hooks. They
// are only part of a plugin (extension gives all of it): an engine given
// them alone would skip the plugin's guard and report its hooks as the
// host's, which is why they are not exported.
func (p *Plugin) hookOptions() []engine.Option {
	var opts []engine.Option
	for _, h := range abi.Hooks {
		if h.Kind == abi.EngineHook && slices.Contains(p.hooks, h.Name) {
			opts = append(opts, engine.WithHook(h.Name, p.engineHook(h)))
		}
	}
	return opts
}

// engineHook is p's engine hook h as the engine calls it: the guest's
// answer decoded into h's output payload, nil when it answers nothing (an
// empty output or null, which the engine reads as no answer), but for
// fallback_final, which must answer a final (SPEC.md section 4): its empty
// answer is ErrBadOutput, a fault that retires the instance, as conform
// says.
func (p *Plugin) engineHook(h abi.Hook) engine.HookFunc {
	return func(ctx context.Context, in any) (any, error) {
		if h.Output == nil {
			_, err := invoke[json.RawMessage](ctx, p, h.Export, in)
			return nil, err
		}
		out := reflect.New(reflect.PointerTo(h.Output)) // a **Output, whose *Output stays nil on null
		err := callEncoded(ctx, p, h.Export, func() ([]byte, error) { return json.Marshal(in) }, func(view []byte) error {
			if len(view) > 0 {
				if err := guest.DecodeJSON(view, p.limits.MaxJSONDepth, out.Interface()); err != nil {
					return err
				}
			}
			if h.Name == abi.HookFallbackFinal && out.Elem().IsNil() {
				return errors.New("empty final: fallback_final must answer one")
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		return out.Elem().Interface(), nil
	}
}

// engineTools are the plugin's tools as engine tools; the engine validates
// their params against the declared schema before they reach the guest.
func (p *Plugin) engineTools() []engine.Tool {
	return p.toolsOf(p.toolSpecs())
}

// toolsOf are the tools of specs, served by p.
func (p *Plugin) toolsOf(specs []abi.ToolSpec) []engine.Tool {
	tools := make([]engine.Tool, len(specs))
	for i, spec := range specs {
		tools[i] = &tool{p: p, spec: spec}
	}
	return tools
}

type tool struct {
	p    *Plugin
	spec abi.ToolSpec
}

func (t *tool) Name() string            { return t.spec.Name }
func (t *tool) Description() string     { return t.spec.Description }
func (t *tool) ParameterSchema() string { return string(t.spec.Parameters) }

// Execute calls the tool. A failure is a *ToolError, whose text (what the
// engine sends the model) is the plugin's message, and the *Error with the
// full detail (the plugin, morph's export, a trap's wasm stack) is logged
// and under it for errors.As.
func (t *tool) Execute(ctx context.Context, params map[string]any) (string, error) {
	out, _, err := t.ExecuteImages(ctx, params)
	return out, err
}

// ExecuteImages is Execute with the images of the result (engine.ImageTool).
func (t *tool) ExecuteImages(ctx context.Context, params map[string]any) (string, []abi.Image, error) {
	out, err := t.ExecuteResult(ctx, params)
	return out.Output, out.Images, err
}

// ExecuteResult is Execute with the rest of the result: its images, content
// and structured result (engine.ResultTool). An image whose type is not one
// of abi.Image's or whose data is not base64, and a content item of a type
// abi.Content does not name, are dropped with a warning: a model server, or
// an MCP client, would refuse the whole result for them.
func (t *tool) ExecuteResult(ctx context.Context, params map[string]any) (abi.ToolCallOutput, error) {
	out, err := invoke[abi.ToolCallOutput](ctx, t.p, abi.ExportCallTool, abi.ToolCallInput{Tool: t.spec.Name, Params: params, CallID: engine.CallID(ctx)})
	var pe *Error
	if err == nil {
		out.Images = slices.DeleteFunc(out.Images, func(img abi.Image) bool {
			_, derr := base64.StdEncoding.DecodeString(img.Data)
			if bad := !slices.Contains(imageTypes, img.MimeType) || derr != nil; bad {
				t.p.log.WarnContext(ctx, "tool result image dropped: want image/png, image/jpeg, image/gif or image/webp, base64",
					"tool", t.spec.Name, "mime_type", safetext.Truncate(img.MimeType, 64), "base64_error", derr)
				return true
			}
			return false
		})
		out.Content = slices.DeleteFunc(out.Content, func(c abi.Content) bool {
			_, derr := base64.StdEncoding.DecodeString(c.Data)
			if bad := !slices.Contains(contentTypes, c.Type) || derr != nil; bad {
				t.p.log.WarnContext(ctx, "tool result content dropped: want type audio, resource or resource_link, data base64",
					"tool", t.spec.Name, "type", safetext.Truncate(c.Type, 64), "base64_error", derr)
				return true
			}
			return false
		})
		return out, nil
	}
	if !errors.As(err, &pe) {
		return abi.ToolCallOutput{Output: out.Output}, err
	}
	level := slog.LevelWarn
	if pe.Kind == ErrGuest { // the tool's own answer, not a fault
		level = slog.LevelDebug
	}
	t.p.log.Log(ctx, level, "tool call failed", "tool", t.spec.Name, "err", err)
	return abi.ToolCallOutput{}, &ToolError{Tool: t.spec.Name, Err: pe, timeout: t.p.limits.Timeout}
}

// contentTypes are the types of abi.Content.
var contentTypes = []string{"audio", "resource", "resource_link"}

// imageTypes are the image types models take (abi.Image).
var imageTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// ToolError is the failure of a plugin's tool as the engine sees it. Its
// text, which the engine sends the model as the observation, is what the
// model can act on: the plugin's own message for an error the tool
// reported, the first line of a trap's cause ("plugin trapped: wasm error:
// unreachable"), the deadline of a call that timed out; not the plugin's
// name, morph's internal export names or the wasm stack. Err, which
// errors.Is and errors.As see, has the full detail, which the plugin's log
// has too.
type ToolError struct {
	Tool    string // the tool's name
	Err     *Error
	timeout time.Duration // the plugin's call deadline
}

// Error is the text for the model (see ToolError), escaped as Error.Error's.
func (e *ToolError) Error() string {
	pe := e.Err
	var text string
	switch pe.Kind {
	case ErrGuest:
		text = pe.Msg
		if text == "" {
			text = "the tool failed without a message"
		}
	case ErrTimeout:
		text = pe.Kind.Error()
		if e.timeout > 0 {
			text += " after " + e.timeout.String()
		}
	default:
		text = pe.Kind.Error()
		cause := pe.Msg
		if pe.Kind == ErrTrap || cause == "" {
			cause = ""
			if pe.Err != nil {
				cause = pe.Err.Error()
			}
		}
		if first, _, _ := strings.Cut(strings.TrimSpace(cause), "\n"); first != "" {
			text += ": " + first
		}
	}
	return safetext.Escape(text)
}

// Unwrap returns the plugin failure with its full detail.
func (e *ToolError) Unwrap() error { return e.Err }
