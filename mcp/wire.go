package mcp

import (
	stdjson "encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/segmentio/encoding/json"

	"github.com/morphhost/morph/abi"
)

// maxMessageDepth is the nesting a message read from a client may have:
// the SDK's own bound, which its decoder checks before decoding.
const maxMessageDepth = 1000

// wireMessage is a JSON-RPC message as read: the SDK's decode form. Method
// is raw so that a "method" key given is told from one left out, even when
// its value is "".
type wireMessage struct {
	Version string             `json:"jsonrpc"`
	ID      any                `json:"id,omitempty"`
	Method  stdjson.RawMessage `json:"method"`
	Params  stdjson.RawMessage `json:"params,omitempty"`
	Result  stdjson.RawMessage `json:"result,omitempty"`
	Error   *jsonrpc.Error     `json:"error,omitempty"`
}

// decodeMessage is jsonrpc.DecodeMessage without its cost: the SDK
// decodes a message with a stream decoder made for the one call, which
// allocates (and clears) a 32 KiB buffer, twice (the message, then its
// method), so 64 KiB for each request read. This parses the line in place
// with the same decoder, flags (keys match exactly, as the SDK's) and
// depth bound; TestDecodeMessage holds it to the SDK's on both sides of
// every check.
func decodeMessage(line []byte) (jsonrpc.Message, error) {
	if err := abi.CheckDepth(line, maxMessageDepth); err != nil {
		return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
	}
	var msg wireMessage
	// What follows the first value is left, as the SDK's stream decoder
	// leaves it.
	if _, err := json.Parse(line, &msg, json.DontMatchCaseInsensitiveStructFields); err != nil {
		return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
	}
	if msg.Version != "2.0" {
		return nil, fmt.Errorf("invalid message version tag %q; expected %q", msg.Version, "2.0")
	}
	id, err := jsonrpc.MakeID(msg.ID)
	if err != nil {
		return nil, err
	}
	if len(msg.Method) > 0 {
		var method string
		if _, err := json.Parse(msg.Method, &method, json.DontMatchCaseInsensitiveStructFields); err != nil {
			return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
		}
		return &jsonrpc.Request{Method: method, ID: id, Params: msg.Params}, nil
	}
	if !id.IsValid() {
		return nil, errInvalidRequest
	}
	resp := &jsonrpc.Response{ID: id, Result: msg.Result}
	if msg.Error != nil { // not a typed nil in the error interface
		resp.Error = msg.Error
	}
	return resp, nil
}

// errInvalidRequest is a message that is neither a request (no method) nor
// a response (no id): the SDK's error.
var errInvalidRequest = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request"}
