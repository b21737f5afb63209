package extism

import (
	"encoding/json"
	"strings"
	"testing"
)

// A plugin's sampling request may not ask the client for its other
// context: includeContext other than "none" is refused, naming the field.
func TestSamplingRequestIncludeContext(t *testing.T) {
	for ctx, ok := range map[string]bool{``: true, `,"includeContext":"none"`: true,
		`,"includeContext":"thisServer"`: false, `,"includeContext":"allServers"`: false} {
		var r samplingRequest
		raw := `{"messages":[{"role":"user","content":{"type":"text","text":"q"}}],"maxTokens":10` + ctx + `}`
		if err := json.Unmarshal([]byte(raw), &r); err != nil {
			t.Fatal(err)
		}
		err := r.check()
		if ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "includeContext")) {
			t.Errorf("%s: check %v, want refused naming includeContext: %v", raw, err, !ok)
		}
	}
}
