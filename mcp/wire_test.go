package mcp

import (
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestDecodeMessage holds decodeMessage to the SDK's jsonrpc.DecodeMessage,
// which it replaces on stdio: the same message, or an error, for each line.
func TestDecodeMessage(t *testing.T) {
	deep := func(n int) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`
	}
	lines := []struct {
		line  string
		isErr bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"reverse","arguments":{"text":"hello"}}}`, false},
		{`{"jsonrpc":"2.0","id":"a-1","method":"ping"}`, false},
		{`{"jsonrpc":"2.0","id":-7,"method":"ping","params":null}`, false},
		{`{"jsonrpc":"2.0","id":2.5,"method":"ping"}`, false},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, false},
		{`{"jsonrpc":"2.0","id":3,"method":""}`, false},
		{`{"id":4,"method":"ping","jsonrpc":"2.0"}`, false},
		{`{"jsonrpc":"2.0","id":5,"result":{"roots":[]}}`, false},
		{`{"jsonrpc":"2.0","id":"r","error":{"code":-32601,"message":"no","data":{"x":1}}}`, false},
		{`{"jsonrpc":"2.0","id":6,"method":"ping"} {"trailing":1}`, false},
		// Keys match exactly: these are not the fields they resemble.
		{`{"jsonrpc":"2.0","id":7,"Method":"ping"}`, false}, // a response, with no result
		{`{"JSONRPC":"2.0","id":8,"method":"ping"}`, true},
		{`{"jsonrpc":"2.0","id":9,"method":"ping","Params":{"a":1}}`, false},
		{`{"jsonrpc":"1.0","id":10,"method":"ping"}`, true},
		{`{"id":11,"method":"ping"}`, true},
		{`{"jsonrpc":"2.0","id":true,"method":"ping"}`, true},
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, true},
		{`{"jsonrpc":"2.0","id":12,"method":5}`, true},
		{`{"jsonrpc":"2.0","method":"ping","result":1}`, false},
		{`{"jsonrpc":"2.0","result":1}`, true},
		{`{"jsonrpc":"2.0","id":13,"method":"ping"`, true},
		{`not json`, true},
		{`"2.0"`, true},
		// The outer object is one level: maxMessageDepth levels pass, one
		// more is refused, by both.
		{deep(maxMessageDepth - 1), false},
		{deep(maxMessageDepth), true},
	}
	for _, l := range lines {
		want, wantErr := jsonrpc.DecodeMessage([]byte(l.line))
		got, err := decodeMessage([]byte(l.line))
		if (err != nil) != l.isErr || (wantErr != nil) != l.isErr {
			t.Errorf("%.80s: error %v, the SDK's %v; want an error: %v", l.line, err, wantErr, l.isErr)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%.80s: %#v, the SDK's %#v", l.line, got, want)
		}
	}
}
