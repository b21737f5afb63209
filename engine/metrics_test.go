package engine

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// cliMetricsKeys are the keys of the "metrics" object "morph run" prints
// (cmd/morph/run_test.go); Metrics' JSON has them, with the same units.
var cliMetricsKeys = []string{"cost_usd", "elapsed_ms", "input_tokens", "llm_rounds", "output_tokens", "parse_retries", "tool_calls", "total_tokens"}

// fullMetrics has every field of Metrics set, so a field MarshalJSON
// forgets shows.
func fullMetrics(t *testing.T) Metrics {
	t.Helper()
	var m Metrics
	v := reflect.ValueOf(&m).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch {
		case f.Type() == reflect.TypeOf(time.Duration(0)):
			f.SetInt(int64(1500*time.Millisecond + 700*time.Microsecond))
		case f.Type() == reflect.TypeOf(time.Time{}):
			f.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))
		case f.Kind() == reflect.Int:
			f.SetInt(int64(i + 1))
		case f.Kind() == reflect.Float64:
			f.SetFloat(0.1 + 0.2) // 0.30000000000000004
		case f.Kind() == reflect.Bool:
			f.SetBool(true)
		default:
			t.Fatalf("Metrics.%s: a field of type %s this test does not fill", v.Type().Field(i).Name, f.Type())
		}
	}
	return m
}

// Metrics' JSON uses the CLI's names and units, every field has the name
// its tag says, and it reads back.
func TestMetricsJSON(t *testing.T) {
	m := fullMetrics(t)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range cliMetricsKeys {
		if _, ok := got[k]; !ok {
			t.Errorf("metrics JSON %s lacks the CLI's key %q", b, k)
		}
	}
	typ := reflect.TypeOf(m)
	var tagged []string
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		tagged = append(tagged, name)
	}
	if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, slices.Sorted(slices.Values(tagged))) {
		t.Errorf("metrics JSON keys %v, want the tags' %v", keys, slices.Sorted(slices.Values(tagged)))
	}
	for k, want := range map[string]string{"cost_usd": "0.3", "elapsed_ms": "1500", "llm_time_ms": "1500", "start_time": `"2026-01-02T03:04:05Z"`, "usage_estimated": "true", "cost_unknown": "true"} {
		if string(got[k]) != want {
			t.Errorf("%s = %s, want %s", k, got[k], want)
		}
	}

	var back Metrics
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	want := m
	want.TotalCost, want.Elapsed, want.LLMTime = 0.3, 1500*time.Millisecond, 1500*time.Millisecond
	if back != want {
		t.Errorf("read back %+v, want %+v", back, want)
	}

	// Zero: start_time and usage_estimated are left out, the CLI's keys are not.
	b, _ = json.Marshal(Metrics{})
	got = nil
	_ = json.Unmarshal(b, &got)
	if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, slices.Sorted(slices.Values(append(slices.Clone(cliMetricsKeys), "llm_time_ms")))) {
		t.Errorf("zero metrics JSON %s", b)
	}

	// Context's JSON carries them so.
	b, _ = json.Marshal(&Context{Metrics: m})
	if !strings.Contains(string(b), `"metrics":{"llm_rounds":1,`) || strings.Contains(string(b), "total_cost") {
		t.Errorf("context JSON %s", b)
	}
}
