package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/builtin"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/mcp"
)

// logBuffer is a log the tests read while servers write to it.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// clientEngine is an engine with the built-in calc and the servers of
// cfgs, initialized, closed when t ends; and the log of both.
func clientEngine(t *testing.T, cfgs ...mcp.ServerConfig) (*engine.Engine, *mcp.Servers, *logBuffer, error) {
	t.Helper()
	logs := &logBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg := engine.NewRegistry()
	calc, _ := builtin.Lookup("calc")
	reg.RegisterFrom(engine.SourceBuiltin, calc)
	servers := mcp.NewServers(cfgs, mcp.ServersOptions{Logger: logger, Check: reg.CheckTool})
	eng := engine.New(nil, reg, engine.WithLogger(logger), engine.WithExtenders(servers.Extenders()...))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := eng.Initialize(ctx)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		eng.Close(ctx)
		servers.Close(ctx)
	})
	return eng, servers, logs, err
}

// fixtureServer is an entry running the fixture in mode.
func fixtureServer(name, mode string) mcp.ServerConfig {
	return mcp.ServerConfig{Name: name, Command: os.Args[0], Env: map[string]string{fixtureEnv: mode}, Prefix: name}
}

// callRemote calls the tool called name of eng's registry directly, as the
// engine would, and gives its text, images and error.
func callRemote(t *testing.T, eng *engine.Engine, name string, params map[string]any) (string, []abi.Image, error) {
	t.Helper()
	tool, ok := eng.Registry().Get(name)
	if !ok {
		t.Fatalf("no tool %q (tools: %v)", name, eng.Registry().Names())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return tool.(engine.ImageTool).ExecuteImages(ctx, params)
}

// eventually polls cond for up to a minute.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after a minute: not %s", what)
		}
	}
}

// A stdio server's tools join the registry prefixed, a tool the engine
// refuses (a name with a space) is left out with a warning naming the
// server; text, images, structured content and isError results reach the
// engine as text, images and a *ToolError.
func TestClientStdioTools(t *testing.T) {
	t.Parallel()
	eng, _, _, err := clientEngine(t, fixtureServer("fx", "ok"))
	if err != nil {
		t.Fatal(err)
	}
	names := strings.Join(eng.Registry().Names(), " ")
	for _, want := range []string{"calc", "fx.echo", "fx.image", "fx.structured", "fx.sleep"} {
		if !strings.Contains(" "+names+" ", " "+want+" ") {
			t.Errorf("tools %s: no %s", names, want)
		}
	}
	if strings.Contains(names, "bad") {
		t.Errorf("tools %s: the badly named one is there", names)
	}
	if w := strings.Join(eng.Status().Warnings, "\n"); !strings.Contains(w, `plugin "fx": tool "bad name" left out`) {
		t.Errorf("warnings %q: none names the left-out tool", w)
	}
	if out, _, err := callRemote(t, eng, "fx.echo", map[string]any{"message": "hi"}); err != nil || out != "echo: hi" {
		t.Errorf("echo: %q, %v", out, err)
	}
	out, images, err := callRemote(t, eng, "fx.image", nil)
	if err != nil || out != "a pixel\n[image 1: image/png]" || len(images) != 1 || images[0].Data != "UE5HREFUQQ==" || images[0].MimeType != "image/png" {
		t.Errorf("image: %q, %+v, %v", out, images, err)
	}
	if out, _, err := callRemote(t, eng, "fx.structured", nil); err != nil || out != `{"temperature":21}` {
		t.Errorf("structured: %q, %v", out, err)
	}
	var te *mcp.ToolError
	if _, _, err := callRemote(t, eng, "fx.fail", nil); !errors.As(err, &te) || err.Error() != "no such file" || te.Server != "fx" {
		t.Errorf("fail: %v, want a *ToolError reading no such file", err)
	}
	// Through the engine, as a model's call: the model reads the text.
	if _, err := eng.CallTool(context.Background(), "s1", "fx.fail", map[string]any{}, engine.RunOptions{}); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("CallTool fx.fail: %v", err)
	}
}

// A stdio server's environment is its entry's env, PATH and HOME: not the
// model's API key, nor anything else of morph's.
func TestClientStdioEnvironment(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-not-for-servers")
	t.Setenv("MORPH_OTHER", "x")
	eng, _, _, err := clientEngine(t, fixtureServer("fx", "ok"))
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := callRemote(t, eng, "fx.env", nil)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range strings.Split(out, "\n") {
		k, _, _ := strings.Cut(kv, "=")
		keys = append(keys, k)
	}
	if got := strings.Join(keys, " "); got != "HOME PATH "+fixtureEnv && got != "PATH HOME "+fixtureEnv {
		t.Errorf("the server's environment has %s; want HOME, PATH and %s only", got, fixtureEnv)
	}
}

// A call with no answer within the timeout fails with ErrCallTimeout, the
// server is told (notifications/cancelled: the fixture says so on its
// standard error, which morph logs), and the server goes on answering.
func TestClientCallTimeoutCancels(t *testing.T) {
	t.Parallel()
	cfg := fixtureServer("fx", "ok")
	cfg.Timeout = 2 * time.Second // the echo after it must answer within it, on a loaded machine too
	eng, _, logs, err := clientEngine(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = callRemote(t, eng, "fx.sleep", nil)
	var se *mcp.ServerError
	if !errors.Is(err, mcp.ErrCallTimeout) || !errors.As(err, &se) || se.Server != "fx" || !strings.Contains(err.Error(), "2s (timeout)") {
		t.Fatalf("sleep: %v, want ErrCallTimeout naming fx and the timeout", err)
	}
	eventually(t, "the server told of the cancellation", func() bool { return strings.Contains(logs.String(), "cancelled request") })
	if out, _, err := callRemote(t, eng, "fx.echo", map[string]any{"message": "still"}); err != nil || out != "echo: still" {
		t.Errorf("echo after the timeout: %q, %v", out, err)
	}
}

// A server that exits mid-call: the call fails with ErrServerDown, naming
// the server, its exit status and its last standard error, escaped (the
// fixture writes an escape sequence); its tools fail the same way after.
func TestClientServerCrashMidCall(t *testing.T) {
	t.Parallel()
	cfg := fixtureServer("fx", "ok")
	cfg.Restart = mcp.RestartNever
	eng, servers, logs, err := clientEngine(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = callRemote(t, eng, "fx.crash", nil)
	if !errors.Is(err, mcp.ErrServerDown) || !strings.Contains(err.Error(), `mcp server "fx"`) || !strings.Contains(err.Error(), "exit status 3") ||
		!strings.Contains(err.Error(), `crashing now \x1b[31m`) {
		t.Fatalf("crash: %v, want ErrServerDown naming fx, exit status 3 and the escaped standard error", err)
	}
	if strings.Contains(logs.String(), "\x1b") {
		t.Error("the log holds a raw escape character of the server's")
	}
	if _, _, err := callRemote(t, eng, "fx.echo", nil); !errors.Is(err, mcp.ErrServerDown) || !strings.Contains(err.Error(), `restart = "never"`) {
		t.Errorf("echo after the crash: %v, want ErrServerDown, restart never", err)
	}
	if st := servers.Stats(); st[0].Running {
		t.Errorf("stats %+v: running after the crash", st)
	}
}

// A server that crashed is started again by the next call (restart =
// "on-failure", the default), which succeeds on the fresh process, its
// tool list read again: a tool the old process added (echo2, after
// change) is gone. Past max_restarts it stays down, saying so.
func TestClientRestart(t *testing.T) {
	t.Parallel()
	cfg := fixtureServer("fx", "ok")
	cfg.MaxRestarts = 2
	eng, servers, _, err := clientEngine(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	has := func(name string) bool { _, ok := eng.Registry().Get(name); return ok }
	if _, _, err := callRemote(t, eng, "fx.change", nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "fx.echo2 listed after the change", func() bool { return has("fx.echo2") })
	for i := range 2 {
		if _, _, err := callRemote(t, eng, "fx.crash", nil); !errors.Is(err, mcp.ErrServerDown) {
			t.Fatalf("crash %d: %v, want ErrServerDown", i+1, err)
		}
		// The first restart is at once; the second waits out a backoff.
		var out string
		eventually(t, "echo answered after a restart", func() bool {
			out, _, err = callRemote(t, eng, "fx.echo", map[string]any{"message": "again"})
			if err != nil && !strings.Contains(err.Error(), "the next restart in") {
				t.Fatalf("echo after crash %d: %v", i+1, err)
			}
			return err == nil
		})
		if out != "echo: again" {
			t.Fatalf("echo after crash %d: %q", i+1, out)
		}
		if st := servers.Stats()[0]; !st.Running {
			t.Errorf("stats %+v after restart %d: not running", st, i+1)
		}
	}
	if has("fx.echo2") {
		t.Error("fx.echo2, listed by the first process only, is still registered after the restart")
	}
	if _, _, err := callRemote(t, eng, "fx.crash", nil); !errors.Is(err, mcp.ErrServerDown) {
		t.Fatalf("third crash: %v", err)
	}
	if _, _, err := callRemote(t, eng, "fx.echo", nil); !errors.Is(err, mcp.ErrServerDown) || !strings.Contains(err.Error(), "restarted 2 times within 10m0s (max_restarts)") {
		t.Errorf("echo past max_restarts: %v, want ErrServerDown naming max_restarts", err)
	}
}

// A server that crashes at every restart stays down, its calls failing
// with why: the restart's error, then the backoff, then max_restarts.
func TestClientRestartFailing(t *testing.T) {
	t.Parallel()
	cfg := fixtureServer("fx", "ok")
	cfg.Env[fixtureOnceEnv] = t.TempDir() + "/started"
	cfg.MaxRestarts = 2
	eng, _, _, err := clientEngine(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := callRemote(t, eng, "fx.crash", nil); !errors.Is(err, mcp.ErrServerDown) {
		t.Fatalf("crash: %v", err)
	}
	_, _, err = callRemote(t, eng, "fx.echo", nil)
	if !errors.Is(err, mcp.ErrServerDown) || !errors.Is(err, mcp.ErrStartup) || !strings.Contains(err.Error(), "started once already") {
		t.Fatalf("echo after the crash: %v, want ErrServerDown, a failed restart and its standard error", err)
	}
	_, _, err = callRemote(t, eng, "fx.echo", nil)
	if !errors.Is(err, mcp.ErrServerDown) || !strings.Contains(err.Error(), "the next restart in") || !strings.Contains(err.Error(), "started once already") {
		t.Fatalf("echo within the backoff: %v, want the backoff and the last restart's error", err)
	}
	eventually(t, "max_restarts reached", func() bool {
		_, _, err = callRemote(t, eng, "fx.echo", nil)
		if !errors.Is(err, mcp.ErrServerDown) {
			t.Fatalf("echo: %v, want ErrServerDown", err)
		}
		return strings.Contains(err.Error(), "(max_restarts)")
	})
}

// A server answering 5 MiB on one line: over the line limit (4 MiB, the
// least, and the message's margin), the line is skipped and its call fails
// with ErrOutputTooLarge, counted; the connection goes on. A notification
// or a request over the limit is skipped and counted.
func TestClientHugeAnswer(t *testing.T) {
	t.Parallel()
	eng, servers, logs, err := clientEngine(t, fixtureServer("fx", "ok"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		_, _, err = callRemote(t, eng, "fx.huge", nil)
		if !errors.Is(err, mcp.ErrOutputTooLarge) || errors.Is(err, mcp.ErrServerDown) || !strings.Contains(err.Error(), "over 4259840 bytes") ||
			!strings.Contains(err.Error(), `mcp server "fx"`) {
			t.Fatalf("huge: %v, want ErrOutputTooLarge for the call alone, naming the server and max_output_kb", err)
		}
		if out, _, err := callRemote(t, eng, "fx.echo", map[string]any{"message": "on"}); err != nil || out != "echo: on" {
			t.Fatalf("echo after huge answer %d: %q, %v", i+1, out, err)
		}
	}
	// A notification, and a request of the server's (whose id is the call's
	// own), over the limit: skipped, counted; the call's answer comes.
	if out, _, err := callRemote(t, eng, "fx.hugenote", nil); err != nil || out != "noted" {
		t.Fatalf("hugenote: %q, %v", out, err)
	}
	if st := servers.Stats()[0]; !st.Running || st.MessagesTooLarge != 4 {
		t.Errorf("stats %+v: want running, 4 messages too large", st)
	}
	if n := strings.Count(logs.String(), "sent a message over the limit"); n != 1 {
		t.Errorf("%d log lines on messages too large, want 1:\n%s", n, logs.String())
	}
}

// A 100 MB answer on one line is read without being kept: what is
// allocated while it is read is bounded by the line limit, not the
// answer's size. (Not parallel: the count is the process's.)
func TestClientHugeAnswerMemory(t *testing.T) {
	eng, _, _, err := clientEngine(t, fixtureServer("fx", "ok"))
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _, err = callRemote(t, eng, "fx.huge", map[string]any{"mib": 100})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, mcp.ErrOutputTooLarge) {
		t.Fatalf("huge: %v, want ErrOutputTooLarge", err)
	}
	// The line kept up to the limit (4 MiB and a margin) and its growth:
	// a few times the limit, far from the 100 MB read.
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%.1f MiB allocated reading a 100 MiB answer", float64(alloc)/(1<<20))
	if alloc > 40<<20 {
		t.Errorf("%d MiB allocated reading a 100 MiB answer, want at most 40", alloc>>20)
	}
}

// A server answering 5 MiB of valid JSON spread over lines (a newline after
// every array element): not NDJSON, so its first line is not a JSON-RPC
// message, which ends the connection with ErrBadMessage as the cause.
func TestClientMultiLineAnswer(t *testing.T) {
	t.Parallel()
	eng, _, _, err := clientEngine(t, fixtureServer("fx", "ok"))
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = callRemote(t, eng, "fx.lines", nil)
	if !errors.Is(err, mcp.ErrBadMessage) || !errors.Is(err, mcp.ErrServerDown) || !strings.Contains(err.Error(), `mcp server "fx"`) {
		t.Fatalf("lines: %v, want ErrServerDown caused by ErrBadMessage, naming fx", err)
	}
}

// A result over max_output_kb but within the message's margin is refused
// alone: the connection goes on.
func TestClientOutputOverLimit(t *testing.T) {
	t.Parallel()
	cfg := fixtureServer("fx", "ok")
	cfg.MaxOutputBytes = 10000
	eng, _, _, err := clientEngine(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = callRemote(t, eng, "fx.big", nil)
	if !errors.Is(err, mcp.ErrOutputTooLarge) || errors.Is(err, mcp.ErrServerDown) || !strings.Contains(err.Error(), "20000 bytes, over the limit of 10000") {
		t.Fatalf("big: %v, want ErrOutputTooLarge alone", err)
	}
	if out, _, err := callRemote(t, eng, "fx.echo", map[string]any{"message": "on"}); err != nil || out != "echo: on" {
		t.Errorf("echo after: %q, %v", out, err)
	}
}

// A server that sends what is not JSON-RPC: its connection ends, the call
// saying so, naming it and quoting the line; the next call restarts it.
func TestClientInvalidJSONRPC(t *testing.T) {
	t.Parallel()
	eng, _, _, err := clientEngine(t, fixtureServer("fx", "ok"))
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = callRemote(t, eng, "fx.garbage", nil)
	if !errors.Is(err, mcp.ErrServerDown) || !errors.Is(err, mcp.ErrBadMessage) || !strings.Contains(err.Error(), `mcp server "fx"`) ||
		!strings.Contains(err.Error(), `"this is not JSON-RPC"`) {
		t.Fatalf("garbage: %v, want ErrServerDown caused by ErrBadMessage, naming fx and quoting the line", err)
	}
	if out, _, err := callRemote(t, eng, "fx.echo", map[string]any{"message": "restarted"}); err != nil || out != "echo: restarted" {
		t.Errorf("echo after (a restart): %q, %v", out, err)
	}
}

// A server flooding log notifications: each is counted as it is read,
// before the answer behind them (none waits in a queue), at most a few a
// second are logged (the rest counted), and the call's answer comes. A
// flood of requests (pings) is answered up to a rate, the rest dropped and
// counted.
func TestClientNotificationFlood(t *testing.T) {
	t.Parallel()
	eng, servers, logs, err := clientEngine(t, fixtureServer("fx", "ok"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if out, _, err := callRemote(t, eng, "fx.flood", nil); err != nil || out != "flooded" {
		t.Fatalf("flood: %q, %v", out, err)
	}
	took := time.Since(start)
	if st := servers.Stats()[0]; st.Notifications != floodCount || st.LinesDropped == 0 {
		t.Errorf("stats %+v: want %d notifications, some lines not logged", st, floodCount)
	}
	// At most 20 lines a second are logged: in each second window begun
	// while the flood lasted.
	if n, most := strings.Count(logs.String(), "mcp server log message"), 20*(int(took/time.Second)+2); n == 0 || n > most {
		t.Errorf("%d log messages logged of %d in %s, want 1 to %d", n, floodCount, took, most)
	}
	if out, _, err := callRemote(t, eng, "fx.pings", nil); err != nil || out != "pinged" {
		t.Fatalf("pings: %q, %v", out, err)
	}
	if st := servers.Stats()[0]; st.RequestsDropped == 0 || st.RequestsDropped >= floodCount {
		t.Errorf("stats %+v: want some of %d pings dropped, not all", st, floodCount)
	}
}

// A server whose changed list names a built-in's tool (unprefixed): the
// engine keeps the built-in, with a warning naming the server; its new
// tool joins.
func TestClientListChangeCannotShadowBuiltin(t *testing.T) {
	t.Parallel()
	cfg := fixtureServer("fx", "ok")
	cfg.Prefix = ""
	eng, _, logs, err := clientEngine(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := callRemote(t, eng, "change", nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "echo2 listed", func() bool { _, ok := eng.Registry().Get("echo2"); return ok })
	if src, _ := eng.Registry().Source("calc"); src != engine.SourceBuiltin {
		t.Errorf("calc is %s's", src)
	}
	eventually(t, "a warning naming the server and calc", func() bool {
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "level=WARN") && strings.Contains(line, "plugin=fx") && strings.Contains(line, "tool=calc") {
				return true
			}
		}
		return false
	})
	if out, _, err := callRemote(t, eng, "echo2", map[string]any{"message": "new"}); err != nil || out != "echo: new" {
		t.Errorf("echo2: %q, %v", out, err)
	}
}

// A server that never answers initialize: the engine fails to initialize
// within startup_timeout, with an error naming the server; optional, it is
// a warning and the engine runs without its tools.
func TestClientStartupTimeout(t *testing.T) {
	t.Parallel()
	cfg := fixtureServer("mute", "mute")
	cfg.StartupTimeout = 500 * time.Millisecond
	_, _, _, err := clientEngine(t, cfg)
	var se *mcp.ServerError
	if !errors.Is(err, mcp.ErrStartup) || !errors.As(err, &se) || se.Server != "mute" || !strings.Contains(err.Error(), "500ms (startup_timeout)") {
		t.Fatalf("Initialize: %v, want ErrStartup naming the server and startup_timeout", err)
	}
	cfg.Optional = true
	eng, _, _, err := clientEngine(t, cfg, fixtureServer("fx", "ok"))
	if err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(eng.Status().Warnings, "\n"); !strings.Contains(w, `plugin "mute": optional MCP server not started`) {
		t.Errorf("warnings %q", w)
	}
	if _, ok := eng.Registry().Get("fx.echo"); !ok {
		t.Error("the other server's tools are missing")
	}
}

// Close ends a stdio server's whole process group: a grandchild that
// ignores SIGTERM is gone too.
func TestClientCloseKillsProcessGroup(t *testing.T) {
	t.Parallel()
	cfg := fixtureServer("fx", "ok")
	cfg.StopGrace = 200 * time.Millisecond
	eng, servers, _, err := clientEngine(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := callRemote(t, eng, "fx.fork", nil)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(out)
	if err != nil {
		t.Fatalf("fork answered %q", out)
	}
	if !alive(pid) {
		t.Fatalf("the grandchild %d is not running", pid)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := eng.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := servers.Close(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the grandchild gone", func() bool { return !alive(pid) })
}

// alive reports whether pid is a process that is not a zombie.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // no /proc: trust kill
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) == 0 || fields[0] != "Z"
}

// callNotes is an engine.CallNotifier that keeps what it is told.
type callNotes struct {
	token    any
	mu       sync.Mutex
	progress []string
	logs     []string
}

func (n *callNotes) Progress(progress, total float64, message string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.progress = append(n.progress, fmt.Sprintf("%g/%g %s", progress, total, message))
}

func (n *callNotes) Log(level, logger string, data json.RawMessage) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.logs = append(n.logs, level+" "+logger+" "+string(data))
}

func (n *callNotes) ProgressToken() any { return n.token }

// A server's progress reaches the caller of the call it belongs to (a
// token is sent only when the caller has one), and its log messages the
// caller of the one call in flight when the entry forwards logs.
func TestClientForwardsNotifications(t *testing.T) {
	t.Parallel()
	cfg := fixtureServer("fx", "ok")
	cfg.ForwardLogs = true
	eng, servers, logs, err := clientEngine(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tool, _ := eng.Registry().Get("fx.progress")
	call := func(n engine.CallNotifier) string {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if n != nil {
			ctx = engine.WithCallNotifier(ctx, n)
		}
		out, _, err := tool.(engine.ImageTool).ExecuteImages(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	withToken := &callNotes{token: "caller's"}
	if out := call(withToken); out != "token sent: true" {
		t.Errorf("with a token: %q", out)
	}
	if want := []string{"1/3 step 1", "2/3 step 2", "3/3 step 3"}; !slices.Equal(withToken.progress, want) {
		t.Errorf("progress %q, want %q", withToken.progress, want)
	}
	if want := []string{`warning fx "halfway"`}; !slices.Equal(withToken.logs, want) {
		t.Errorf("logs %q, want %q", withToken.logs, want)
	}
	noToken := &callNotes{}
	if out := call(noToken); out != "token sent: false" || len(noToken.progress) != 0 || len(noToken.logs) != 1 {
		t.Errorf("without a token: %q, progress %q, logs %q; want no token sent, no progress, the log message", out, noToken.progress, noToken.logs)
	}
	if out := call(nil); out != "token sent: false" {
		t.Errorf("without a notifier: %q", out)
	}
	if st := servers.Stats()[0]; st.Notifications != 6 {
		t.Errorf("stats %+v: want 6 notifications (3 progress, 3 log messages)", st)
	}
	// With another call in flight (sleep), a log message could be either's:
	// it reaches neither caller; progress still reaches its own.
	sleeper := &callNotes{token: "sleeper's"}
	ctx, cancel := context.WithCancel(engine.WithCallNotifier(context.Background(), sleeper))
	slept := make(chan error, 1)
	sleep, _ := eng.Registry().Get("fx.sleep")
	go func() {
		_, _, err := sleep.(engine.ImageTool).ExecuteImages(ctx, nil)
		slept <- err
	}()
	eventually(t, "the server sleeping", func() bool { return strings.Contains(logs.String(), "sleeping in request") })
	both := &callNotes{token: "two in flight"}
	if out := call(both); out != "token sent: true" || len(both.progress) != 3 || len(both.logs) != 0 {
		t.Errorf("with another call in flight: %q, progress %q, logs %q; want 3 progress, no log message", out, both.progress, both.logs)
	}
	cancel()
	if err := <-slept; !errors.Is(err, context.Canceled) {
		t.Errorf("sleep: %v, want canceled", err)
	}
	if len(sleeper.logs) != 0 {
		t.Errorf("the sleeping call's caller got log messages %q", sleeper.logs)
	}
}

// server-everything's long-running tool reports progress under the token
// morph sends it (the TypeScript SDK's server), and the caller gets it.
func TestClientServerEverythingProgress(t *testing.T) {
	t.Parallel()
	node, script := serverEverything(t)
	eng, _, _, err := clientEngine(t, mcp.ServerConfig{Name: "se", Prefix: "se", Command: node, Args: []string{script, "stdio"},
		StopGrace: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	tool, _ := eng.Registry().Get("se.trigger-long-running-operation")
	notes := &callNotes{token: 7}
	ctx, cancel := context.WithTimeout(engine.WithCallNotifier(context.Background(), notes), 2*time.Minute)
	defer cancel()
	out, _, err := tool.(engine.ImageTool).ExecuteImages(ctx, map[string]any{"duration": 0.3, "steps": 3})
	if err != nil || !strings.Contains(out, "Long running operation completed") {
		t.Fatalf("long-running operation: %q, %v", out, err)
	}
	notes.mu.Lock()
	defer notes.mu.Unlock()
	if want := []string{"1/3 ", "2/3 ", "3/3 "}; !slices.Equal(notes.progress, want) {
		t.Errorf("progress %q, want %q", notes.progress, want)
	}
}
