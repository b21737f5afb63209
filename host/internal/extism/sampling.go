package extism

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/host/internal/guest"
)

// JSON-RPC error codes of create_message's error results: codeNoSampling
// is what a client without sampling answers sampling/createMessage
// (method not found), codeInvalidParams a request that is not MCP's,
// codeSamplingFailed anything else (a limit, the client's refusal, the
// deadline).
const (
	codeNoSampling     = -32601
	codeInvalidParams  = -32602
	codeSamplingFailed = -32603
)

// samplingRequest is what create_message checks of MCP's
// CreateMessageRequest params before they go out.
type samplingRequest struct {
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	MaxTokens      *int64 `json:"maxTokens"`
	IncludeContext string `json:"includeContext"`
}

// check is nil when r is a request a client can answer: at least one
// message, each from the user or the assistant with content, and a
// positive maxTokens; and one a plugin may send: no includeContext but
// "none" (the context of the client's other servers is not the plugin's
// to read).
func (r samplingRequest) check() error {
	if len(r.Messages) == 0 {
		return errors.New("no messages")
	}
	for i, m := range r.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return fmt.Errorf("message %d: role %q, want user or assistant", i+1, m.Role)
		}
		if len(m.Content) == 0 || string(m.Content) == "null" {
			return fmt.Errorf("message %d: no content", i+1)
		}
	}
	if r.MaxTokens == nil || *r.MaxTokens <= 0 {
		return errors.New("maxTokens must be a positive integer")
	}
	if r.IncludeContext != "" && r.IncludeContext != "none" {
		return fmt.Errorf(`includeContext %q: a plugin may only send "none" (it may not read the client's other context)`, r.IncludeContext)
	}
	return nil
}

// createMessage is create_message (hyper-mcp v2's sampling): the request
// goes to the caller's client (engine.CallSampler: morph mcp serve's, when
// it declared sampling), within the call's deadline, and the plugin reads
// the client's CreateMessageResult. hyper-mcp traps the plugin's call when
// it cannot sample; morph answers instead, so that a plugin can go on
// without a model: {"error": {"code": ..., "message": ...}}, a JSON-RPC
// error object, which hyper-mcp's PDKs decode as a CreateMessageResult
// with no model and no content. Every refusal is logged under the
// plugin's name.
func createMessage(env guest.Env) func(context.Context, guest.BlockMemory, []uint64) error {
	return func(ctx context.Context, mem guest.BlockMemory, stack []uint64) (err error) {
		params, err := mem.Read(stack[0])
		if err != nil {
			return err
		}
		// An answer over the plugin's input limit could not be written to it.
		answer, code, reason := sample(ctx, env, params, min(engine.MaxSamplingAnswer, guestOf(ctx).m.env.Limits.MaxInputBytes))
		if reason != nil {
			guestOf(ctx).state.Log().Warn(ctx, "create_message answered an error", "error", reason)
			answer, _ = json.Marshal(map[string]any{"error": map[string]any{"code": code, "message": reason.Error()}})
		}
		stack[0], err = mem.Write(answer)
		return err
	}
}

// sample relays params to the call's CallSampler, and is its answer (at
// most maxAnswer bytes), or the error code and reason it is not.
func sample(ctx context.Context, env guest.Env, params []byte, maxAnswer int) (json.RawMessage, int, error) {
	if len(params) > engine.MaxSamplingRequest {
		return nil, codeInvalidParams, fmt.Errorf("the request is %d bytes, over the limit of %d", len(params), engine.MaxSamplingRequest)
	}
	var req samplingRequest
	err := guest.DecodeJSON(params, env.Limits.MaxJSONDepth, &req)
	if err == nil {
		err = req.check()
	}
	if err != nil {
		return nil, codeInvalidParams, fmt.Errorf("the request is not MCP's CreateMessageRequest params: %w", err)
	}
	s, ok := engine.CallNotifierOf(ctx).(engine.CallSampler)
	if !ok {
		return nil, codeNoSampling, engine.ErrNoSampling
	}
	cctx, cancel := guest.CallContext(ctx)
	defer cancel()
	res, err := s.CreateMessage(cctx, params)
	switch {
	case errors.Is(err, engine.ErrNoSampling):
		return nil, codeNoSampling, err
	case err != nil:
		return nil, codeSamplingFailed, fmt.Errorf("the client did not answer: %w", err)
	case len(res) > maxAnswer:
		return nil, codeSamplingFailed, fmt.Errorf("the client's answer is %d bytes, over the limit of %d", len(res), maxAnswer)
	}
	return res, 0, nil
}
