package conform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/host"
	"github.com/morphhost/morph/host/internal/guest"
)

// conformer makes the calls of one Run.
type conformer struct {
	p            *host.Plugin
	ctx          context.Context
	reg          *engine.Registry // the plugin's tools, to validate params as the engine does
	schemaLimits engine.SchemaLimits
	samples      map[string]any // built-in input of each hook
	samplesUntil time.Time      // when building tool samples is given up
	calls        []Call
}

func (c *conformer) add(call Call) { c.calls = append(c.calls, call) }

// hook calls hook h with input, a Go value to encode.
func (c *conformer) hook(h, label string, input any) {
	export := hookExport(h)
	c.add(c.call(Call{Name: h, Kind: Hook, Export: export, Input: label}, mustJSON(input), conformHooks[h], ""))
}

func (c *conformer) hookFixture(h string, f fixtureInput) {
	export := hookExport(h)
	pc := conformHooks[h]
	if err := decodeObject(f.raw, pc.input()); err != nil {
		c.add(badFixture(Call{Name: h, Kind: Hook, Export: export, Input: f.label},
			fmt.Sprintf("not a %s input: %v", h, err)))
		return
	}
	c.add(c.call(Call{Name: h, Kind: Hook, Export: export, Input: f.label}, f.raw, pc, ""))
}

// tool calls tool t with a sample built from its schema, then with its fixtures.
func (c *conformer) tool(t abi.ToolSpec, fixtures []fixtureInput) {
	row := func(label string) Call {
		return Call{Name: t.Name, Kind: Tool, Export: abi.ExportCallTool, Input: label}
	}
	if err := engine.CheckToolSpec(t.Name, t.Description, string(t.Parameters), c.schemaLimits); err != nil {
		call := row("sample")
		call.Status, call.ErrorKind, call.Error, call.Err = Fail, errorKindName(err), err.Error(), err
		c.add(call)
		for _, f := range fixtures {
			c.add(badFixture(row(f.label), "not sent: the engine refuses the tool"))
		}
		return
	}
	params, err := c.sample(t.Parameters)
	if err == nil {
		err = c.reg.Validate(t.Name, params)
	}
	if err != nil {
		call := row("sample")
		call.Status = Skip
		call.Note = fmt.Sprintf("no sample call: could not build params that satisfy the tool's schema (%v); add a fixture %s.json", err, t.Name)
		c.add(call)
	} else {
		raw, _ := json.Marshal(abi.ToolCallInput{Tool: t.Name, Params: params})
		c.add(c.call(row("sample"), raw, toolPayloads, "the tool rejected the sample params "+guest.Truncate(mustJSON(params), 200)))
	}
	for _, f := range fixtures {
		var in abi.ToolCallInput
		if err := decodeObject(f.raw, &in); err != nil {
			c.add(badFixture(row(f.label), fmt.Sprintf("not a ToolCallInput {\"tool\": ..., \"params\": {...}}: %v", err)))
			continue
		}
		raw := f.raw
		switch in.Tool {
		case t.Name:
		case "":
			in.Tool = t.Name
			raw, _ = json.Marshal(in)
		default:
			c.add(badFixture(row(f.label), fmt.Sprintf("names the tool %q, but its key is for %q", in.Tool, t.Name)))
			continue
		}
		if err := c.reg.Validate(t.Name, in.Params); err != nil {
			c.add(badFixture(row(f.label), fmt.Sprintf("the engine would never send it: %v", err)))
			continue
		}
		c.add(c.call(row(f.label), raw, toolPayloads, "the tool reported an error"))
	}
}

// sample is SampleParams within what is left of the run's time for
// samples.
func (c *conformer) sample(schema json.RawMessage) (map[string]any, error) {
	deadline, bound := time.Now().Add(maxSampleTime), maxSampleTime.String()
	if c.samplesUntil.Before(deadline) {
		deadline, bound = c.samplesUntil, maxConformSampleTime.String()+", the bound of all the plugin's samples"
	}
	return sampleParams(schema, deadline, bound)
}

// call makes one call and fills in call's verdict. guestNote, when not
// empty, makes a guest-reported error conform with that note (tools only).
func (c *conformer) call(call Call, input []byte, pc payloadCheck, guestNote string) Call {
	p := c.p
	before := p.Stats()
	var out []byte
	start := time.Now()
	err := p.CallFunc(c.ctx, call.Export, input, func(view []byte) error {
		out = append([]byte(nil), view...)
		if len(view) == 0 {
			return nil
		}
		return json.Unmarshal(view, pc.output()) // what the host's adapters do
	})
	call.Duration = time.Since(start)
	after := p.Stats()
	call.NewInstance = after.Instantiated > before.Instantiated
	if after.Discarded == before.Discarded {
		call.MemoryBytes, _ = p.IdleMemory()
		call.MemoryPages = call.MemoryBytes / 65536
	}
	if len(out) > 0 {
		call.Output = clip(out, 1024)
	}
	var note string
	badAnswer := func(err error) error {
		return &host.Error{Plugin: p.Name(), Export: call.Export, Kind: host.ErrBadOutput, Msg: call.Kind + " " + call.Name + ": " + err.Error()}
	}
	switch {
	case err == nil:
		if note, err = pc.check(out); err != nil {
			err = badAnswer(err)
		}
	case errors.Is(err, host.ErrBadOutput) && pc.answer != nil && json.Valid(out):
		// The host could not decode the answer: its schema tells where it
		// goes wrong, when it can.
		if serr := pc.checkSchema(out); serr != nil {
			err = badAnswer(serr)
		}
	}
	switch {
	case err == nil:
		call.Status, call.Note = OK, note
		if note != "" {
			call.Status = Note
		}
	case guestNote != "" && errors.Is(err, host.ErrGuest):
		var he *host.Error
		errors.As(err, &he)
		call.Status, call.Note = Note, guestNote+": "+he.Msg
	default:
		call.Status, call.ErrorKind, call.Error, call.Err = Fail, errorKindName(err), err.Error(), err
	}
	return call
}

// destroy calls morph_destroy on an instance (see Plugin.CallDestroy).
func (c *conformer) destroy() {
	p := c.p
	call := Call{Name: "destroy", Kind: Destroy, Export: abi.ExportDestroy, Input: "(empty)"}
	before := p.Stats()
	start := time.Now()
	out, mem, err := p.CallDestroy(c.ctx)
	call.MemoryBytes, call.MemoryPages = mem, mem/65536
	if len(out) > 0 {
		call.Output = clip(out, 1024)
	}
	call.Duration = time.Since(start)
	call.NewInstance = p.Stats().Instantiated > before.Instantiated
	if err == nil {
		call.Status = OK
	} else {
		call.Status, call.ErrorKind, call.Error, call.Err = Fail, errorKindName(err), err.Error(), err
	}
	c.add(call)
}

// clip is b, or its first and last n/2 bytes around " ... " when longer than n.
func clip(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n/2]) + " ... " + string(b[len(b)-n/2:])
}

// errorKindName is the short name of err's kind, for reports.
func errorKindName(err error) string {
	for _, k := range []struct {
		kind error
		name string
	}{
		{host.ErrTimeout, "timeout"}, {host.ErrTrap, "trap"}, {host.ErrInputTooLarge, "input_too_large"},
		{host.ErrOutputTooLarge, "output_too_large"}, {host.ErrBadOutput, "bad_output"}, {host.ErrABIMismatch, "abi_mismatch"},
		{host.ErrGuest, "guest"}, {host.ErrLoad, "load"}, {host.ErrClosed, "closed"}, {host.ErrCanceled, "canceled"}, {ErrInvalidFixture, "invalid_fixture"},
		{engine.ErrInvalidSchema, "invalid_schema"}, {engine.ErrInvalidTool, "invalid_tool"}, {engine.ErrInvalidParams, "invalid_params"},
	} {
		if errors.Is(err, k.kind) {
			return k.name
		}
	}
	return "error"
}
