package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/morphhost/morph/engine"
)

// codeNotRelayed is the JSON-RPC error code of a sampling request morph's
// client does not relay (internal error): no one to ask, or a caller that
// would not or could not answer (a limit, its client's error, the
// deadline, an answer too long). Not method-not-found, a client without
// sampling's: the SDKs replace its message by their own, and the message
// says why.
const codeNotRelayed = -32603

// Why a server's question (elicitation, sampling) has no one to ask.
var (
	errNoCall  = errors.New("no call of morph's is in flight on this server")
	errCalls   = errors.New("more than one call of morph's is in flight on this server, and the request names none of them")
	errNoAsker = errors.New("the call's caller cannot answer (morph run, or an embedder that lends no one to ask)")
)

// asks are what a server's questions to morph's client left to say once:
// the reasons already logged, so that a server that asks in a loop under
// `morph run` costs one warning of each.
type asks struct {
	told map[string]bool
}

// refused logs once per server, kind of question and reason (one of
// asker's) that a question was not relayed.
func (srv *server) refused(kind string, reason error) {
	key := kind + ": " + reason.Error()
	srv.mu.Lock()
	first := !srv.asks.told[key]
	if srv.asks.told == nil {
		srv.asks.told = map[string]bool{}
	}
	srv.asks.told[key] = true
	srv.mu.Unlock()
	if first {
		srv.log.Warn("mcp server's "+kind+" not relayed to the caller (logged once per server)", "reason", reason)
	}
}

// asker is the call a server's question belongs to and the caller's
// notifier of it, when that can answer (is a T): the one call in flight
// on the server (the SDK's request names no call; see only). Its context
// is the call's, for the call's deadline and values (the caller's client
// sends the question on the call's own stream), ended as well when the
// server cancels the question (ctx, the SDK's).
func asker[T engine.CallNotifier](ctx context.Context, srv *server) (T, context.Context, context.CancelFunc, error) {
	var none T
	call, calls := srv.only()
	q, ok := call.n.(T)
	switch {
	case calls == 0:
		return none, nil, nil, errNoCall
	case calls > 1:
		return none, nil, nil, errCalls
	case !ok:
		return none, nil, nil, errNoAsker
	}
	cctx, cancel := context.WithCancel(call.ctx)
	stop := context.AfterFunc(ctx, cancel)
	return q, cctx, func() { stop(); cancel() }, nil
}

// elicit is the client's ElicitationHandler: a server's elicitation/create
// goes to the caller of the one call in flight (engine.CallElicitor:
// morph mcp serve's client, which counts it against the call's
// max_notifications) within the call's deadline, and its answer, up to
// engine.MaxElicitAnswer, back to the server. Anything else is a decline,
// MCP's answer of a user who does not answer, as for a plugin's
// create_elicitation.
func (srv *server) elicit(ctx context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
	decline := &sdk.ElicitResult{Action: "decline"}
	el, cctx, done, err := asker[engine.CallElicitor](ctx, srv)
	if err != nil {
		srv.refused("elicitation", err)
		return decline, nil
	}
	defer done()
	params, err := json.Marshal(req.Params)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	answer, err := el.Elicit(cctx, params)
	if err == nil && len(answer) > engine.MaxElicitAnswer {
		err = fmt.Errorf("the answer is %d bytes, over the limit of %d", len(answer), engine.MaxElicitAnswer)
	}
	var res sdk.ElicitResult
	if err == nil {
		err = json.Unmarshal(answer, &res)
	}
	if err != nil {
		srv.lines.line("mcp server's elicitation declined: the caller did not answer", err.Error())
		return decline, nil
	}
	return &res, nil
}

// createMessage is the client's CreateMessageHandler: a server's
// sampling/createMessage (up to engine.MaxSamplingRequest) goes to the
// caller of the one call in flight (engine.CallSampler: morph mcp serve's
// client, when it declared sampling, within the call's
// max_sampling_per_call) within the call's deadline, and its answer, up to
// engine.MaxSamplingAnswer, back to the server. Anything else is a
// JSON-RPC error that says why, as for a plugin's create_message.
func (srv *server) createMessage(ctx context.Context, req *sdk.CreateMessageRequest) (*sdk.CreateMessageResult, error) {
	refuse := func(code int64, err error) (*sdk.CreateMessageResult, error) {
		srv.lines.line("mcp server's sampling request refused", err.Error())
		return nil, &jsonrpc.Error{Code: code, Message: "morph: " + err.Error()}
	}
	s, cctx, done, err := asker[engine.CallSampler](ctx, srv)
	if err != nil {
		srv.refused("sampling request", err)
		return nil, &jsonrpc.Error{Code: codeNotRelayed, Message: "morph: sampling request not relayed: " + err.Error()}
	}
	defer done()
	params, err := json.Marshal(req.Params)
	switch {
	case err != nil:
		return refuse(jsonrpc.CodeInvalidParams, err)
	case len(params) > engine.MaxSamplingRequest:
		return refuse(jsonrpc.CodeInvalidParams, fmt.Errorf("the request is %d bytes, over the limit of %d", len(params), engine.MaxSamplingRequest))
	}
	answer, err := s.CreateMessage(cctx, params)
	switch {
	case errors.Is(err, engine.ErrNoSampling):
		return refuse(codeNotRelayed, err)
	case err != nil:
		return refuse(codeNotRelayed, fmt.Errorf("the caller did not answer: %w", err))
	case len(answer) > engine.MaxSamplingAnswer:
		return refuse(codeNotRelayed, fmt.Errorf("the caller's answer is %d bytes, over the limit of %d", len(answer), engine.MaxSamplingAnswer))
	}
	var res sdk.CreateMessageResult
	if err := json.Unmarshal(answer, &res); err != nil {
		return refuse(codeNotRelayed, fmt.Errorf("the caller's answer is not a CreateMessageResult: %w", err))
	}
	return &res, nil
}
