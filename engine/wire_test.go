package engine

import (
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
