package engine

import (
	"context"
	"reflect"
	"testing"

	"github.com/morphhost/morph/abi"
)

// wire carries every field of the wire's RunOptions: a field added to
// abi.RunOptions, and to the engine's RunOptions under the same name, must
// reach params builders.
func TestRunOptionsWireCarriesEveryField(t *testing.T) {
	var o RunOptions
	ov := reflect.ValueOf(&o).Elem()
	wt := reflect.TypeFor[abi.RunOptions]()
	for i := range wt.NumField() {
		f := ov.FieldByName(wt.Field(i).Name)
		if !f.IsValid() {
			t.Fatalf("abi.RunOptions.%s has no field of that name in the engine's RunOptions", wt.Field(i).Name)
		}
		switch f.Kind() {
		case reflect.String:
			f.SetString("x")
		case reflect.Int:
			f.SetInt(7)
		case reflect.Map:
			f.Set(reflect.ValueOf(map[string]any{"k": 1}))
		default:
			t.Fatalf("RunOptions.%s: a %s; teach this test its kind", wt.Field(i).Name, f.Kind())
		}
	}
	w := reflect.ValueOf(o.wire())
	for i := range wt.NumField() {
		if w.Field(i).IsZero() {
			t.Errorf("wire() does not carry RunOptions.%s", wt.Field(i).Name)
		}
	}
}

// A params builder is told a deep copy of the run's parameters: changing
// it, nested values included, does not change what the caller passed.
func TestParamsBuilderCannotChangeTheBase(t *testing.T) {
	vandal := WithHook(abi.HookBuildParams, func(_ context.Context, in any) (any, error) {
		opts := in.(abi.ParamsInput).Options
		opts.Parameters["seed"] = 99
		opts.Parameters["response_format"].(map[string]any)["type"] = "text"
		return nil, nil
	})
	format := map[string]any{"type": "json_object"}
	base := map[string]any{"seed": 3, "response_format": format}
	if _, _, err := New(script(finalReply("x")), nil, vandal).Run(context.Background(), "t", RunOptions{Parameters: base}); err != nil {
		t.Fatal(err)
	}
	if base["seed"] != 3 || format["type"] != "json_object" {
		t.Fatalf("base now %v: the builder changed the caller's parameters", base)
	}
}
