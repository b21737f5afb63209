package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// The journal's record encoder: one JSON line per node, written by hand
// in a fixed field order, since encoding/json's reflection and map-key
// sorting were most of a record's cost. It writes what json.Marshal of
// the same journalRecord would (fuzzed against it: both decode the same);
// values of unknown types go through json.Marshal. One difference: a
// value JSON cannot hold (NaN, a channel) in the context or in an
// outcome's context updates is written as its fmt text, as the context's
// copy always was, where json.Marshal would fail the record.

// errBadFloat is a NaN or infinite number, which JSON cannot hold.
var errBadFloat = errors.New("json: unsupported value: NaN or infinity")

// jsonHex is the digits of \u00XX escapes.
const jsonHex = "0123456789abcdef"

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 as U+FFFD, and U+2028 and
// U+2029 escaped, as encoding/json does (it also escapes <, > and &, which
// JSON does not need).
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', jsonHex[c>>4], jsonHex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', jsonHex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendJSONValue appends a context value: strings, booleans, nil and
// whole numbers directly, anything else through json.Marshal; a value
// that does not marshal is its fmt text, as Context.Snapshot gives it.
func appendJSONValue(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...)
	case string:
		return appendJSONString(dst, x)
	case bool:
		return strconv.AppendBool(dst, x)
	case int:
		return strconv.AppendInt(dst, int64(x), 10)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return appendJSONString(dst, fmt.Sprint(v))
	}
	return append(dst, b...)
}

// appendJSONFloat appends f as JSON; NaN and infinities are an error.
func appendJSONFloat(dst []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dst, errBadFloat
	}
	return strconv.AppendFloat(dst, f, 'g', -1, 64), nil
}

// jsonObject writes an object's members, with commas between them.
type jsonObject struct {
	b     []byte
	first bool
	err   error
}

func newJSONObject(dst []byte) jsonObject {
	return jsonObject{b: append(dst, '{'), first: true}
}

// key opens member k.
func (o *jsonObject) key(k string) {
	if !o.first {
		o.b = append(o.b, ',')
	}
	o.first = false
	o.b = appendJSONString(o.b, k)
	o.b = append(o.b, ':')
}

func (o *jsonObject) str(k, v string) {
	o.key(k)
	o.b = appendJSONString(o.b, v)
}

// strOmit is str for an omitempty field.
func (o *jsonObject) strOmit(k, v string) {
	if v != "" {
		o.str(k, v)
	}
}

func (o *jsonObject) int(k string, v int64) {
	o.key(k)
	o.b = strconv.AppendInt(o.b, v, 10)
}

// intOmit is int for an omitempty field.
func (o *jsonObject) intOmit(k string, v int64) {
	if v != 0 {
		o.int(k, v)
	}
}

func (o *jsonObject) strings(k string, v []string) {
	o.key(k)
	o.b = append(o.b, '[')
	for i, s := range v {
		if i > 0 {
			o.b = append(o.b, ',')
		}
		o.b = appendJSONString(o.b, s)
	}
	o.b = append(o.b, ']')
}

// values writes a map of context values, keys sorted as encoding/json
// sorts them.
func (o *jsonObject) values(k string, m map[string]any) {
	o.key(k)
	sub := newJSONObject(o.b)
	for _, key := range sortedKeys(m) {
		sub.key(key)
		sub.b = appendJSONValue(sub.b, m[key])
	}
	o.b = sub.close()
}

func (o *jsonObject) usage(k string, u Usage) {
	o.key(k)
	sub := newJSONObject(o.b)
	sub.intOmit("input_tokens", int64(u.InputTokens))
	sub.intOmit("output_tokens", int64(u.OutputTokens))
	sub.intOmit("total_tokens", int64(u.TotalTokens))
	if u.CostUSD != 0 {
		sub.key("cost_usd")
		sub.b, sub.err = appendJSONFloat(sub.b, u.CostUSD)
	}
	if u.CostUnknown {
		sub.key("cost_unknown")
		sub.b = strconv.AppendBool(sub.b, true)
	}
	o.b = sub.close()
	o.err = errors.Join(o.err, sub.err)
}

func (o *jsonObject) close() []byte { return append(o.b, '}') }

// appendOutcome appends o as json.Marshal would.
func appendOutcome(dst []byte, out *Outcome) ([]byte, error) {
	if out == nil {
		return append(dst, "null"...), nil
	}
	o := newJSONObject(dst)
	o.str("status", string(out.Status))
	o.strOmit("preferred_label", out.PreferredLabel)
	if len(out.SuggestedNextIDs) > 0 {
		o.strings("suggested_next_ids", out.SuggestedNextIDs)
	}
	if len(out.ContextUpdates) > 0 {
		o.values("context_updates", out.ContextUpdates)
	}
	o.strOmit("notes", out.Notes)
	o.strOmit("failure_reason", out.FailureReason)
	o.strOmit("jump_to", out.JumpTo)
	if out.Usage != (Usage{}) {
		o.usage("usage", out.Usage)
	}
	return o.close(), o.err
}

// appendNodeResult appends nr as json.Marshal would.
func appendNodeResult(dst []byte, nr *NodeResult) ([]byte, error) {
	if nr == nil {
		return append(dst, "null"...), nil
	}
	o := newJSONObject(dst)
	o.str("status", string(nr.Status))
	o.int("visits", int64(nr.Visits))
	o.int("attempts", int64(nr.Attempts))
	o.strOmit("failure_reason", nr.FailureReason)
	o.strOmit("notes", nr.Notes)
	o.int("duration_ns", int64(nr.Duration))
	if nr.Usage != (Usage{}) {
		o.usage("usage", nr.Usage)
	}
	if len(nr.History) > 0 {
		o.key("history")
		o.b = append(o.b, '[')
		for i, st := range nr.History {
			if i > 0 {
				o.b = append(o.b, ',')
			}
			o.b = appendJSONString(o.b, string(st))
		}
		o.b = append(o.b, ']')
	}
	o.intOmit("history_dropped", int64(nr.HistoryDropped))
	if len(nr.EdgesTaken) > 0 {
		o.key("edges_taken")
		sub := newJSONObject(o.b)
		var small [8]int // most nodes have few edges: no allocation
		keys := small[:0]
		for i := range nr.EdgesTaken {
			keys = append(keys, i)
		}
		slices.Sort(keys)
		for _, i := range keys {
			sub.int(strconv.Itoa(i), int64(nr.EdgesTaken[i]))
		}
		o.b = sub.close()
	}
	return o.close(), o.err
}

// appendJSON appends the record as one JSON object, as json.Marshal
// would write it.
func (rec *journalRecord) appendJSON(dst []byte) ([]byte, error) {
	o := newJSONObject(dst)
	o.int("seq", rec.Seq)
	o.str("node", rec.Node)
	o.str("next", rec.Next)
	var err error
	o.key("outcome")
	if o.b, err = appendOutcome(o.b, rec.Outcome); err != nil {
		return dst, err
	}
	o.int("visits", int64(rec.Visits))
	if len(rec.Nodes) > 0 {
		o.key("nodes")
		sub := newJSONObject(o.b)
		for _, id := range sortedKeys(rec.Nodes) {
			sub.key(id)
			if sub.b, err = appendNodeResult(sub.b, rec.Nodes[id]); err != nil {
				return dst, err
			}
		}
		o.b = sub.close()
	}
	if len(rec.Retries) > 0 {
		o.key("node_retries")
		sub := newJSONObject(o.b)
		for _, id := range sortedKeys(rec.Retries) {
			sub.key(id)
			sub.b = strconv.AppendInt(sub.b, int64(rec.Retries[id]), 10)
		}
		o.b = sub.close()
	}
	o.int("goal_gate_retries", int64(rec.GoalGateRetries))
	o.usage("usage", rec.Usage)
	if len(rec.Context) > 0 {
		o.values("context", rec.Context)
	}
	if len(rec.Deleted) > 0 {
		o.strings("deleted", rec.Deleted)
	}
	if len(rec.Log) > 0 {
		o.strings("log", rec.Log)
	}
	o.int("elapsed_ns", int64(rec.Elapsed))
	o.key("t")
	o.b = rec.Time.AppendFormat(o.b, `"`+time.RFC3339Nano+`"`)
	if rec.Restart != 0 {
		o.int("restart", int64(rec.Restart))
	}
	if o.err != nil {
		return dst, o.err
	}
	return o.close(), nil
}
