package mcp_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// fixtureEnv names the fixture a re-executed test binary becomes: an MCP
// server over stdio, written by hand (raw JSON-RPC lines) so that it can
// misbehave in ways no SDK server would.
const fixtureEnv = "MORPH_MCP_FIXTURE"

// fixtureOnceEnv, when set, names a file the fixture makes when it
// starts; it exits at once when the file is there: a server that starts
// once, and crashes at every restart.
const fixtureOnceEnv = "MORPH_MCP_FIXTURE_ONCE"

// floodCount is how many log notifications the fixture's flood tool sends.
const floodCount = 2000

// init turns the test binary into the fixture when fixtureEnv is set,
// before TestMain.
func init() {
	switch mode := os.Getenv(fixtureEnv); mode {
	case "":
		return
	case "sleeper": // a grandchild that ignores SIGTERM, for the process group test
		signal.Ignore(syscall.SIGTERM)
		time.Sleep(10 * time.Minute)
		os.Exit(0)
	case "ask":
		askFixture()
		os.Exit(0)
	default:
		fixture(mode)
		os.Exit(0)
	}
}

// fixture serves MCP on standard input and output. Modes: "ok" (every
// tool below answers), "mute" (never answers anything), "deaf" (stops reading
// its input in sleep). Tools: echo, image,
// structured, fail (isError), sleep (never answers; says on standard error
// that it sleeps, and when it is cancelled), crash (exits mid-call), huge (an answer of "mib"
// MiB, 5 unless given, on one line, after the result's raw JSON "members"), lines (5 MiB of JSON, a line per
// array element), hugenote (a 5 MiB notification and request, then
// the answer), big (20,000 bytes of text), garbage (a line that is not
// JSON-RPC), flood (floodCount log notifications, then the answer), pings
// (floodCount ping requests, then the answer), change (tells of a list
// change: the new list adds "calc", a built-in's name, and "echo2"), fork
// (starts a grandchild that ignores SIGTERM and answers its pid), env (its
// environment, a variable a line), progress (3 progress notifications
// under the call's token, when it has one, a log message, then whether it
// had a token).
func fixture(mode string) {
	if mark := os.Getenv(fixtureOnceEnv); mark != "" { // a server that cannot start again
		if _, err := os.Stat(mark); err == nil {
			fmt.Fprintln(os.Stderr, "fixture: started once already")
			os.Exit(4)
		}
		os.WriteFile(mark, nil, 0o600)
	}
	out := bufio.NewWriterSize(os.Stdout, 1<<16)
	send := func(v any) {
		b, _ := json.Marshal(v)
		out.Write(append(b, '\n'))
		out.Flush()
	}
	result := func(id json.RawMessage, r any) { send(map[string]any{"jsonrpc": "2.0", "id": id, "result": r}) }
	text := func(s string) map[string]any {
		return map[string]any{"content": []any{map[string]any{"type": "text", "text": s}}}
	}
	tool := func(name string) map[string]any {
		return map[string]any{"name": name, "description": "fixture tool " + name,
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"message": map[string]any{"type": "string"}}}}
	}
	names := []string{"echo", "image", "structured", "fail", "sleep", "crash", "huge", "big", "garbage", "flood", "change", "fork", "env", "pings", "lines", "progress", "hugenote", "bad name"}
	changed := false
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 1<<20)
	for in.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name      string         `json:"name"`
				Arguments map[string]any `json:"arguments"`
				RequestID any            `json:"requestId"`
				Meta      struct {
					ProgressToken any `json:"progressToken"`
				} `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &req) != nil || mode == "mute" || req.Method == "" { // responses (to pings) are not read
			continue
		}
		switch req.Method {
		case "initialize":
			result(req.ID, map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{"tools": map[string]any{"listChanged": true}},
				"serverInfo": map[string]any{"name": "fixture", "version": "1.2.3"}})
		case "notifications/cancelled":
			fmt.Fprintf(os.Stderr, "cancelled request %v\n", req.Params.RequestID)
		case "tools/list":
			var tools []any
			for _, n := range names {
				tools = append(tools, tool(n))
			}
			if changed {
				tools = append(tools, tool("calc"), tool("echo2"))
			}
			result(req.ID, map[string]any{"tools": tools})
		case "tools/call":
			switch req.Params.Name {
			case "echo", "echo2":
				result(req.ID, text(fmt.Sprint("echo: ", req.Params.Arguments["message"])))
			case "image":
				result(req.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": "a pixel"},
					map[string]any{"type": "image", "mimeType": "image/png", "data": base64.StdEncoding.EncodeToString([]byte("PNGDATA"))}}})
			case "structured":
				result(req.ID, map[string]any{"content": []any{}, "structuredContent": map[string]any{"temperature": 21}})
			case "fail":
				result(req.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": "no such file"}}, "isError": true})
			case "sleep":
				fmt.Fprintf(os.Stderr, "sleeping in request %s\n", req.ID)
				if mode == "deaf" { // stops reading its input
					select {}
				}
			case "crash":
				fmt.Fprintln(os.Stderr, "fixture: crashing now \x1b[31m")
				os.Exit(3)
			case "huge":
				mib := 5
				if n, ok := req.Params.Arguments["mib"].(float64); ok {
					mib = int(n)
				}
				out.WriteString(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{`)
				if members, ok := req.Params.Arguments["members"].(string); ok { // raw JSON members of the result's, before content
					out.WriteString(members + ",")
				}
				out.WriteString(`"content":[{"type":"text","text":"`)
				chunk := strings.Repeat("x", 1<<20)
				for range mib {
					if _, err := out.WriteString(chunk); err != nil {
						os.Exit(0)
					}
				}
				out.WriteString("\"}]}}\n")
				out.Flush()
			case "hugenote": // a 5 MiB notification and a 5 MiB request of the server's, then the answer
				big := strings.Repeat("n", 5<<20)
				send(map[string]any{"jsonrpc": "2.0", "method": "notifications/message", "params": map[string]any{"level": "info", "data": big}})
				send(map[string]any{"jsonrpc": "2.0", "id": req.ID, "method": "ping", "params": map[string]any{"data": big}})
				result(req.ID, text("noted"))
			case "lines": // 5 MiB of valid JSON, a newline after every array element
				out.WriteString(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"content":[` + "\n")
				item := `{"type":"text","text":"` + strings.Repeat("z", 1000) + `"}`
				for i := range 5 << 10 {
					if i > 0 {
						out.WriteString(",\n")
					}
					out.WriteString(item)
				}
				out.WriteString("\n]}}\n")
				out.Flush()
			case "progress": // 3 steps under the call's token, when it has one, and a log message
				token := req.Params.Meta.ProgressToken
				for i := 1; token != nil && i <= 3; i++ {
					send(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress",
						"params": map[string]any{"progressToken": token, "progress": i, "total": 3, "message": fmt.Sprint("step ", i)}})
				}
				send(map[string]any{"jsonrpc": "2.0", "method": "notifications/message", "params": map[string]any{"level": "warning", "logger": "fx", "data": "halfway"}})
				result(req.ID, text(fmt.Sprint("token sent: ", token != nil)))
			case "env":
				result(req.ID, text(strings.Join(os.Environ(), "\n")))
			case "big":
				result(req.ID, text(strings.Repeat("y", 20000)))
			case "garbage":
				out.WriteString("this is not JSON-RPC\n")
				out.Flush()
			case "flood":
				for i := range floodCount {
					send(map[string]any{"jsonrpc": "2.0", "method": "notifications/message", "params": map[string]any{"level": "info", "data": fmt.Sprint("flood ", i)}})
				}
				result(req.ID, text("flooded"))
			case "pings":
				for i := range floodCount {
					send(map[string]any{"jsonrpc": "2.0", "id": fmt.Sprint("ping-", i), "method": "ping"})
				}
				result(req.ID, text("pinged"))
			case "change":
				changed = true
				send(map[string]any{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
				result(req.ID, text("changed"))
			case "fork":
				cmd := exec.Command(os.Args[0])
				cmd.Env = append(os.Environ(), fixtureEnv+"=sleeper")
				if err := cmd.Start(); err != nil {
					result(req.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": err.Error()}}, "isError": true})
					continue
				}
				result(req.ID, text(fmt.Sprint(cmd.Process.Pid)))
			}
		default:
			if len(req.ID) > 0 {
				send(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32601, "message": "method not found"}})
			}
		}
	}
}

// askFixture is the fixture's mode "ask": an MCP server on the SDK (over
// standard input and output) whose tools ask their client during the
// call: elicit (elicitation/create for a name; it answers the action and
// the name), sample (sampling/createMessage; it answers the model's text,
// or the error), each once or its argument "times" times, a line an
// answer. With an argument "together" of n, calls ask only once n of them
// are in their handlers, and answer only once all n got their answers: n
// calls in flight at once, for as long as each question lasts.
func askFixture() {
	var mu sync.Mutex
	waiting, round := 0, 0
	wake := sync.NewCond(&mu)
	barrier := func(n int) {
		mu.Lock()
		defer mu.Unlock()
		if waiting++; waiting >= n {
			waiting, round = 0, round+1
			wake.Broadcast()
			return
		}
		for r := round; r == round; {
			wake.Wait()
		}
	}
	// asking is a tool that asks once, or "times" times, a line of its
	// answer each.
	asking := func(ask func(context.Context, *sdk.ServerSession) string) sdk.ToolHandler {
		return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var args struct {
				Together int `json:"together"`
				Times    int `json:"times"`
			}
			json.Unmarshal(req.Params.Arguments, &args)
			if args.Together > 1 {
				barrier(args.Together)
				defer barrier(args.Together)
			}
			var lines []string
			for range max(1, args.Times) {
				lines = append(lines, ask(ctx, req.Session))
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.Join(lines, "\n")}}}, nil
		}
	}
	schema := map[string]any{"type": "object", "properties": map[string]any{"together": map[string]any{"type": "integer"}, "times": map[string]any{"type": "integer"}}}
	s := sdk.NewServer(&sdk.Implementation{Name: "ask", Version: "1"}, nil)
	s.AddTool(&sdk.Tool{Name: "elicit", InputSchema: schema}, asking(func(ctx context.Context, ss *sdk.ServerSession) string {
		res, err := ss.Elicit(ctx, &sdk.ElicitParams{Message: "Your name?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}})
		if err != nil {
			return "elicitation failed: " + err.Error()
		}
		return fmt.Sprint(res.Action, " ", res.Content["name"])
	}))
	s.AddTool(&sdk.Tool{Name: "sample", InputSchema: schema}, asking(func(ctx context.Context, ss *sdk.ServerSession) string {
		res, err := ss.CreateMessage(ctx, &sdk.CreateMessageParams{MaxTokens: 10,
			Messages: []*sdk.SamplingMessage{{Role: "user", Content: &sdk.TextContent{Text: "Say hi"}}}})
		if err != nil {
			return "sampling failed: " + err.Error()
		}
		if tc, ok := res.Content.(*sdk.TextContent); ok {
			return "model " + res.Model + " said " + tc.Text
		}
		return "model " + res.Model + " said no text"
	}))
	if err := s.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "ask fixture:", err)
	}
}
