package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/internal/testenv"
	"github.com/morphhost/morph/llm"
)

func TestParseResponseTypes(t *testing.T) {
	t.Run("tool_call", func(t *testing.T) {
		r, err := ParseResponse(llm.Result{Text: `{"type":"tool_call","tool_call":{"thought":"t","tool_name":"calc","tool_params":{"expression":"1+1"}}}`})
		if err != nil {
			t.Fatal(err)
		}
		if r.Type != TypeToolCall {
			t.Fatalf("Type = %q, want %q", r.Type, TypeToolCall)
		}
		checkFields(t, "tool call", eq("ToolName", r.ToolCall.ToolName, "calc"), eq("expression", r.ToolCall.ToolParams["expression"], "1+1"),
			eq("Thought", r.ToolCall.Thought, "t"))
		if r.RawFinalAnswer != nil {
			t.Fatalf("RawFinalAnswer = %s, want nil for a tool_call", r.RawFinalAnswer)
		}
	})
	t.Run("tool_call without params gets an empty map", func(t *testing.T) {
		r, err := ParseResponse(llm.Result{Text: `{"type":"tool_call","tool_call":{"tool_name":"now"}}`})
		if err != nil || r.ToolCall.ToolParams == nil {
			t.Fatalf("err=%v params=%v", err, r.ToolCall.ToolParams)
		}
	})
	t.Run("final keeps raw payload", func(t *testing.T) {
		payload := `{"thought":"done","output":{"n":42},"sources":["a","b"]}`
		r, err := ParseResponse(llm.Result{Text: `{"type":"final","final":` + payload + `}`})
		if err != nil {
			t.Fatal(err)
		}
		if r.Type != TypeFinal {
			t.Fatalf("Type = %q, want %q", r.Type, TypeFinal)
		}
		checkFields(t, "final", eq("Thought", r.Final.Thought, "done"), eq("output's n", r.Final.Output.(map[string]any)["n"], 42.0))
		if string(r.RawFinalAnswer) != payload {
			t.Fatalf("RawFinalAnswer = %s, want %s", r.RawFinalAnswer, payload)
		}
	})
	t.Run("final_answer is an alias and wins over final", func(t *testing.T) {
		r, err := ParseResponse(llm.Result{Text: `{"type":"final","final":{"output":"loser"},"final_answer":{"output":"winner","truth_assessment":"high"}}`})
		if err != nil {
			t.Fatal(err)
		}
		if r.Type != TypeFinal {
			t.Fatalf("Type = %q, want %q", r.Type, TypeFinal)
		}
		checkFields(t, "final", eq("Output", r.Final.Output, "winner"),
			eq("RawFinalAnswer", string(r.RawFinalAnswer), `{"output":"winner","truth_assessment":"high"}`))
		r, err = ParseResponse(llm.Result{Text: `{"type":"final_answer","final_answer":{"output":"x"}}`})
		if err != nil {
			t.Fatalf("final_answer type: %v", err)
		}
		if r.Type != TypeFinal {
			t.Fatalf("final_answer type: Type = %q, want %q", r.Type, TypeFinal)
		}
		if r.Final.Output != "x" {
			t.Errorf("final_answer type: Output = %v, want %q", r.Final.Output, "x")
		}
	})
	t.Run("bare final value is the output", func(t *testing.T) {
		r, err := ParseResponse(llm.Result{Text: `{"type":"final","final":"42"}`})
		if err != nil {
			t.Fatal(err)
		}
		checkFields(t, "final", eq("Output", r.Final.Output, "42"), eq("RawFinalAnswer", string(r.RawFinalAnswer), `"42"`))
	})
	t.Run("plan with string and object steps", func(t *testing.T) {
		r, err := ParseResponse(llm.Result{Text: `{"type":"plan","plan":{"summary":"s","steps":["look",{"step":"compute","status":"in_progress"},{"step":"x"}]}}`})
		if err != nil {
			t.Fatal(err)
		}
		want := []abi.PlanStep{{Step: "look", Status: abi.StepPending}, {Step: "compute", Status: abi.StepInProgress}, {Step: "x", Status: abi.StepPending}}
		if r.Type != TypePlan || len(r.Plan.Steps) != 3 {
			t.Fatalf("got %+v", r.Plan)
		}
		for i, s := range want {
			if r.Plan.Steps[i] != s {
				t.Errorf("step %d = %+v, want %+v", i, r.Plan.Steps[i], s)
			}
		}
	})
	t.Run("type inferred from the payload", func(t *testing.T) {
		r, err := ParseResponse(llm.Result{Text: `{"final":{"output":1}}`})
		if err != nil || r.Type != TypeFinal {
			t.Fatalf("err=%v %+v", err, r)
		}
	})
}

func TestParseResponseTolerantOrder(t *testing.T) {
	final := func(out string) string { return `{"type":"final","final":{"output":"` + out + `"}}` }
	cases := []struct {
		name string
		res  llm.Result
		want string
	}{
		{"client JSON beats text", llm.Result{JSON: map[string]any{"type": "final", "final": map[string]any{"output": "json"}}, Text: final("text")}, "json"},
		{"whole text", llm.Result{Text: "  \n" + final("whole") + "\n"}, "whole"},
		{"fenced json block beats an earlier object", llm.Result{Text: "I think {\"a\":1} is wrong.\n```json\n" + final("fenced") + "\n```\n"}, "fenced"},
		{"json-tagged fence beats an untagged one", llm.Result{Text: "```\n" + final("plain") + "\n```\n```json\n" + final("tagged") + "\n```"}, "tagged"},
		{"untagged fence", llm.Result{Text: "```\n" + final("plain") + "\n```"}, "plain"},
		{"first balanced object in prose", llm.Result{Text: "Sure! " + `{"type":"final","final":{"output":"br{ace}s \"q\""}}` + " trailing {junk"}, `br{ace}s "q"`},
		{"skips an invalid balanced span", llm.Result{Text: "{not json} then " + final("second")}, "second"},
		{"client JSON that is not an object falls through", llm.Result{JSON: "just a string", Text: final("text")}, "text"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := ParseResponse(c.res)
			if err != nil {
				t.Fatal(err)
			}
			if r.Final == nil || r.Final.Output != c.want {
				t.Fatalf("got %+v, want output %q", r.Final, c.want)
			}
		})
	}
}

func TestParseResponseErrors(t *testing.T) {
	cases := []struct {
		text string
		want error
	}{
		{"no json here", ErrNoJSON},
		{"", ErrNoJSON},
		{"[1,2,3]", ErrNoJSON},
		{`{"type":"dance","dance":{}}`, ErrUnknownType},
		{`{"thought":"hmm"}`, ErrUnknownType},
		{`{"type":"tool_call"}`, ErrMissingPayload},
		{`{"type":"final","final":null}`, ErrMissingPayload},
		{`{"type":"plan"}`, ErrMissingPayload},
		{`{"type":"tool_call","tool_call":{"tool_params":{}}}`, ErrMissingToolName},
		{`{"type":"tool_call","tool_call":"calc"}`, ErrMissingPayload},
	}
	for _, c := range cases {
		_, err := ParseResponse(llm.Result{Text: c.text})
		if !errors.Is(err, c.want) {
			t.Errorf("ParseResponse(%q) error = %v, want %v", c.text, err, c.want)
		}
	}
}

// A reply nested deeper than abi.MaxDepth is a parse error (the model gets
// a correction), however it is found; before the fix it was accepted, and
// a final 9,999 deep became hundreds of MB when pretty-printed.
func TestParseResponseRefusesDeepJSON(t *testing.T) {
	deep := strings.Repeat("[", 9999) + strings.Repeat("]", 9999)
	for _, text := range []string{
		`{"type":"final","final":{"output":` + deep + `}}`,
		"Here:\n```json\n{\"type\":\"final\",\"final\":" + deep + "}\n```",
		`prose {"type":"tool_call","tool_call":{"tool_name":"x","tool_params":{"a":` + deep + `}}} prose`,
	} {
		if _, err := ParseResponse(llm.Result{Text: text}); !errors.Is(err, ErrTooDeep) || len(err.Error()) > 200 {
			t.Errorf("error %.200v, want a short ErrTooDeep", err)
		}
	}
	var nested any = "x"
	for range 100 {
		nested = []any{nested}
	}
	if _, err := ParseResponse(llm.Result{JSON: map[string]any{"type": "final", "final": nested}}); !errors.Is(err, ErrTooDeep) {
		t.Errorf("decoded JSON: error %v, want ErrTooDeep", err)
	}
	ok := `{"type":"final","final":{"output":` + strings.Repeat("[", 60) + strings.Repeat("]", 60) + `}}`
	if _, err := ParseResponse(llm.Result{Text: ok}); err != nil {
		t.Errorf("60 levels: %v", err)
	}
}

// A reply of braces costs linear time to search; before the fix every
// brace started a scan to the end (200 KB: about a minute).
func TestParseResponseBraceFloodIsLinear(t *testing.T) {
	for _, text := range []string{
		"x" + strings.Repeat("{", 200_000),
		"x" + strings.Repeat(`{"a":`, 40_000),
		"x" + strings.Repeat(`{"a":"}`, 30_000),
	} {
		var err error
		testenv.Within(t, "parsing a brace flood", func() { _, err = ParseResponse(llm.Result{Text: text}) })
		if !errors.Is(err, ErrNoJSON) {
			t.Errorf("error %v, want ErrNoJSON", err)
		}
	}
}

// Model-written text repeated by a parse error is cut.
func TestParseErrorsAreBrief(t *testing.T) {
	for _, text := range []string{
		`{"type":"` + strings.Repeat("x", 100_000) + `"}`,
		`{"type":"final","final":{"thought":` + strings.Repeat("9", 100_000) + `}}`,
	} {
		_, err := ParseResponse(llm.Result{Text: text})
		if err == nil || len(err.Error()) > 2*maxDetail+100 {
			t.Errorf("error of %d bytes", len(err.Error()))
		}
	}
}
