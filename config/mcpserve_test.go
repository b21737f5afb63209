package config_test

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/mcp"
)

// [mcp] sets morph mcp serve's limits; what it leaves out is package
// mcp's default (zero).
func TestMCPServeTable(t *testing.T) {
	dir := write(t, map[string]string{"replies.json": replies, "morph.toml": `[llm]
provider = "scripted"
scripted_replies = "replies.json"
[mcp]
max_request_kb = 64
max_calls_per_session = 4
max_notifications = 9
watch_interval = "2s"
write_timeout = "7s"
max_in_flight_kb = 128
max_items = 7
max_sampling_per_call = 2
max_subscriptions = 3
event_store_kb = 0
sse_poll_after = "20s"
session_idle = "5m"
`})
	cfg, err := config.Load(filepath.Join(dir, "morph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if o := cfg.MCP.Options(); o.MaxRequestBytes != 64<<10 || o.MaxCallsPerSession != 4 || o.MaxNotifications != 9 || o.MaxItems != 7 || o.MaxSamplingPerCall != 2 || o.MaxSubscriptions != 3 {
		t.Errorf("Options() = %+v, want 64 KiB, 4 calls, 9 notifications, 7 items, 2 sampling requests and 3 subscriptions", o)
	}
	if cfg.MCP.WatchInterval != 2*time.Second {
		t.Errorf("WatchInterval = %s, want 2s", cfg.MCP.WatchInterval)
	}
	if o := cfg.MCP.HTTPOptions(); !reflect.DeepEqual(o, mcp.HTTPOptions{SessionIdle: 5 * time.Minute, WriteTimeout: 7 * time.Second, MaxBytesInFlight: 128 << 10,
		EventStoreBytes: -1, SSEPollAfter: 20 * time.Second}) {
		t.Errorf("HTTPOptions() = %+v, want session_idle 5m, write_timeout 7s, 128 KiB in flight, no event store, polls after 20s and the rest zero", o)
	}
	// event_store_kb left out is the default (zero); set, it is KiB.
	for toml, want := range map[string]int{"": 0, "event_store_kb = 8\n": 8 << 10} {
		dir := write(t, map[string]string{"replies.json": replies, "morph.toml": "[llm]\nprovider = \"scripted\"\nscripted_replies = \"replies.json\"\n[mcp]\n" + toml})
		cfg, err := config.Load(filepath.Join(dir, "morph.toml"))
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.MCP.HTTPOptions().EventStoreBytes; got != want {
			t.Errorf("%q: EventStoreBytes %d, want %d", toml, got, want)
		}
	}
}

// A bad [mcp] value is an error naming the key, its line and the range.
func TestMCPServeTableErrors(t *testing.T) {
	for key, value := range map[string]string{
		"max_request_kb": "0", "max_calls_per_session": "-1", "max_sessions": "0", "max_in_flight_kb": "0", "max_notifications": "0", "max_items": "0", "max_sampling_per_call": "0", "max_subscriptions": "0", "event_store_kb": "-1", "sse_poll_after": `"10ms"`, "watch_interval": `"1ms"`, "write_timeout": `"0s"`, "session_idle": `"0s"`,
	} {
		ce, err := loadErr(t, "[llm]\nprovider = \"scripted\"\nscripted_replies = \"replies.json\"\n[mcp]\n"+key+" = "+value+"\n")
		if ce.Key != "mcp."+key || ce.Line != 5 || !strings.Contains(err.Error(), "leave it out for the default") {
			t.Errorf("%s = %s: key %q, line %d: %v", key, value, ce.Key, ce.Line, err)
		}
	}
}
