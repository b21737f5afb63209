package extism

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/host/internal/guest"
	"github.com/morphhost/morph/host/internal/interrupt"
)

// extismUser is the namespace of the host functions an Extism host gives
// its plugins beside Extism's own (the PDKs' host_fn!, //go:wasmimport
// extism:host/user ...).
const extismUser = "extism:host/user"

// UserModule is extismUser, the one extism:* name a linked module may
// have: its exports add to the namespace's host functions (linked.go).
const UserModule = extismUser

// builtinUser are the extism:host/user functions morph provides: those of
// hyper-mcp's v2 plugin interface (templates/plugins/go/imports.go), in
// which a plugin talks to its MCP client. morph's agent is that client,
// with no prompts, resources, roots or sampling of its own:
//
//   - notify_tool_list_changed marks the call (guest.CallState), after which
//     the host describes the instance again;
//   - notify_logging_message and notify_progress log under the plugin's name,
//     within the call's log budget, and go to the caller's notifier, if the
//     call has one (engine.CallNotifierOf: morph mcp serve's client), progress
//     only when the caller gave a token, which replaces the plugin's (a
//     plugin must not address another request's progress);
//   - notify_resource_updated, notify_resource_list_changed and
//     notify_prompt_list_changed go to the caller's notifier when it takes
//     them (engine.CallItemNotifier: morph mcp serve, which tells the
//     clients subscribed to the resource, or lists the plugin's prompts
//     and resources again), else they are logged;
//   - list_roots answers no roots, create_elicitation the caller's user's
//     answer when the caller can ask one (engine.CallElicitor: morph mcp serve's
//     client, within the call's deadline), else a decline (MCP's
//     answer of a user who does not answer);
//   - create_message (sampling) asks the caller's model when the caller can
//     (engine.CallSampler: morph mcp serve's client, when it declared
//     sampling), else answers an error the plugin reads (createMessage); an
//     embedding host that wants to lend its own model registers one of
//     that name (host.Config.HostFunctions).
//
// An embedding host's function of the same name replaces morph's.
func builtinUser(env guest.Env) []guest.HostFunc {
	ptr := []api.ValueType{api.ValueTypeI64}
	itemsChanged := func(ctx context.Context, _ guest.BlockMemory, _ []uint64) error {
		if in, ok := engine.CallNotifierOf(ctx).(engine.CallItemNotifier); ok {
			in.ItemsChanged()
		}
		return nil
	}
	// notified logs a notification and hands it to forward when the call
	// has a notifier and it decodes.
	notified := func(forward func(engine.CallNotifier, mcpNotification)) func(context.Context, guest.BlockMemory, []uint64) error {
		return func(ctx context.Context, mem guest.BlockMemory, stack []uint64) error {
			b, err := mem.Read(stack[0])
			if err != nil {
				return err
			}
			var msg mcpNotification
			ok := guest.DecodeJSON(b, env.Limits.MaxJSONDepth, &msg) == nil
			logNotification(ctx, b, msg, ok)
			if n := engine.CallNotifierOf(ctx); n != nil && ok {
				forward(n, msg)
			}
			return nil
		}
	}
	answer := func(v string) func(context.Context, guest.BlockMemory, []uint64) error {
		return func(_ context.Context, mem guest.BlockMemory, stack []uint64) (err error) {
			stack[0], err = mem.Write([]byte(v))
			return err
		}
	}
	return []guest.HostFunc{
		{Name: "notify_tool_list_changed", Call: func(ctx context.Context, _ guest.BlockMemory, _ []uint64) error {
			guestOf(ctx).state.MarkToolsChanged()
			return nil
		}},
		{Name: "notify_logging_message", Params: ptr, Call: notified(func(n engine.CallNotifier, msg mcpNotification) {
			level := msg.Level
			if _, ok := mcpLogLevels[level]; !ok {
				level = "info"
			}
			n.Log(level, msg.Logger, msg.Data)
		})},
		{Name: "notify_progress", Params: ptr, Call: notified(func(n engine.CallNotifier, msg mcpNotification) {
			if n.ProgressToken() != nil && msg.Progress != nil {
				n.Progress(*msg.Progress, msg.Total, msg.Message)
			}
		})},
		{Name: "notify_prompt_list_changed", Call: itemsChanged},
		{Name: "notify_resource_list_changed", Call: itemsChanged},
		{Name: "notify_resource_updated", Params: ptr, Call: notified(func(n engine.CallNotifier, msg mcpNotification) {
			if in, ok := n.(engine.CallItemNotifier); ok && msg.URI != "" {
				in.ResourceUpdated(msg.URI)
			}
		})},
		{Name: "list_roots", Results: ptr, Call: answer(`{"roots":[]}`)},
		{Name: "create_elicitation", Params: ptr, Results: ptr, Call: elicit},
		{Name: "create_message", Params: ptr, Results: ptr, Call: createMessage(env)},
	}
}

// elicit is create_elicitation: the caller's user's answer, or a decline.
func elicit(ctx context.Context, mem guest.BlockMemory, stack []uint64) (err error) {
	answer := []byte(`{"action":"decline"}`)
	if el, ok := engine.CallNotifierOf(ctx).(engine.CallElicitor); ok {
		params, err := mem.Read(stack[0])
		if err != nil {
			return err
		}
		cctx, cancel := guest.CallContext(ctx)
		res, err := el.Elicit(cctx, params)
		cancel()
		// Over the plugin's input limit the answer could not be written
		// to it: the call would trap.
		limit := min(engine.MaxElicitAnswer, guestOf(ctx).m.env.Limits.MaxInputBytes)
		switch {
		case err != nil:
			guestOf(ctx).state.Log().Warn(ctx, "create_elicitation answered decline: the client did not answer", "error", err)
		case len(res) > limit:
			guestOf(ctx).state.Log().Warn(ctx, "create_elicitation answered decline: the client's answer is too long", "bytes", len(res), "max", limit)
		default:
			answer = res
		}
	}
	stack[0], err = mem.Write(answer)
	return err
}

// mcpNotification is the parameters of MCP's notifications/message
// ({"level": "info", "data": ..., "logger": ...}) or notifications/progress
// ({"progressToken": ..., "progress": 1, "total": 2, "message": ...}) or
// notifications/resources/updated ({"uri": ...}).
type mcpNotification struct {
	URI      string          `json:"uri"`
	Level    string          `json:"level"`
	Logger   string          `json:"logger"`
	Data     json.RawMessage `json:"data"`
	Progress *float64        `json:"progress"`
	Total    float64         `json:"total"`
	Message  string          `json:"message"`
}

// logNotification logs a notification's bytes b under the plugin's name,
// within the call's log budget: a logging message at its level with its
// data (the text of a string), anything else (progress) at debug as it is.
func logNotification(ctx context.Context, b []byte, msg mcpNotification, decoded bool) {
	level := slog.LevelDebug
	if decoded && msg.Level != "" {
		level = mcpLogLevels[msg.Level]
		var text string
		if json.Unmarshal(msg.Data, &text) == nil {
			b = []byte(text)
		} else if len(msg.Data) > 0 {
			b = msg.Data
		}
	}
	guestOf(ctx).state.Log().Message(ctx, level, b)
}

// mcpLogLevels are MCP's logging levels (RFC 5424's) as slog's; a level
// not listed logs at slog.LevelInfo (0).
var mcpLogLevels = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "notice": slog.LevelInfo,
	"warning": slog.LevelWarn, "error": slog.LevelError, "critical": slog.LevelError, "alert": slog.LevelError, "emergency": slog.LevelError}

// builtinUserNames are the names of builtinUser's functions, for messages.
func builtinUserNames() []string {
	var names []string
	for _, f := range builtinUser(guest.Env{}) {
		names = append(names, f.Name)
	}
	return names
}

// userFunctions are the host functions of a plugin by module and name
// (hostFuncKey): morph's, and the embedding host's over them.
func userFunctions(env guest.Env) map[hostFuncKey]guest.HostFunc {
	fns := map[hostFuncKey]guest.HostFunc{}
	for _, f := range append(builtinUser(env), env.HostFuncs...) {
		f.Module = cmp.Or(f.Module, extismUser)
		fns[hostFuncKey{f.Module, f.Name}] = f
	}
	return fns
}

// hostFuncKey is how userFunctions keys a function: as the guest imports it.
type hostFuncKey struct{ module, name string }

// ReservedModule reports whether an embedding host's function may not be
// imported from module: Extism's kernel namespace, the instrumentation's
// (interrupt.Module) and WASI's.
func ReservedModule(module string) bool {
	return module == extismEnv || module == interrupt.Module || module == "wasi_snapshot_preview1"
}

// instantiateUser instantiates fns in r, a host module per namespace. Each
// function runs with a context that ends at the call's deadline, or when
// the caller or the plugin ends the call (guest.CallContext: the guest's
// own code is stopped by its instrumentation, a host function that blocks
// by its context), and with the kernel's memory, reading at most the
// plugin's output limit and writing at most its input limit; an error
// traps the call with the function's name.
func (m *Module) instantiateUser(ctx context.Context, r wazero.Runtime, fns map[hostFuncKey]guest.HostFunc) error {
	byModule := map[string][]guest.HostFunc{}
	for _, f := range fns {
		byModule[f.Module] = append(byModule[f.Module], f)
	}
	for _, module := range slices.Sorted(maps.Keys(byModule)) {
		if slices.ContainsFunc(m.env.Linked, func(l guest.LinkedModule) bool { return l.Name == module }) {
			continue // a linked module's namespace: compileLinked adds them to its proxies
		}
		b := r.NewHostModuleBuilder(module)
		for _, f := range byModule[module] {
			b.NewFunctionBuilder().WithGoModuleFunction(m.hostFunc(f), f.Params, f.Results).WithName(f.Name).Export(f.Name)
		}
		if _, err := b.Instantiate(ctx); err != nil {
			return fmt.Errorf("host functions of %s: %w", module, err)
		}
	}
	return nil
}

// hostFunc is f as a wazero host function (see instantiateUser).
func (m *Module) hostFunc(f guest.HostFunc) api.GoModuleFunc {
	key := f.Module + "." + f.Name
	return func(ctx context.Context, _ api.Module, stack []uint64) {
		cctx, cancel := guest.CallContext(ctx)
		err := f.Call(cctx, blockMemory{k: kernelOf(ctx), m: m}, stack)
		cancel()
		if err != nil {
			panic(fmt.Errorf("host function %s: %w", key, err))
		}
	}
}

// blockMemory is guest.BlockMemory over the calling instance's Kernel,
// bounded by the plugin's limits.
type blockMemory struct {
	k *Kernel
	m *Module
}

func (b blockMemory) Read(offset uint64) ([]byte, error) {
	view, ok := b.k.Read(offset)
	switch {
	case !ok:
		return nil, fmt.Errorf("offset %d is not an Extism memory block", offset)
	case len(view) > b.m.env.Limits.MaxOutputBytes:
		return nil, fmt.Errorf("the block at offset %d is %d bytes, over the plugin's output limit of %d", offset, len(view), b.m.env.Limits.MaxOutputBytes)
	}
	return slices.Clone(view), nil
}

func (b blockMemory) Write(p []byte) (uint64, error) {
	if len(p) > b.m.env.Limits.MaxInputBytes {
		return 0, fmt.Errorf("%d bytes, over the plugin's input limit of %d", len(p), b.m.env.Limits.MaxInputBytes)
	}
	off := b.k.Write(p)
	if off == 0 && len(p) > 0 {
		return 0, fmt.Errorf("%d bytes do not fit in the Extism memory", len(p))
	}
	return off, nil
}
