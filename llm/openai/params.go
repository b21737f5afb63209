package openai

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/morphhost/morph/internal/suggest"
)

// ParameterError is one Parameters key the client refuses to send. It exists
// so callers can point at the offending key (in a config file, say) instead
// of parsing a message.
type ParameterError struct {
	Key    string
	Reason string
}

// Error names the key first, as users search their config for it.
func (e *ParameterError) Error() string {
	return fmt.Sprintf("parameter %q: %s", e.Key, e.Reason)
}

// ParametersError reports every bad key of one Parameters map at once, so a
// config with several mistakes is fixed in one pass rather than one key per
// run. Problems is sorted by key; errors.As also finds each *ParameterError.
type ParametersError struct {
	Problems []*ParameterError
	// Supported lists the keys the client knows; it is filled only when a
	// key is unknown, since that is when the list helps.
	Supported []string
}

// Error lists every problem in one message, so a log line alone is enough to
// fix the config.
func (e *ParametersError) Error() string {
	var b strings.Builder
	b.WriteString("openai: invalid parameters: ")
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.Error())
	}
	if len(e.Supported) > 0 {
		b.WriteString(" (supported: ")
		b.WriteString(strings.Join(e.Supported, ", "))
		b.WriteString(")")
	}
	return b.String()
}

// Unwrap exposes each *ParameterError to errors.As and errors.Is.
func (e *ParametersError) Unwrap() []error {
	errs := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		errs[i] = p
	}
	return errs
}

// target is what a parameter writes into: the go-openai request, plus fields
// the HTTP layer splices into the body: those go-openai would drop
// (omitempty on an explicit zero, such as temperature 0), and max_tokens,
// whose go-openai field is deprecated (see maxTokens).
type target struct {
	req   *goopenai.ChatCompletionRequest
	extra map[string]any
}

// setter converts one raw parameter value and stores it in t.
type setter func(t *target, v any) error

// parameters maps each supported key (its wire name) to its setter.
var parameters = map[string]setter{
	"temperature":           zeroKept("temperature", floatIn(0, math.Inf(1)), func(t *target, x float32) { t.req.Temperature = x }),
	"top_p":                 zeroKept("top_p", floatIn(0, 1), func(t *target, x float32) { t.req.TopP = x }),
	"presence_penalty":      zeroKept("presence_penalty", floatIn(math.Inf(-1), math.Inf(1)), func(t *target, x float32) { t.req.PresencePenalty = x }),
	"frequency_penalty":     zeroKept("frequency_penalty", floatIn(math.Inf(-1), math.Inf(1)), func(t *target, x float32) { t.req.FrequencyPenalty = x }),
	"max_tokens":            convert(intIn(1, math.MaxInt), maxTokens),
	"max_completion_tokens": convert(intIn(1, math.MaxInt), func(t *target, n int) { t.req.MaxCompletionTokens = n }),
	"n":                     convert(intIn(1, math.MaxInt), func(t *target, n int) { t.req.N = n }),
	"seed":                  convert(intIn(math.MinInt, math.MaxInt), func(t *target, n int) { t.req.Seed = &n }),
	"top_logprobs":          zeroKept("top_logprobs", intIn(0, math.MaxInt), func(t *target, x int) { t.req.TopLogProbs = x }),
	"stop": func(t *target, v any) error {
		if s, ok := v.(string); ok {
			t.req.Stop = []string{s}
			return nil
		}
		list, err := toStringList(v)
		t.req.Stop = list
		return err
	},
	"logit_bias":          convert(toLogitBias, func(t *target, x map[string]int) { t.req.LogitBias = x }),
	"logprobs":            convert(toBool, func(t *target, x bool) { t.req.LogProbs = x }),
	"store":               convert(toBool, func(t *target, x bool) { t.req.Store = x }),
	"parallel_tool_calls": convert(toBool, func(t *target, x bool) { t.req.ParallelToolCalls = x }),
	"user":                convert(toString, func(t *target, x string) { t.req.User = x }),
	"safety_identifier":   convert(toString, func(t *target, x string) { t.req.SafetyIdentifier = x }),
	"reasoning_effort":    convert(toString, func(t *target, x string) { t.req.ReasoningEffort = x }),
	"service_tier":        convert(toString, func(t *target, x string) { t.req.ServiceTier = goopenai.ServiceTier(x) }),
	"verbosity":           convert(toString, func(t *target, x string) { t.req.Verbosity = x }),
	"metadata":            convert(toStringMap, func(t *target, x map[string]string) { t.req.Metadata = x }),
	"chat_template_kwargs": func(t *target, v any) error {
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("want a table of template arguments, got %s", describe(v))
		}
		t.req.ChatTemplateKwargs = m
		return nil
	},
	"guided_choice": func(t *target, v any) error {
		list, err := toStringList(v)
		if err == nil && len(list) == 0 {
			err = fmt.Errorf("want at least one choice")
		}
		t.req.GuidedChoice = list
		return err
	},
}

// maxTokens sends max_tokens as written, and never as max_completion_tokens:
// the two are separate parameters, each sent under its own name. OpenAI
// reads either for most models but only max_completion_tokens for its
// reasoning models (o1, o3, o4, gpt-5), which answer max_tokens with an
// HTTP 400 that names the other key; servers that implement the older API,
// as many local ones do, read only max_tokens and would ignore
// max_completion_tokens without a word, leaving the reply unbounded.
// Translating one into the other would break one kind of server or the
// other, so the operator's key is the one sent. go-openai's MaxTokens field,
// deprecated for that reason, is not used: the number goes into the body
// directly, so go-openai's own check of reasoning models does not refuse
// it before the server can say which key it wants.
func maxTokens(t *target, n int) { t.extra["max_tokens"] = n }

// refused are keys a caller might reasonably try that this client
// deliberately does not send, with the reason to show instead of a bare
// "unknown".
var refused = map[string]string{
	"model":           "set Request.Model or Config.Model instead",
	"messages":        "set Request.Messages instead",
	"response_format": "set Request.ForceJSON (with Request.ResponseSchema and Config.JSONMode) instead",
	"stream":          "set Request.Stream to stream the reply instead",
	"stream_options":  "set Request.Stream to stream the reply instead (usage is always requested)",
	"tools":           "tool calling is not supported by this client",
	"tool_choice":     "tool calling is not supported by this client",
	"functions":       "tool calling is not supported by this client",
	"function_call":   "tool calling is not supported by this client",
}

// CheckExtraBody refuses ExtraBody fields that the client sets itself: a
// supported parameter (which belongs in Request.Parameters, where its value
// is checked) or a field the client owns (model, messages, response_format,
// stream, ...). The error is a *ParametersError.
func CheckExtraBody(body map[string]any) error {
	var perr ParametersError
	for _, k := range sortedKeys(body) {
		switch _, std := parameters[k]; {
		case std:
			perr.Problems = append(perr.Problems, &ParameterError{Key: k, Reason: "a standard parameter: set it with the parameters, where its value is checked"})
		case refused[k] != "":
			perr.Problems = append(perr.Problems, &ParameterError{Key: k, Reason: "set by the client: " + refused[k]})
		case body[k] == nil:
			perr.Problems = append(perr.Problems, &ParameterError{Key: k, Reason: "value is null"})
		}
	}
	if len(perr.Problems) > 0 {
		return &perr
	}
	return nil
}

// SupportedParameters lists, sorted, the Request.Parameters keys the client
// sends. It exists so config validation and error messages can show users
// what they may write without hard-coding a copy of the list.
func SupportedParameters() []string {
	return sortedKeys(parameters)
}

// CheckParameters rejects unknown and ill-typed keys so a misspelt or
// mistyped setting fails the run before any (billed) request, rather than
// being dropped or sent to a server that ignores it. It implements
// llm.ParameterChecker; the error is a *ParametersError.
func (c *Client) CheckParameters(params map[string]any) error {
	_, err := applyParameters(&goopenai.ChatCompletionRequest{}, params)
	return err
}

// applyParameters writes params into req and returns the fields go-openai
// would drop, or a *ParametersError naming every bad key.
func applyParameters(req *goopenai.ChatCompletionRequest, params map[string]any) (map[string]any, error) {
	t := &target{req: req, extra: map[string]any{}}
	keys := sortedKeys(params)

	var perr ParametersError
	unknown := false
	for _, k := range keys {
		v := params[k]
		set, ok := parameters[k]
		switch {
		case !ok:
			reason, isRefused := refused[k]
			if !isRefused {
				unknown = true
				reason = "unknown parameter"
				if s := suggestKey(k); s != "" {
					reason += fmt.Sprintf(" (did you mean %q?)", s)
				}
			}
			perr.Problems = append(perr.Problems, &ParameterError{Key: k, Reason: reason})
		case v == nil:
			perr.Problems = append(perr.Problems, &ParameterError{Key: k, Reason: "value is null; leave the key out to use the server default"})
		default:
			if err := set(t, v); err != nil {
				perr.Problems = append(perr.Problems, &ParameterError{Key: k, Reason: err.Error()})
			}
		}
	}
	if len(perr.Problems) > 0 {
		if unknown {
			perr.Supported = SupportedParameters()
		}
		return nil, &perr
	}
	return t.extra, nil
}

// suggestKey returns the supported key closest to k when it is plausibly a
// typo (suggest.MaxTypo), or "".
func suggestKey(k string) string {
	if c := suggest.Closest(k, SupportedParameters(), 1, suggest.MaxTypo); len(c) > 0 {
		return c[0]
	}
	return ""
}

// describe names v's type in config terms (string, number, list, ...) for
// error messages, since Go type names like []interface {} mean little to
// someone editing a TOML file.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("string %q", x)
	case bool:
		return fmt.Sprintf("boolean %t", x)
	case json.Number:
		return "number " + x.String()
	case float32, float64, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return fmt.Sprintf("number %v", x)
	case []any, []string:
		return "list"
	case map[string]any, map[string]string:
		return "table"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// toFloat64 accepts every numeric representation JSON and TOML decoders
// produce.
func toFloat64(v any) (float64, error) {
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case float32:
		f = float64(x)
	case int:
		f = float64(x)
	case int8:
		f = float64(x)
	case int16:
		f = float64(x)
	case int32:
		f = float64(x)
	case int64:
		f = float64(x)
	case uint:
		f = float64(x)
	case uint8:
		f = float64(x)
	case uint16:
		f = float64(x)
	case uint32:
		f = float64(x)
	case uint64:
		f = float64(x)
	case json.Number:
		var err error
		if f, err = x.Float64(); err != nil {
			return 0, fmt.Errorf("want a number, got %q", x.String())
		}
	default:
		return 0, fmt.Errorf("want a number, got %s", describe(v))
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("want a finite number, got %v", f)
	}
	return f, nil
}

// toFloat32 converts to the float32 go-openai uses, checking [lo, hi] and
// that the value survives the narrowing.
func toFloat32(v any, lo, hi float64) (float32, error) {
	f, err := toFloat64(v)
	if err != nil {
		return 0, err
	}
	if f < lo || f > hi {
		return 0, rangeError(f, lo, hi)
	}
	if math.Abs(f) > math.MaxFloat32 {
		return 0, fmt.Errorf("%v is out of range", f)
	}
	return float32(f), nil
}

func rangeError(f, lo, hi float64) error {
	switch {
	case math.IsInf(hi, 1):
		return fmt.Errorf("want a number >= %v, got %v", lo, f)
	case math.IsInf(lo, -1):
		return fmt.Errorf("want a number <= %v, got %v", hi, f)
	default:
		return fmt.Errorf("want a number between %v and %v, got %v", lo, hi, f)
	}
}

// toInt accepts integers in any representation, including a float64 with no
// fractional part (JSON decodes every number as float64), within [lo, hi].
// convert is the usual setter: convert the value with conv, store it with
// set. The value is stored even when conv fails; the error rejects the run.
func convert[T any](conv func(any) (T, error), set func(*target, T)) setter {
	return func(t *target, v any) error {
		x, err := conv(v)
		set(t, x)
		return err
	}
}

// zeroKept is convert for a number whose zero go-openai would drop (its
// omitempty tags): an explicit zero is recorded for the wire too.
func zeroKept[T int | float32](key string, conv func(any) (T, error), set func(*target, T)) setter {
	return func(t *target, v any) error {
		x, err := conv(v)
		set(t, x)
		if x == 0 {
			t.extra[key] = 0
		}
		return err
	}
}

// floatIn is toFloat32 bounded to [lo, hi], as a converter.
func floatIn(lo, hi float64) func(any) (float32, error) {
	return func(v any) (float32, error) { return toFloat32(v, lo, hi) }
}

// intIn is toInt bounded to [lo, hi], as a converter.
func intIn(lo, hi int) func(any) (int, error) {
	return func(v any) (int, error) { return toInt(v, lo, hi) }
}

func toInt(v any, lo, hi int) (int, error) {
	var n int64
	switch x := v.(type) {
	case int:
		n = int64(x)
	case int8:
		n = int64(x)
	case int16:
		n = int64(x)
	case int32:
		n = int64(x)
	case int64:
		n = x
	case uint:
		return toInt(uint64(x), lo, hi)
	case uint8:
		n = int64(x)
	case uint16:
		n = int64(x)
	case uint32:
		n = int64(x)
	case uint64:
		if x > math.MaxInt64 {
			return 0, fmt.Errorf("%d is out of range", x)
		}
		n = int64(x)
	case json.Number:
		i, err := x.Int64()
		if err != nil {
			f, ferr := x.Float64()
			if ferr != nil || f != math.Trunc(f) || math.Abs(f) >= 1<<63 {
				return 0, fmt.Errorf("want an integer, got %s", describe(v))
			}
			i = int64(f)
		}
		n = i
	case float64, float32:
		f, _ := toFloat64(x)
		if f != math.Trunc(f) || math.IsNaN(f) || math.Abs(f) >= 1<<63 {
			return 0, fmt.Errorf("want an integer, got %s", describe(v))
		}
		n = int64(f)
	default:
		return 0, fmt.Errorf("want an integer, got %s", describe(v))
	}
	if n < int64(lo) || n > int64(hi) {
		if hi == math.MaxInt {
			return 0, fmt.Errorf("want an integer >= %d, got %d", lo, n)
		}
		return 0, fmt.Errorf("want an integer between %d and %d, got %d", lo, hi, n)
	}
	return int(n), nil
}

func toBool(v any) (bool, error) {
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("want true or false, got %s", describe(v))
	}
	return b, nil
}

// toString accepts a string; an empty one leaves the field unset, as
// go-openai omits empty strings.
func toString(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("want a string, got %s", describe(v))
	}
	return s, nil
}

func toStringList(v any) ([]string, error) {
	switch x := v.(type) {
	case []string:
		return slices.Clone(x), nil
	case []any:
		out := make([]string, len(x))
		for i, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("want a list of strings, item %d is %s", i, describe(e))
			}
			out[i] = s
		}
		return out, nil
	default:
		return nil, fmt.Errorf("want a string or a list of strings, got %s", describe(v))
	}
}

func toStringMap(v any) (map[string]string, error) {
	switch x := v.(type) {
	case map[string]string:
		out := make(map[string]string, len(x))
		for k, s := range x {
			out[k] = s
		}
		return out, nil
	case map[string]any:
		out := make(map[string]string, len(x))
		for _, k := range sortedKeys(x) {
			s, ok := x[k].(string)
			if !ok {
				return nil, fmt.Errorf("want a table of strings, %q is %s", k, describe(x[k]))
			}
			out[k] = s
		}
		return out, nil
	default:
		return nil, fmt.Errorf("want a table of strings, got %s", describe(v))
	}
}

// toLogitBias checks what the API would otherwise reject with a vaguer
// message: keys are token IDs (not words) and biases lie in [-100, 100].
func toLogitBias(v any) (map[string]int, error) {
	var raw map[string]any
	switch x := v.(type) {
	case map[string]any:
		raw = x
	case map[string]int:
		raw = make(map[string]any, len(x))
		for k, n := range x {
			raw[k] = n
		}
	case map[string]int64:
		raw = make(map[string]any, len(x))
		for k, n := range x {
			raw[k] = n
		}
	case map[string]float64:
		raw = make(map[string]any, len(x))
		for k, n := range x {
			raw[k] = n
		}
	default:
		return nil, fmt.Errorf("want a table of token ID to bias, got %s", describe(v))
	}
	out := make(map[string]int, len(raw))
	for _, k := range sortedKeys(raw) {
		if _, err := strconv.ParseUint(k, 10, 64); err != nil {
			return nil, fmt.Errorf("key %q is not a token ID (a non-negative integer)", k)
		}
		n, err := toInt(raw[k], -100, 100)
		if err != nil {
			return nil, fmt.Errorf("token %s: %v", k, err)
		}
		out[k] = n
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
