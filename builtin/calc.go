package builtin

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"math"
	"sort"
	"strconv"
	"strings"
)

// CalcName is the name of the calc tool.
const CalcName = "calc"

// MaxExpressionLength is the longest expression calc evaluates, in bytes.
const MaxExpressionLength = 4096

// Errors of Eval, told apart with errors.Is; the error text says more.
var (
	// ErrSyntax: the expression does not parse, or uses syntax calc does not support.
	ErrSyntax = errors.New("syntax error")
	// ErrDivisionByZero: a / or % by zero.
	ErrDivisionByZero = errors.New("division by zero")
	// ErrUnknownName: an identifier that is not a constant, or a call of an unknown function.
	ErrUnknownName = errors.New("unknown name")
	// ErrDomain: a function's argument is out of its domain (sqrt(-1)), a
	// call has the wrong number of arguments, or the result is not finite.
	ErrDomain = errors.New("math error")
)

// Calc is the calc tool: it evaluates an arithmetic expression, given as
// {"expression": "..."}, and returns the number as text (see Eval for the
// language and FormatNumber for the output).
type Calc struct{}

// Name returns "calc".
func (Calc) Name() string { return CalcName }

// Description tells the model what calc accepts.
func (Calc) Description() string {
	return "Evaluates an arithmetic expression and returns the result as a number. " +
		"Operators: + - * / % (remainder) and parentheses, unary minus; decimal literals. " +
		"Functions: " + strings.Join(funcNames(), ", ") + "; round(x, digits) rounds to that many decimals; " +
		"min and max take one or more arguments. Constants: e, pi. " +
		"Write numbers without thousands separators and percentages as fractions: 17.5% of 2340 is 0.175 * 2340."
}

// ParameterSchema is the JSON Schema of calc's params.
func (Calc) ParameterSchema() string {
	return `{"type":"object","properties":{"expression":{"type":"string","description":"the arithmetic expression, e.g. 0.175 * 2340 + sqrt(1764)"}},"required":["expression"],"additionalProperties":false}`
}

// Execute evaluates params["expression"].
func (Calc) Execute(_ context.Context, params map[string]any) (string, error) {
	expr, ok := params["expression"].(string)
	if !ok {
		return "", fmt.Errorf("%w: expression must be a string", ErrSyntax)
	}
	v, err := Eval(expr)
	if err != nil {
		return "", err
	}
	return FormatNumber(v), nil
}

// Eval evaluates an arithmetic expression: float literals (decimal, with
// optional exponent; Go integer literals such as 0x1F also parse), the binary
// operators + - * / % (% is the floating-point remainder, math.Mod), unary
// + and -, parentheses, the constants e and pi, and the functions abs, ceil,
// floor, round(x) or round(x, digits), sqrt, cbrt, pow(x, y), exp, ln, log10,
// min(...) and max(...). It parses with go/parser, so precedence is Go's
// (* / % bind tighter than + -). Errors wrap ErrSyntax, ErrDivisionByZero,
// ErrUnknownName or ErrDomain.
func Eval(expr string) (float64, error) {
	if strings.TrimSpace(expr) == "" {
		return 0, fmt.Errorf("%w: empty expression", ErrSyntax)
	}
	if len(expr) > MaxExpressionLength {
		return 0, fmt.Errorf("%w: expression longer than %d bytes", ErrSyntax, MaxExpressionLength)
	}
	node, err := parser.ParseExpr(expr)
	if err != nil {
		return 0, syntaxError(expr, err)
	}
	v, err := eval(node)
	if err != nil {
		return 0, err
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%w: the result is not a finite number (overflow?)", ErrDomain)
	}
	return v, nil
}

// FormatNumber formats a result the way calc returns it: rounded to 15
// significant digits, which hides binary floating-point noise
// (0.1 + 0.2 gives "0.3"), in plain decimal notation unless the number is
// very large or very small.
func FormatNumber(v float64) string {
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 15, 64), 64)
	if err != nil {
		r = v
	}
	if r == 0 {
		return "0" // also turns -0 into 0
	}
	if a := math.Abs(r); a >= 1e-6 && a < 1e21 {
		return strconv.FormatFloat(r, 'f', -1, 64)
	}
	return strconv.FormatFloat(r, 'g', -1, 64)
}

func syntaxError(expr string, err error) error {
	var list scanner.ErrorList
	if !errors.As(err, &list) || len(list) == 0 {
		return fmt.Errorf("%w: %v", ErrSyntax, err)
	}
	e, hint := list[0], ""
	if strings.Contains(e.Msg, "','") {
		hint = " (write numbers without thousands separators: 2340, not 2,340)"
	}
	return fmt.Errorf("%w at column %d of %q: %s%s", ErrSyntax, e.Pos.Column, expr, e.Msg, hint)
}

func eval(n ast.Expr) (float64, error) {
	switch n := n.(type) {
	case *ast.BasicLit:
		return literal(n)
	case *ast.ParenExpr:
		return eval(n.X)
	case *ast.Ident:
		if v, ok := constants[n.Name]; ok {
			return v, nil
		}
		if _, ok := functions[n.Name]; ok {
			return 0, fmt.Errorf("%w: %s is a function: call it, as in %s(x)", ErrSyntax, n.Name, n.Name)
		}
		return 0, fmt.Errorf("%w: unknown identifier %q (constants: e, pi)", ErrUnknownName, n.Name)
	case *ast.UnaryExpr:
		x, err := eval(n.X)
		if err != nil {
			return 0, err
		}
		switch n.Op {
		case token.SUB:
			return -x, nil
		case token.ADD:
			return x, nil
		}
		return 0, fmt.Errorf("%w: unary operator %s is not supported", ErrSyntax, n.Op)
	case *ast.BinaryExpr:
		return binary(n)
	case *ast.CallExpr:
		return call(n)
	case *ast.StarExpr: // 2 ** 3 parses as 2 * (*3)
		return 0, fmt.Errorf("%w: ** is not supported; use pow(x, y)", ErrSyntax)
	}
	return 0, fmt.Errorf("%w: unsupported expression %s", ErrSyntax, describe(n))
}

func literal(n *ast.BasicLit) (float64, error) {
	switch n.Kind {
	case token.INT:
		if i, err := strconv.ParseInt(n.Value, 0, 64); err == nil {
			return float64(i), nil
		}
		if f, err := strconv.ParseFloat(n.Value, 64); err == nil { // too big for int64
			return f, nil
		}
	case token.FLOAT:
		if f, err := strconv.ParseFloat(n.Value, 64); err == nil {
			return f, nil
		}
	}
	return 0, fmt.Errorf("%w: %s is not a number", ErrSyntax, n.Value)
}

func binary(n *ast.BinaryExpr) (float64, error) {
	switch n.Op {
	case token.ADD, token.SUB, token.MUL, token.QUO, token.REM:
	case token.XOR:
		return 0, fmt.Errorf("%w: ^ is not supported; use pow(x, y)", ErrSyntax)
	default:
		return 0, fmt.Errorf("%w: operator %s is not supported", ErrSyntax, n.Op)
	}
	x, err := eval(n.X)
	if err != nil {
		return 0, err
	}
	y, err := eval(n.Y)
	if err != nil {
		return 0, err
	}
	switch n.Op {
	case token.ADD:
		return x + y, nil
	case token.SUB:
		return x - y, nil
	case token.MUL:
		return x * y, nil
	case token.QUO:
		if y == 0 {
			return 0, ErrDivisionByZero
		}
		return x / y, nil
	default: // token.REM
		if y == 0 {
			return 0, fmt.Errorf("%w (remainder %% 0)", ErrDivisionByZero)
		}
		return math.Mod(x, y), nil
	}
}

// function is one calc function; arity -1 is one or more arguments.
type function struct {
	minArgs, maxArgs int // maxArgs -1: no limit
	fn               func(args []float64) (float64, error)
}

func one(f func(float64) float64) function {
	return function{1, 1, func(a []float64) (float64, error) { return f(a[0]), nil }}
}

var constants = map[string]float64{"pi": math.Pi, "e": math.E}

var functions = map[string]function{
	"abs":   one(math.Abs),
	"ceil":  one(math.Ceil),
	"floor": one(math.Floor),
	"cbrt":  one(math.Cbrt),
	"exp":   one(math.Exp),
	"round": {1, 2, func(a []float64) (float64, error) {
		if len(a) == 1 {
			return math.Round(a[0]), nil
		}
		d := a[1]
		if d != math.Trunc(d) || d < -15 || d > 15 {
			return 0, fmt.Errorf("%w: round: digits must be a whole number from -15 to 15, got %s", ErrDomain, FormatNumber(d))
		}
		p := math.Pow(10, d)
		return math.Round(a[0]*p) / p, nil
	}},
	"sqrt": {1, 1, func(a []float64) (float64, error) {
		if a[0] < 0 {
			return 0, fmt.Errorf("%w: sqrt of a negative number (%s)", ErrDomain, FormatNumber(a[0]))
		}
		return math.Sqrt(a[0]), nil
	}},
	"ln": {1, 1, func(a []float64) (float64, error) {
		if a[0] <= 0 {
			return 0, fmt.Errorf("%w: ln of a number that is not positive (%s)", ErrDomain, FormatNumber(a[0]))
		}
		return math.Log(a[0]), nil
	}},
	"log10": {1, 1, func(a []float64) (float64, error) {
		if a[0] <= 0 {
			return 0, fmt.Errorf("%w: log10 of a number that is not positive (%s)", ErrDomain, FormatNumber(a[0]))
		}
		return math.Log10(a[0]), nil
	}},
	"pow": {2, 2, func(a []float64) (float64, error) { return math.Pow(a[0], a[1]), nil }},
	"min": {1, -1, func(a []float64) (float64, error) {
		m := a[0]
		for _, v := range a[1:] {
			m = math.Min(m, v)
		}
		return m, nil
	}},
	"max": {1, -1, func(a []float64) (float64, error) {
		m := a[0]
		for _, v := range a[1:] {
			m = math.Max(m, v)
		}
		return m, nil
	}},
}

func funcNames() []string {
	names := make([]string, 0, len(functions))
	for name := range functions {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func call(n *ast.CallExpr) (float64, error) {
	id, ok := n.Fun.(*ast.Ident)
	if !ok {
		return 0, fmt.Errorf("%w: only calls of calc's functions are supported (%s)", ErrSyntax, strings.Join(funcNames(), ", "))
	}
	f, ok := functions[id.Name]
	if !ok {
		return 0, fmt.Errorf("%w: unknown function %q (functions: %s)", ErrUnknownName, id.Name, strings.Join(funcNames(), ", "))
	}
	if n.Ellipsis.IsValid() {
		return 0, fmt.Errorf("%w: ... is not supported", ErrSyntax)
	}
	if len(n.Args) < f.minArgs || (f.maxArgs >= 0 && len(n.Args) > f.maxArgs) {
		return 0, fmt.Errorf("%w: %s takes %s, got %d", ErrDomain, id.Name, arity(f), len(n.Args))
	}
	args := make([]float64, len(n.Args))
	for i, a := range n.Args {
		v, err := eval(a)
		if err != nil {
			return 0, err
		}
		args[i] = v
	}
	return f.fn(args)
}

func arity(f function) string {
	switch {
	case f.maxArgs < 0:
		return fmt.Sprintf("at least %d argument(s)", f.minArgs)
	case f.minArgs == f.maxArgs && f.minArgs == 1:
		return "1 argument"
	case f.minArgs == f.maxArgs:
		return fmt.Sprintf("%d arguments", f.minArgs)
	}
	return fmt.Sprintf("%d to %d arguments", f.minArgs, f.maxArgs)
}

// describe names an unsupported node for an error message.
func describe(n ast.Expr) string {
	switch n := n.(type) {
	case *ast.SelectorExpr:
		return "(field or package selector ." + n.Sel.Name + ")"
	case *ast.IndexExpr, *ast.IndexListExpr:
		return "(indexing)"
	case *ast.CompositeLit:
		return "(composite literal)"
	case *ast.FuncLit:
		return "(function literal)"
	}
	return fmt.Sprintf("(%T)", n)
}
