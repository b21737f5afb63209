package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/morphhost/morph/engine"
)

// DefaultMaxSamplingPerCall bounds the sampling requests one call sends
// its client when Options.MaxSamplingPerCall is zero: each spends the
// client's model (and, in most clients, asks its user), so a tool gets a
// few questions, not a loop.
const DefaultMaxSamplingPerCall = 4

// ErrMaxSampling marks a sampling request refused because its call sent
// Options.MaxSamplingPerCall already (errors.Is); the plugin is answered an
// error result, and the refusal is counted (Refusals.Sampling).
var ErrMaxSampling = errors.New("mcp: max_sampling_per_call reached")

// ErrSamplingContext marks a plugin's sampling request refused for its
// includeContext other than "none": "thisServer" or "allServers" would
// have the client put the context of its other MCP servers into a
// completion the plugin reads, data the plugin was never given.
var ErrSamplingContext = errors.New(`mcp: a plugin's sampling request may not ask for the client's context (includeContext must be "none" or absent)`)

// CreateMessage asks the client's model (sampling/createMessage) with
// params, MCP's CreateMessageRequest params, and answers the client's
// CreateMessageResult: engine.ErrNoSampling when the client did not
// declare the sampling capability, ErrSamplingContext for an
// includeContext other than "none", ErrMaxSampling past
// Options.MaxSamplingPerCall requests in the call (warned about once a
// call). ctx bounds the wait (the plugin's call's deadline).
func (n *notifier) CreateMessage(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	if ip := n.ss.InitializeParams(); ip == nil || ip.Capabilities == nil || ip.Capabilities.Sampling == nil {
		return nil, engine.ErrNoSampling
	}
	var p sdk.CreateMessageParams
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, fmt.Errorf("mcp: sampling params: %w", err)
	}
	if p.IncludeContext != "" && p.IncludeContext != "none" {
		return nil, fmt.Errorf("%w: includeContext %q", ErrSamplingContext, p.IncludeContext)
	}
	n.mu.Lock()
	n.sampled++
	over, first := n.sampled > n.s.opts.MaxSamplingPerCall, n.sampled == n.s.opts.MaxSamplingPerCall+1
	n.mu.Unlock()
	if over {
		n.s.mu.Lock()
		n.s.refused.Sampling++
		n.s.mu.Unlock()
		if first {
			n.s.log.WarnContext(ctx, "mcp: a call's sampling requests past max_sampling_per_call are refused",
				"tool", n.tool, "max_sampling_per_call", n.s.opts.MaxSamplingPerCall)
		}
		return nil, fmt.Errorf("%w: %d sampling requests sent in this call", ErrMaxSampling, n.s.opts.MaxSamplingPerCall)
	}
	res, err := n.ss.CreateMessage(ctx, &p)
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}
