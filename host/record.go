package host

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/record"
)

// Recording: a Loader with LoaderOptions.Recorder registers every plugin
// it loads with the recorder, and each of those plugins records its calls
// at the ABI boundary, in (*Plugin).call (hooks, tools, stage and MCP
// provider exports; not describe, session notices or destroy, which do not
// go through it). Off, the cost is one nil check per call.

// recordedKey marks a context whose call recordCall is already recording.
type recordedKey struct{}

// hookOfExport names the hook each hook export serves.
var hookOfExport = func() map[string]string {
	m := map[string]string{}
	for _, exports := range []map[string]string{abi.EngineHookExports, abi.MiddlewareExports} {
		for hook, export := range exports {
			m[export] = hook
		}
	}
	return m
}()

// recordPlugin registers p, just loaded from src with cfg, with the
// loader's recorder, and makes p record its calls.
func (l *Loader) recordPlugin(p *Plugin, cfg Config, src *source) {
	if l.rec == nil {
		return
	}
	p.rec = l.rec
	m, _ := json.Marshal(p.manifest) // a manifest decoded from JSON marshals again
	grants := map[string][]string{}
	if len(cfg.Grants.Env) > 0 {
		grants["env"] = cfg.Grants.Env // names only: values never reach the file
	}
	if len(cfg.Grants.Hosts) > 0 {
		grants["http"] = cfg.Grants.Hosts
	}
	for _, g := range cfg.Grants.Paths {
		grants["fs"] = append(grants["fs"], g.Guest)
	}
	if err := l.rec.Plugin(record.PluginInfo{Name: p.name, SHA256: hex.EncodeToString(src.sum[:]), Loader: p.loader,
		ABIVersion: abi.Version, Path: cfg.Path, Manifest: m, Grants: grants}); err != nil {
		l.log.Warn("recording stopped", "err", err)
	}
}

// recordCall is call with the call recorded: its input, its output (copied
// from guest memory inside read, before the instance is reused), its
// fault and its duration.
func (p *Plugin) recordCall(ctx context.Context, sh *shard, export string, input []byte, read func(view []byte) error) error {
	var out []byte
	start := time.Now()
	err := p.call(context.WithValue(ctx, recordedKey{}, true), sh, export, input, func(view []byte) error {
		out = append([]byte{}, view...)
		return read(view)
	})
	c := record.Call{Plugin: p.root.name, Export: export, Hook: hookOfExport[export], Input: input, Output: out, Duration: time.Since(start)}
	if rc := engine.RunContext(ctx); rc != nil {
		c.Session, c.Turn = rc.SessionID, rc.Turn
	}
	if export == abi.ExportCallTool {
		var in struct{ Tool string }
		if json.Unmarshal(input, &in) == nil {
			c.Tool = in.Tool
		}
	}
	if err != nil {
		c.Fault = &record.Fault{Kind: KindName(err), Message: err.Error()}
	}
	if rerr := p.root.rec.Call(c); rerr != nil {
		msg := fmt.Sprintf("recording stopped: %v", rerr)
		if !engine.Warn(ctx, p.root.name, msg) {
			p.log.Warn(msg)
		}
	}
	return err
}

// recording reports whether ctx's call must be recorded (the plugin has a
// recorder, and recordCall is not already recording it).
func (p *Plugin) recording(ctx context.Context) bool {
	return p.root.rec != nil && ctx.Value(recordedKey{}) == nil
}
