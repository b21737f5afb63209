package host

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/morphhost/morph/host/internal/wasmbin"
)

// ModuleLimits' doc states each field's default for its users, who do not
// read package wasmbin: each stated default is the one the check applies.
func TestModuleLimitsDocStatesDefaults(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "loader.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var fields []*ast.Field
	ast.Inspect(f, func(n ast.Node) bool {
		if ts, ok := n.(*ast.TypeSpec); ok && ts.Name.Name == "ModuleLimits" {
			fields = ts.Type.(*ast.StructType).Fields.List
		}
		return true
	})
	def := reflect.ValueOf(wasmbin.DefaultLimits())
	if len(fields) != def.NumField() {
		t.Fatalf("ModuleLimits has %d fields, wasmbin.Limits %d", len(fields), def.NumField())
	}
	re := regexp.MustCompile(`\(default ([0-9,]+)( MiB| KiB)?[);]`)
	units := map[string]uint64{"": 1, " KiB": 1 << 10, " MiB": 1 << 20}
	for _, fl := range fields {
		name := fl.Names[0].Name
		m := re.FindStringSubmatch(strings.Join(strings.Fields(fl.Doc.Text()), " "))
		if m == nil {
			t.Errorf("%s: the doc states no default", name)
			continue
		}
		n, err := strconv.ParseUint(strings.ReplaceAll(m[1], ",", ""), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		v := def.FieldByName(name)
		want := v.Convert(reflect.TypeFor[uint64]()).Uint()
		if got := n * units[m[2]]; got != want {
			t.Errorf("%s: the doc states a default of %d, the check applies %d", name, got, want)
		}
	}
}
