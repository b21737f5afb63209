package engine

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/morphhost/morph/abi"
)

// SetJSON takes a middleware hook by its abi name and refuses any other
// name, naming the hooks there are; Hooks lists JSON and native hooks in
// the order a turn calls them.
func TestSetJSONAndHooks(t *testing.T) {
	f := &Funcs{ID: "m", Final: func(context.Context, abi.TurnEnd) error { return nil }}
	nop := func(context.Context, []byte, any) error { return nil }
	for _, bad := range []string{abi.HookBuildPrompt, "on_everything", ""} {
		err := f.SetJSON(bad, nop)
		if err == nil {
			t.Errorf("SetJSON(%q) = nil, want an error", bad)
			continue
		}
		if !strings.Contains(err.Error(), abi.HookBeforeToolCall) {
			t.Errorf("SetJSON(%q) = %v, want it to list the middleware hooks", bad, err)
		}
	}
	for _, h := range []string{abi.HookAfterToolCall, abi.HookOnTurnStart} {
		if err := f.SetJSON(h, nop); err != nil {
			t.Fatalf("SetJSON(%s): %v", h, err)
		}
	}
	want := []string{abi.HookOnTurnStart, abi.HookAfterToolCall, abi.HookOnFinal}
	if got := f.Hooks(); !slices.Equal(got, want) {
		t.Errorf("Hooks() = %v, want %v", got, want)
	}
}

// CallJSON and Typed reach a hook the same way whether it is native or
// JSON: the payload goes in as JSON, the answer comes out decoded.
func TestCallJSONAndTyped(t *testing.T) {
	ctx := context.Background()
	native := &Funcs{ID: "native",
		BeforeToolCall: func(_ context.Context, in abi.BeforeToolCallInput) (abi.BeforeToolCallOutput, error) {
			return abi.BeforeToolCallOutput{Deny: true, Reason: "no " + in.Tool}, nil
		}}
	var seen string
	viaJSON := &Funcs{ID: "json"}
	if err := viaJSON.SetJSON(abi.HookBeforeToolCall, func(_ context.Context, payload []byte, answer any) error {
		seen = string(payload)
		var in abi.BeforeToolCallInput
		if err := json.Unmarshal(payload, &in); err != nil {
			return err
		}
		*answer.(*abi.BeforeToolCallOutput) = abi.BeforeToolCallOutput{Deny: true, Reason: "no " + in.Tool}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	in := abi.BeforeToolCallInput{SessionID: "s", Turn: 1, Step: 1, Tool: "rm"}
	payload, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []*Funcs{native, viaJSON} {
		raw, err := f.CallJSON(ctx, abi.HookBeforeToolCall, payload)
		if err != nil {
			t.Fatalf("%s: CallJSON: %v", f.ID, err)
		}
		if want := `{"deny":true,"reason":"no rm"}`; string(raw) != want {
			t.Errorf("%s: CallJSON = %s, want %s", f.ID, raw, want)
		}
		out, err := f.Typed().BeforeToolCall(ctx, in)
		if err != nil {
			t.Fatalf("%s: Typed: %v", f.ID, err)
		}
		if !out.Deny || out.Reason != "no rm" {
			t.Errorf("%s: Typed answer %+v, want a denial naming rm", f.ID, out)
		}
	}
	if seen != string(payload) {
		t.Errorf("the JSON hook was given %s, want %s", seen, payload)
	}
	if _, err := native.CallJSON(ctx, abi.HookOnAction, payload); err == nil {
		t.Error("CallJSON of a hook the middleware lacks = nil error, want one")
	}
	if _, err := native.CallJSON(ctx, abi.HookBeforeToolCall, []byte(`{"turn":"one"}`)); err == nil {
		t.Error("CallJSON of a payload that does not decode = nil error, want one")
	}
}

// A JSON hook's failure is the middleware's fault, isolated like a native
// one's: counted, and the turn goes on.
func TestJSONHookFaultIsIsolated(t *testing.T) {
	f := &Funcs{ID: "failing", Bounded: true}
	boom := errors.New("boom")
	if err := f.SetJSON(abi.HookOnTurnStart, func(context.Context, []byte, any) error { return boom }); err != nil {
		t.Fatal(err)
	}
	e := New(script(finalReply("done")), registry(), WithMiddleware(f))
	if _, _, err := e.Run(context.Background(), "t", RunOptions{}); err != nil {
		t.Fatalf("Run: %v; a failing hook must not end the turn", err)
	}
	st := e.MiddlewareStats()
	if len(st) != 1 {
		t.Fatalf("%d middleware stats, want 1", len(st))
	}
	if st[0].Calls != 1 || st[0].Faults != 1 {
		t.Errorf("stats %+v, want 1 call and 1 fault", st[0])
	}
}
