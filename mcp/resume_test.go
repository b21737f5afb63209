package mcp_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/mcp"
)

// gateTool answers "through" once its gate is closed; started is closed
// when it runs.
type gateTool struct {
	schemaTool
	started, gate chan struct{}
}

func (g gateTool) Execute(ctx context.Context, _ map[string]any) (string, error) {
	close(g.started)
	select {
	case <-g.gate:
		return "through", nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// sseEvent is one event of an SSE stream.
type sseEvent struct{ id, name, data, retry string }

// readEvents reads r's events until it ends or stop says so (of the last
// event read), and reports whether it ended.
func readEvents(r io.Reader, stop func(sseEvent) bool) (events []sseEvent, ended bool) {
	sc := bufio.NewScanner(r)
	var e sseEvent
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			events = append(events, e)
			if stop(e) {
				return events, false
			}
			e = sseEvent{}
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			e.id = value
		case "event":
			e.name = value
		case "data":
			e.data += value
		case "retry":
			e.retry = value
		}
	}
	return events, true
}

// rawHTTP is a raw Streamable HTTP client of one session at protocol
// version.
type rawHTTP struct {
	t                *testing.T
	url, id, version string
}

// do sends method (POST with body, or GET with lastEventID) and answers
// the response.
func (c *rawHTTP) do(method, body, lastEventID string) *http.Response {
	c.t.Helper()
	req, err := http.NewRequest(method, c.url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.id != "" {
		req.Header.Set("Mcp-Session-Id", c.id)
		req.Header.Set("Mcp-Protocol-Version", c.version)
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp
}

// startRaw initializes a session at version.
func startRaw(t *testing.T, url, version string) *rawHTTP {
	c := &rawHTTP{t: t, url: url, version: version}
	resp := c.do(http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, "")
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if c.id = resp.Header.Get("Mcp-Session-Id"); c.id == "" {
		t.Fatalf("initialize: %s, no session id", resp.Status)
	}
	resp = c.do(http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "")
	resp.Body.Close()
	return c
}

// isResult reports whether e is the answer to the call (id 2).
func isResult(e sseEvent) bool { return strings.Contains(e.data, `"id":2`) }

// lastID is the id of the last of events that has one.
func lastID(events []sseEvent) string {
	id := ""
	for _, e := range events {
		if e.id != "" {
			id = e.id
		}
	}
	return id
}

// A call's SSE stream that drops mid-call is resumed with Last-Event-ID:
// the answer comes on the resumed stream, out of the event store; with no
// events kept, the stream has no event id to resume from. With
// SSEPollAfter, morph closes a long call's stream itself (a retry field
// telling the client when to come back), and the client resumes it the
// same way; a request of a protocol older than 2025-11-25 (no event id to
// resume from) is not closed, and gets its answer on its stream.
func TestHTTPResume(t *testing.T) {
	const call = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"gate","arguments":{}}}`
	for _, c := range []struct {
		name    string
		o       mcp.HTTPOptions
		version string
		drop    bool // the client drops the stream after its first event; else reads it until it ends or answers
		resumes bool // the answer comes on a resumed stream; else on the POST's
	}{
		{"client drops", mcp.HTTPOptions{}, "2025-11-25", true, true},
		{"no events kept", mcp.HTTPOptions{EventStoreBytes: -1}, "2025-11-25", false, false},
		{"server polls", mcp.HTTPOptions{SSEPollAfter: 100 * time.Millisecond}, "2025-11-25", false, true},
		{"server polls, old protocol", mcp.HTTPOptions{SSEPollAfter: 100 * time.Millisecond}, "2025-06-18", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := gateTool{schemaTool{name: "gate", schema: `{"type":"object"}`}, make(chan struct{}), make(chan struct{})}
			probe := gateTool{schemaTool{name: "probe", schema: `{"type":"object"}`}, make(chan struct{}), make(chan struct{})}
			reg := engine.NewRegistry()
			reg.Register(g)
			reg.Register(probe)
			srv := newServer(t, engine.New(nil, reg), mcp.Options{})
			c.o.Loopback = true
			hs := serveHTTP(t, srv, c.o)
			raw := startRaw(t, hs.URL, c.version)
			release := sync.OnceFunc(func() { close(g.gate) })
			due := make(chan error, 1)
			if !c.resumes {
				// The gate opens after a poll was due (pollDue), and before
				// the answer, the only event without a store, is read.
				go func() {
					defer release()
					<-g.started
					if c.o.SSEPollAfter == 0 {
						due <- nil
						return
					}
					due <- pollDue(hs.URL, probe)
				}()
			} else {
				// A stream that is not closed still ends, on the answer, and
				// the test fails rather than waits for ever.
				time.AfterFunc(30*time.Second, release)
			}
			resp := raw.do(http.MethodPost, call, "")
			defer resp.Body.Close()
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
				t.Fatalf("tools/call: %s, Content-Type %q; want an event stream", resp.Status, ct)
			}
			var events []sseEvent
			ended := false
			switch {
			case !c.resumes:
				events, ended = readEvents(resp.Body, isResult)
				if ended || !isResult(events[len(events)-1]) {
					t.Fatalf("events %+v, ended %v; want the answer on the POST's stream", events, ended)
				}
				if id := lastID(events); c.o.EventStoreBytes < 0 && id != "" {
					t.Errorf("with no events kept, the stream had event id %s", id)
				}
				if err := <-due; err != nil {
					t.Errorf("no poll seen due while the call ran: %v", err)
				}
				return
			case c.drop:
				<-g.started
				events, _ = readEvents(resp.Body, func(sseEvent) bool { return true })
				resp.Body.Close()
			default:
				events, ended = readEvents(resp.Body, func(sseEvent) bool { return false })
				if last := events[len(events)-1]; !ended || last.name != "close" || last.retry == "" {
					t.Errorf("the stream morph closed: events %+v, ended %v; want it to end on a close event with a retry field", events, ended)
				}
			}
			release()
			id := lastID(events)
			if id == "" {
				t.Fatalf("events %+v before the stream ended: none with an id to resume from", events)
			}
			get := raw.do(http.MethodGet, "", id)
			defer get.Body.Close()
			if get.StatusCode != http.StatusOK {
				t.Fatalf("resuming from %s: %s", id, get.Status)
			}
			events, _ = readEvents(get.Body, isResult)
			if len(events) == 0 || !isResult(events[len(events)-1]) || !strings.Contains(events[len(events)-1].data, "through") {
				t.Fatalf("resumed from %s: events %+v, want the answer", id, events)
			}
		})
	}
}

// pollDue calls probe at the current protocol on a new session of the
// server at url, after the call under test started: when morph closes the
// probe's stream (a poll), one was due for the call under test too, which
// started first with the same SSEPollAfter. It opens probe's gate.
func pollDue(url string, probe gateTool) error {
	defer close(probe.gate)
	post := func(id, body string) (*http.Response, error) {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if id != "" {
			req.Header.Set("Mcp-Session-Id", id)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		return http.DefaultClient.Do(req)
	}
	resp, err := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"probe","version":"1"}}}`)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	id := resp.Header.Get("Mcp-Session-Id")
	if resp, err = post(id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		return err
	}
	resp.Body.Close()
	if resp, err = post(id, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"probe","arguments":{}}}`); err != nil {
		return err
	}
	defer resp.Body.Close()
	events, ended := readEvents(resp.Body, isResult)
	if !ended || len(events) == 0 || events[len(events)-1].name != "close" {
		return fmt.Errorf("the probe's stream: events %+v, ended %v; want it closed by a poll", events, ended)
	}
	return nil
}
