package mcp

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/host"
)

// servedTools are the engine's tools as a Server serves them.
type servedTools struct {
	mu      sync.Mutex // one SyncTools at a time
	names   []string
	skipped []Skipped
	specs   map[string]abi.ToolSpec // what each served tool was served as
}

// SyncTools makes the tools served those of the engine now: a tool added
// or changed (its description or schema) is served as it is now, a tool
// gone is no longer listed, and every client session is sent
// notifications/tools/list_changed (the SDK gathers the changes of one
// sync into one notification). NewServer serves the first list with it;
// Watcher calls it after each reload. An embedder that reloads plugins
// itself (host.Loader.Reload) calls Reloaded after a reload that succeeded.
//
// Clients that ignore list_changed keep calling the tools they listed: a
// tool that kept its name and schema across a reload goes on working; a
// call of a removed tool is answered, with isError, that no such tool
// exists.
func (s *Server) SyncTools(ctx context.Context) {
	s.tools.mu.Lock()
	defer s.tools.mu.Unlock()
	if s.tools.specs == nil {
		s.tools.specs = map[string]abi.ToolSpec{}
	}
	var names []string
	var skipped []Skipped
	for _, spec := range s.eng.Registry().Specs() {
		if s.opts.Run.Tools != nil && !slices.Contains(s.opts.Run.Tools, spec.Name) {
			continue
		}
		if was, ok := s.tools.specs[spec.Name]; ok && sameSpec(was, spec) {
			names = append(names, spec.Name)
			continue
		}
		schema, err := inputSchema(spec.Parameters)
		if err == nil {
			err = s.addTool(&sdk.Tool{Name: spec.Name, Description: spec.Description, InputSchema: schema})
		}
		if err != nil {
			skipped = append(skipped, Skipped{Tool: spec.Name, Err: err})
			s.log.WarnContext(ctx, "mcp: tool not served", "tool", spec.Name, "error", err)
			if _, ok := s.tools.specs[spec.Name]; ok { // served before: its old schema must go
				s.sdk.RemoveTools(spec.Name)
				delete(s.tools.specs, spec.Name)
			}
			continue
		}
		if !portableName.MatchString(spec.Name) {
			s.log.WarnContext(ctx, "mcp: a tool name some clients cannot pass to their model: served, but a client may drop it or fail; rename it (or give the plugin a tool prefix) to letters, digits, _ and -, at most 48 characters",
				"tool", spec.Name)
		}
		s.tools.specs[spec.Name] = spec
		names = append(names, spec.Name)
	}
	var gone []string
	for name := range s.tools.specs {
		if !slices.Contains(names, name) {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		slices.Sort(gone)
		s.sdk.RemoveTools(gone...)
		for _, name := range gone {
			delete(s.tools.specs, name)
		}
		s.log.InfoContext(ctx, "mcp: tools no longer served", "tools", gone)
	}
	s.tools.names, s.tools.skipped = names, skipped
}

// sameSpec reports whether a and b serve as the same MCP tool.
func sameSpec(a, b abi.ToolSpec) bool {
	return a.Description == b.Description && string(a.Parameters) == string(b.Parameters)
}

// DefaultWatchInterval is how often a Watcher looks at the plugin files
// when WatchOptions.Interval is zero.
const DefaultWatchInterval = 500 * time.Millisecond

// WatchTarget is a plugin file a Watcher follows.
type WatchTarget struct {
	Plugin *host.Plugin // the plugin the engine serves
	// Config is how the plugin is loaded; Config.Path is the file watched,
	// and every reload loads it with this configuration (its sha256 pin
	// too: a pinned plugin reloads only to the pinned bytes).
	Config host.Config
}

// WatchOptions configure a Watcher.
type WatchOptions struct {
	// Interval is how often the files are looked at (DefaultWatchInterval
	// when zero). A change is reloaded once two looks in a row agree on it
	// (the file is written): one to two intervals after it.
	Interval time.Duration
	Logger   *slog.Logger // nil: the Server's
}

// Watcher reloads plugins whose files change, while a Server serves them
// (`morph mcp serve --watch`). It polls: it compares each file's identity,
// size and modification time with the last look's, which works alike on
// every system and file system, and sees the rename over the file that
// editors and build tools do, which file change notifications (inotify)
// report on the directory, not on the file watched. A file that changed
// and settled is hashed; when its sha256 differs from the last one seen,
// host.Loader.Reload loads it as the plugin's next version, and on success
// the server's tools, prompts and resources follow (Reloaded). A refused
// file is logged (by the loader, with why) and counted; the plugin keeps
// serving its loaded version, and the same bytes are not tried again.
type Watcher struct {
	srv      *Server
	loader   *host.Loader
	interval time.Duration
	log      *slog.Logger
	files    []*watched

	mu                sync.Mutex
	reloaded, refused int
}

// watched is a WatchTarget and what the last look saw of its file.
type watched struct {
	WatchTarget
	seen     os.FileInfo // the last look's; nil when the file was missing
	settling bool        // it changed at the last look: reload when this one agrees
	sum      [32]byte    // the sha256 of the bytes last loaded or refused
}

// NewWatcher watches targets' files for srv, reloading them with loader
// (the one that loaded them). The files as they are now are taken as the
// loaded ones; a target without a file (Config.Wasm) is an error.
func NewWatcher(srv *Server, loader *host.Loader, targets []WatchTarget, opts WatchOptions) (*Watcher, error) {
	w := &Watcher{srv: srv, loader: loader, interval: opts.Interval, log: opts.Logger}
	if w.interval <= 0 {
		w.interval = DefaultWatchInterval
	}
	if w.log == nil {
		w.log = srv.log
	}
	for _, t := range targets {
		if t.Config.Path == "" || t.Config.Wasm != nil {
			return nil, fmt.Errorf("mcp: watching plugin %q: it has no file to watch", t.Plugin.Name())
		}
		f := &watched{WatchTarget: t}
		var err error
		if f.seen, err = os.Stat(t.Config.Path); err != nil {
			return nil, fmt.Errorf("mcp: watching plugin %q: %w", t.Plugin.Name(), err)
		}
		b, err := loader.ReadModule(t.Config.Path)
		if err != nil {
			return nil, fmt.Errorf("mcp: watching plugin %q: %w", t.Plugin.Name(), err)
		}
		f.sum = sha256.Sum256(b)
		w.files = append(w.files, f)
	}
	return w, nil
}

// Run looks at the files every interval until ctx ends, then returns nil.
func (w *Watcher) Run(ctx context.Context) error {
	tick := time.NewTicker(w.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			w.poll(ctx)
		}
	}
}

// Counts are the reloads a Watcher made and those refused.
func (w *Watcher) Counts() (reloaded, refused int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reloaded, w.refused
}

// poll is one look at every file.
func (w *Watcher) poll(ctx context.Context) {
	for _, f := range w.files {
		w.look(ctx, f)
	}
}

// look looks at f's file, and reloads it when it changed and settled.
func (w *Watcher) look(ctx context.Context, f *watched) {
	fi, err := os.Stat(f.Config.Path)
	if err != nil { // in the middle of a replacement, say: look again next time
		if f.seen != nil {
			w.log.DebugContext(ctx, "mcp: plugin file missing; the plugin keeps serving", "plugin", f.Plugin.Name(), "path", f.Config.Path, "error", err)
		}
		f.seen, f.settling = nil, true
		return
	}
	changed := f.seen == nil || !os.SameFile(f.seen, fi) || fi.Size() != f.seen.Size() || !fi.ModTime().Equal(f.seen.ModTime())
	f.seen = fi
	if changed {
		f.settling = true
		return
	}
	if !f.settling {
		return
	}
	f.settling = false
	// Read as a load reads it (a regular file, within module_mb): a FIFO or
	// a device in the plugin's place is refused, not read for ever. A
	// refused file is looked at again once it changes.
	b, err := w.loader.ReadModule(f.Config.Path)
	if err == nil {
		sum := sha256.Sum256(b)
		if sum == f.sum {
			return
		}
		f.sum = sum
		err = w.loader.Reload(ctx, f.Plugin, f.Config) // logs a refusal, with why
	} else {
		w.log.WarnContext(ctx, "mcp: plugin file refused; the loaded version keeps serving", "plugin", f.Plugin.Name(), "error", err)
	}
	w.mu.Lock()
	if err != nil {
		w.refused++
	} else {
		w.reloaded++
	}
	w.mu.Unlock()
	if err == nil {
		w.srv.Reloaded(ctx, f.Plugin.Name())
	}
}
