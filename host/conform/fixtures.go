package conform

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/morphhost/morph/abi"
)

// ReadFixtures reads the fixtures of Run from dir: each file named
// *.json is one input payload, keyed by its name without ".json"
// ("word_count-long.json" is the key "word_count-long"). Other files and
// subdirectories are ignored. A file that is not JSON is an error naming it.
func ReadFixtures(dir string) (map[string][]json.RawMessage, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string][]json.RawMessage{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if !json.Valid(b) {
			var v any
			return nil, fmt.Errorf("fixture %s is not JSON: %v", path, json.Unmarshal(b, &v))
		}
		key := strings.TrimSuffix(e.Name(), ".json")
		out[key] = append(out[key], json.RawMessage(bytes.TrimSpace(b)))
	}
	return out, nil
}

func badFixture(call Call, msg string) Call {
	call.Status, call.ErrorKind = Fail, "invalid_fixture"
	call.Err = fmt.Errorf("%w %s: %s", ErrInvalidFixture, call.Input, msg)
	call.Error = call.Err.Error()
	return call
}

type fixtureInput struct {
	label string
	raw   json.RawMessage
}

type fixtureTarget struct{ kind, name string }

func fixtureList(key string, raws []json.RawMessage) []fixtureInput {
	out := make([]fixtureInput, len(raws))
	for i, raw := range raws {
		out[i] = fixtureInput{label: key, raw: raw}
		if len(raws) > 1 {
			out[i].label = fmt.Sprintf("%s#%d", key, i+1)
		}
	}
	return out
}

// matchFixtures sends each key to the longest hook or tool name it starts
// with, a hook before a tool of the same name; orphans match none. Both come
// sorted by key.
func matchFixtures(fixtures map[string][]json.RawMessage, hooks []string, tools []abi.ToolSpec) (map[fixtureTarget][]fixtureInput, []string) {
	var targets []fixtureTarget
	for _, h := range hooks {
		targets = append(targets, fixtureTarget{Hook, h})
	}
	for _, t := range tools {
		targets = append(targets, fixtureTarget{Tool, t.Name})
	}
	keys := make([]string, 0, len(fixtures))
	for k := range fixtures {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := map[fixtureTarget][]fixtureInput{}
	var orphans []string
	for _, key := range keys {
		best := -1
		for i, t := range targets {
			if t.name != "" && strings.HasPrefix(key, t.name) && (best < 0 || len(t.name) > len(targets[best].name)) {
				best = i
			}
		}
		if best < 0 {
			orphans = append(orphans, key)
			continue
		}
		out[targets[best]] = append(out[targets[best]], fixtureList(key, fixtures[key])...)
	}
	return out, orphans
}

// decodeObject decodes a JSON object into v, refusing any other JSON value
// (null included, which encoding/json would take for the zero value).
func decodeObject(raw []byte, v any) error {
	if t := jsonType(raw); t != "object" {
		return fmt.Errorf("a JSON %s, not an object", t)
	}
	return json.Unmarshal(raw, v)
}
