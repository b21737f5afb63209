package engine

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/morphhost/morph/internal/testenv"
)

// The registry compiles each schema under its limits (engine/internal/
// schemacost tests what they refuse), and tells a broken schema
// (ErrInvalidSchema) from a bad call (ErrInvalidParams), naming the tool.
func TestSchemaErrorsNameTheTool(t *testing.T) {
	wantErr := func(err, target error, contains ...string) {
		t.Helper()
		if !errors.Is(err, target) {
			t.Fatalf("error %v, want %v", err, target)
		}
		for _, s := range append(contains, `tool "probe"`) {
			if !strings.Contains(err.Error(), s) {
				t.Fatalf("error %q does not mention %s", err, s)
			}
		}
	}
	r := registry(&testTool{name: "probe", schema: `{"$ref":"file:///etc/passwd"}`})
	var err error
	testenv.Within(t, "checking the schema", func() { err = r.Check() })
	wantErr(err, ErrInvalidSchema, "outside itself")
	wantErr(r.Validate("probe", map[string]any{}), ErrInvalidSchema, "outside itself")

	r = registry(&testTool{name: "probe", schema: `{"type":"object","properties":{"xs":{"type":"array","items":{"type":"integer"}}}}`})
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
	wantErr(r.Validate("probe", map[string]any{"xs": []any{1, "two"}}), ErrInvalidParams, "at /xs/1")
	many := make([]any, 100)
	for i := range many {
		many[i] = i
	}
	if err := r.Validate("probe", map[string]any{"xs": many}); err != nil {
		t.Fatalf("100 items under the default limits: %v", err)
	}
	r.SetSchemaLimits(SchemaLimits{MaxSteps: 50})
	wantErr(r.Validate("probe", map[string]any{"xs": many}), ErrInvalidParams, "steps, more than the limit of 50")
	r.SetSchemaLimits(SchemaLimits{MaxBytes: 20})
	wantErr(r.Check(), ErrInvalidSchema, "more than the limit of 20")
}

// Every limit of SchemaLimits that bounds a schema reaches the cost
// analysis: a field dropped on the way would leave the library's own
// (unbounded) behaviour.
func TestCostLimitsCarryEveryLimit(t *testing.T) {
	l := SchemaLimits{}
	lv := reflect.ValueOf(&l).Elem()
	for i := range lv.NumField() {
		lv.Field(i).SetInt(int64(1000 + i))
	}
	cl := l.costLimits()
	cv := reflect.ValueOf(cl)
	for i := range cv.NumField() {
		name := cv.Type().Field(i).Name
		if got, want := cv.Field(i).Int(), lv.FieldByName(name).Int(); got != want {
			t.Errorf("%s = %d, want SchemaLimits.%s, %d", name, got, name, want)
		}
	}
}

// One call breaking an enum at thousands of places gets a bounded message.
func TestViolationsAreBounded(t *testing.T) {
	enum := `["` + strings.Repeat("v", 4000) + `"]`
	r := registry(&testTool{name: "probe", schema: `{"type":"object","properties":{"xs":{"type":"array","items":{"enum":` + enum + `}}}}`})
	xs := make([]any, 2000)
	for i := range xs {
		xs[i] = "nope"
	}
	err := r.Validate("probe", map[string]any{"xs": xs})
	if !errors.Is(err, ErrInvalidParams) {
		t.Fatalf("err = %.300v, want ErrInvalidParams", err)
	}
	if n, most := len(err.Error()), 10*(300+40)+100; n > most {
		t.Errorf("error of %d bytes, want at most %d: %.300s", n, most, err)
	}
	if !strings.Contains(err.Error(), "and 1990 more") {
		t.Errorf("error %.300s..., want it to say %q", err, "and 1990 more")
	}
}
