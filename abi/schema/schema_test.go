package schema

import (
	"encoding/json"
	"io/fs"
	"reflect"
	"testing"

	"github.com/morphhost/morph/abi"
)

// Every hook's payloads have a schema file, found by File from the hook
// table's types.
func TestFileOfEveryHook(t *testing.T) {
	for _, h := range abi.Hooks {
		if _, ok := File(h.Input); !ok {
			t.Errorf("hook %s: no schema file for its input %s", h.Name, h.Input)
		}
		if h.Output == nil {
			continue
		}
		if _, ok := File(h.Output); !ok {
			t.Errorf("hook %s: no schema file for its output %s", h.Name, h.Output)
		}
	}
}

func TestFile(t *testing.T) {
	for typ, want := range map[reflect.Type]string{
		reflect.TypeFor[abi.PromptOutput]():         "prompt_output.json",
		reflect.TypeFor[abi.Final]():                "final.json",
		reflect.TypeFor[abi.HTTPRequest]():          "http_request.json",
		reflect.TypeFor[abi.BeforeToolCallOutput](): "before_tool_call_output.json",
		reflect.TypeFor[abi.ToolCallOutput]():       "tool_call_output.json",
	} {
		if got, ok := File(typ); got != want || !ok {
			t.Errorf("File(%s) = %q, %v; want %q, true", typ, got, ok, want)
		}
	}
	for typ, want := range map[reflect.Type]string{nil: "", reflect.TypeFor[abi.Hook](): "hook.json", reflect.TypeFor[int](): "int.json"} {
		got, ok := File(typ)
		if ok {
			t.Errorf("File(%v) found %q; want no file", typ, got)
		}
		if got != want {
			t.Errorf("File(%v) = %q; want the name it would have, %q", typ, got, want)
		}
	}
}

// Every embedded file is a JSON object whose $id is Base and its name, as
// the files' $refs between one another assume.
func TestEmbeddedIDs(t *testing.T) {
	names, err := fs.Glob(FS, "*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < len(abi.Hooks) {
		t.Fatalf("%d schema files embedded, fewer than the %d hooks", len(names), len(abi.Hooks))
	}
	for _, name := range names {
		b, err := fs.ReadFile(FS, name)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			ID string `json:"$id"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if want := Base + name; doc.ID != want {
			t.Errorf("%s: $id %q, want %q", name, doc.ID, want)
		}
	}
}
