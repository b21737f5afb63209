package builtin_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/morphhost/morph/builtin"
	"github.com/morphhost/morph/engine"
)

func TestEval(t *testing.T) {
	tests := []struct {
		expr string
		want float64
	}{
		{"1 + 2", 3},
		{"2 + 3 * 4", 14},
		{"(2 + 3) * 4", 20},
		{"10 / 4", 2.5},
		{"10 % 4", 2},
		{"7.5 % 2", 1.5},
		{"-3 + 5", 2},
		{"-(2 + 3)", -5},
		{"- -4", 4},
		{"+4", 4},
		{"1.5e3", 1500},
		{".5 * 4", 2},
		{"0x10", 16},
		{"1_000 + 1", 1001},
		{"0.175 * 2340 + sqrt(1764)", 451.5},
		{"round(2.5)", 3},
		{"round(-2.5)", -3},
		{"round(3.14159, 2)", 3.14},
		{"round(1234, -2)", 1200},
		{"sqrt(16)", 4},
		{"pow(2, 10)", 1024},
		{"pow(2, -1)", 0.5},
		{"min(3, 1, 2)", 1},
		{"max(3, 1, 2)", 3},
		{"max(7)", 7},
		{"abs(-4.5)", 4.5},
		{"floor(2.7) + ceil(2.1)", 5},
		{"cbrt(27)", 3},
		{"ln(e)", 1},
		{"log10(1000)", 3},
		{"exp(0)", 1},
		{"2 * pi", 2 * math.Pi},
		{"max(1, min(5, 3)) * (2 - -1)", 9},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			got, err := builtin.Eval(tt.expr)
			if err != nil {
				t.Fatalf("Eval(%q): %v", tt.expr, err)
			}
			if math.Abs(got-tt.want) > 1e-12 {
				t.Fatalf("Eval(%q) = %v, want %v", tt.expr, got, tt.want)
			}
		})
	}
}

func TestEvalErrors(t *testing.T) {
	tests := []struct {
		expr string
		is   error
		want string // in the message
	}{
		{"1 / 0", builtin.ErrDivisionByZero, "division by zero"},
		{"1 / (2 - 2)", builtin.ErrDivisionByZero, "division by zero"},
		{"5 % 0", builtin.ErrDivisionByZero, "remainder"},
		{"x + 1", builtin.ErrUnknownName, `unknown identifier "x"`},
		{"foo(1)", builtin.ErrUnknownName, `unknown function "foo"`},
		{"math.Sqrt(4)", builtin.ErrSyntax, "only calls of calc's functions"},
		{"sqrt", builtin.ErrSyntax, "sqrt is a function"},
		{"sqrt(-1)", builtin.ErrDomain, "sqrt of a negative number"},
		{"ln(0)", builtin.ErrDomain, "ln of a number that is not positive"},
		{"sqrt(1, 2)", builtin.ErrDomain, "sqrt takes 1 argument, got 2"},
		{"pow(2)", builtin.ErrDomain, "pow takes 2 arguments, got 1"},
		{"min()", builtin.ErrDomain, "min takes at least 1 argument(s), got 0"},
		{"round(1.5, 0.5)", builtin.ErrDomain, "digits must be a whole number"},
		{"pow(10, 400)", builtin.ErrDomain, "not a finite number"},
		{"2 ^ 3", builtin.ErrSyntax, "use pow(x, y)"},
		{"2 ** 3", builtin.ErrSyntax, "use pow(x, y)"},
		{"1 << 2", builtin.ErrSyntax, "operator << is not supported"},
		{"1 == 1", builtin.ErrSyntax, "operator == is not supported"},
		{"!1", builtin.ErrSyntax, "unary operator ! is not supported"},
		{`"a" + "b"`, builtin.ErrSyntax, "is not a number"},
		{"'a'", builtin.ErrSyntax, "is not a number"},
		{"a[1]", builtin.ErrSyntax, "(indexing)"},
		{"2,340 + 1", builtin.ErrSyntax, "thousands separators"},
		{"1 +", builtin.ErrSyntax, "column"},
		{"17.5%", builtin.ErrSyntax, "syntax error"},
		{"", builtin.ErrSyntax, "empty expression"},
		{"   ", builtin.ErrSyntax, "empty expression"},
		{strings.Repeat("1+", 3000) + "1", builtin.ErrSyntax, "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			got, err := builtin.Eval(tt.expr)
			if err == nil {
				t.Fatalf("Eval(%q) = %v, want an error", tt.expr, got)
			}
			if !errors.Is(err, tt.is) {
				t.Errorf("Eval(%q) error %q does not wrap %q", tt.expr, err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Eval(%q) error %q does not say %q", tt.expr, err, tt.want)
			}
		})
	}
}

func TestFormatNumber(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{451.5, "451.5"},
		{0.1 + 0.2, "0.3"},
		{42, "42"},
		{-7, "-7"},
		{math.Copysign(0, -1), "0"},
		{1e20, "100000000000000000000"},
		{1e21, "1e+21"},
		{1.5e-7, "1.5e-07"},
		{2.0 / 3, "0.666666666666667"},
	}
	for _, tt := range tests {
		if got := builtin.FormatNumber(tt.in); got != tt.want {
			t.Errorf("FormatNumber(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestCalcTool(t *testing.T) {
	tool, ok := builtin.Lookup("calc")
	if !ok {
		t.Fatal(`Lookup("calc") found nothing`)
	}
	out, err := tool.Execute(context.Background(), map[string]any{"expression": "0.175 * 2340 + sqrt(1764)"})
	if err != nil || out != "451.5" {
		t.Fatalf("Execute = %q, %v; want 451.5", out, err)
	}
	if _, err := tool.Execute(context.Background(), map[string]any{"expression": "1/0"}); !errors.Is(err, builtin.ErrDivisionByZero) {
		t.Fatalf("1/0: err = %v", err)
	}
	if _, err := tool.Execute(context.Background(), map[string]any{"expression": 3}); !errors.Is(err, builtin.ErrSyntax) {
		t.Fatalf("non-string expression: err = %v", err)
	}

	// The schema compiles and the engine enforces it.
	reg := engine.NewRegistry()
	reg.Register(tool)
	if err := reg.Check(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []map[string]any{{}, {"expression": 1}, {"expression": "1", "extra": true}} {
		if err := reg.Validate("calc", bad); !errors.Is(err, engine.ErrInvalidParams) {
			t.Errorf("Validate(%v) = %v, want ErrInvalidParams", bad, err)
		}
	}
	if err := reg.Validate("calc", map[string]any{"expression": "1+1"}); err != nil {
		t.Errorf("valid params rejected: %v", err)
	}
	if !strings.Contains(tool.Description(), "sqrt") {
		t.Errorf("description does not list the functions: %q", tool.Description())
	}
	// It changes nothing, so an engine in plan mode runs it.
	if m, ok := tool.(engine.Mutator); ok && m.Mutates() {
		t.Error("calc says it changes things")
	}
}

func TestLookupAndNames(t *testing.T) {
	names := builtin.Names()
	if !slices.Contains(names, "calc") || !slices.IsSorted(names) {
		t.Fatalf("Names() = %v", names)
	}
	for _, name := range names {
		tool, ok := builtin.Lookup(name)
		if !ok || tool.Name() != name {
			t.Errorf("Lookup(%q) = %v, %v", name, tool, ok)
		}
	}
	if _, ok := builtin.Lookup("nope"); ok {
		t.Error(`Lookup("nope") found a tool`)
	}
}
