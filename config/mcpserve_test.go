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
session_idle = "5m"
`})
	cfg, err := config.Load(filepath.Join(dir, "morph.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if o := cfg.MCP.Options(); o.MaxRequestBytes != 64<<10 || o.MaxCallsPerSession != 4 || o.MaxNotifications != 9 || o.MaxItems != 7 || o.MaxSamplingPerCall != 2 {
		t.Errorf("Options() = %+v, want 64 KiB, 4 calls, 9 notifications, 7 items and 2 sampling requests", o)
	}
	if cfg.MCP.WatchInterval != 2*time.Second {
		t.Errorf("WatchInterval = %s, want 2s", cfg.MCP.WatchInterval)
	}
	if o := cfg.MCP.HTTPOptions(); !reflect.DeepEqual(o, mcp.HTTPOptions{SessionIdle: 5 * time.Minute, WriteTimeout: 7 * time.Second, MaxBytesInFlight: 128 << 10}) {
		t.Errorf("HTTPOptions() = %+v, want session_idle 5m, write_timeout 7s, 128 KiB in flight and the rest zero", o)
	}
}

// A bad [mcp] value is an error naming the key, its line and the range.
func TestMCPServeTableErrors(t *testing.T) {
	for key, value := range map[string]string{
		"max_request_kb": "0", "max_calls_per_session": "-1", "max_sessions": "0", "max_in_flight_kb": "0", "max_notifications": "0", "max_items": "0", "max_sampling_per_call": "0", "watch_interval": `"1ms"`, "write_timeout": `"0s"`, "session_idle": `"0s"`,
	} {
		ce, err := loadErr(t, "[llm]\nprovider = \"scripted\"\nscripted_replies = \"replies.json\"\n[mcp]\n"+key+" = "+value+"\n")
		if ce.Key != "mcp."+key || ce.Line != 5 || !strings.Contains(err.Error(), "leave it out for the default") {
			t.Errorf("%s = %s: key %q, line %d: %v", key, value, ce.Key, ce.Line, err)
		}
	}
}
