package host

import (
	"bytes"
	"context"
	"log/slog"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/morphhost/morph/abi"
)

// instantiateHostModule provides morph:host/v1 in the plugin's runtime. The
// functions close over the plugin, which is how they know whose log, config
// and grants they serve. Out-of-bounds pointers are the guest's error: log
// drops the message, config_get answers -1, http_request an error result;
// none traps. http_request is there for every plugin: one without the grant
// gets an error result it can handle (ErrNotGranted's message), not a
// module that fails to load.
func (p *Plugin) instantiateHostModule(ctx context.Context, r wazero.Runtime) error {
	_, err := r.NewHostModuleBuilder(abi.HostModule).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(p.hostLog),
		[]api.ValueType{api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32}, nil).Export(abi.ImportLog).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(p.hostConfigGet),
		[]api.ValueType{api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}).Export(abi.ImportConfigGet).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(p.hostHTTPRequest),
		[]api.ValueType{api.ValueTypeI32, api.ValueTypeI32}, []api.ValueType{api.ValueTypeI64}).Export(abi.ImportHTTPRequest).
		Instantiate(ctx)
	return err
}

func (p *Plugin) hostLog(ctx context.Context, mod api.Module, stack []uint64) {
	level, ptr, n := int32(stack[0]), uint32(stack[1]), uint32(stack[2])
	if int(n) > p.limits.MaxLogBytes {
		n = uint32(p.limits.MaxLogBytes)
	}
	msg, ok := mod.Memory().Read(ptr, n)
	if !ok {
		p.log.WarnContext(ctx, "guest log call with an out-of-bounds message", "ptr", ptr, "len", n)
		return
	}
	p.log.Log(ctx, slog.Level(level), string(msg))
}

func (p *Plugin) hostConfigGet(_ context.Context, mod api.Module, stack []uint64) {
	kptr, klen, optr, ocap := uint32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[3])
	stack[0] = api.EncodeI32(-1)
	key, ok := mod.Memory().Read(kptr, klen)
	if !ok {
		return
	}
	val, ok := p.values[string(key)]
	if !ok {
		return
	}
	if uint32(len(val)) <= ocap && !mod.Memory().WriteString(optr, val) {
		return
	}
	stack[0] = api.EncodeI32(int32(len(val)))
}

// logWriter turns a guest's stdout and stderr into log lines under the
// plugin's name, up to a byte budget per instance, so a chatty or hostile
// guest cannot flood the host's log.
type logWriter struct {
	p      *Plugin
	mu     sync.Mutex
	buf    bytes.Buffer
	budget int
	capped bool
}

func newLogWriter(p *Plugin, budget int) *logWriter { return &logWriter{p: p, budget: budget} }

func (w *logWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(b)
	if w.budget <= 0 {
		if !w.capped {
			w.capped = true
			w.p.log.Warn("guest output over the log limit; dropping the rest", "limit_bytes", w.p.limits.MaxLogBytes)
		}
		return n, nil
	}
	if len(b) > w.budget {
		b = b[:w.budget]
	}
	w.budget -= len(b)
	w.buf.Write(b)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil { // no newline yet: keep the partial line
			w.buf.Reset()
			w.buf.WriteString(line)
			break
		}
		w.p.log.Info(line[:len(line)-1], "stream", "guest")
	}
	return n, nil
}
