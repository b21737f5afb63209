package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// chat sends messages (role, content pairs) to the model server and
// returns the reply's content.
func chat(t *testing.T, url string, msgs ...string) string {
	t.Helper()
	var req struct {
		Messages []map[string]string `json:"messages"`
	}
	for i := 0; i < len(msgs); i += 2 {
		req.Messages = append(req.Messages, map[string]string{"role": msgs[i], "content": msgs[i+1]})
	}
	b, _ := json.Marshal(req)
	resp, err := http.Post(url+"/chat/completions", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Choices) != 1 {
		t.Fatalf("status %d: %v %+v", resp.StatusCode, err, out)
	}
	return out.Choices[0].Message.Content
}

// The model server's reply depends on the conversation alone, so a call
// made again (another worker, another attempt) gets the same answer under
// the same key, and the report counts it as answered twice.
func TestModelServerRepliesFromTheConversation(t *testing.T) {
	var log bytes.Buffer
	s := &modelServer{steps: 2, now: time.Now, log: &log}
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	defer s.close()
	task := turnTask("chaos-007")
	first := chat(t, s.url, "system", "tools", "user", task)
	if !strings.Contains(first, `"tool_name":"ledger_append"`) || !strings.Contains(first, `"line":"chaos-007 0"`) {
		t.Fatalf("first reply %s", first)
	}
	second := chat(t, s.url, "system", "tools", "user", task, "assistant", first, "user", "appended")
	if !strings.Contains(second, `"line":"chaos-007 1"`) {
		t.Fatalf("second reply %s", second)
	}
	again := chat(t, s.url, "system", "tools", "user", task, "assistant", first, "user", "appended")
	if again != second {
		t.Errorf("the same conversation: %s, then %s", second, again)
	}
	final := chat(t, s.url, "system", "tools", "user", task, "assistant", first, "user", "appended", "assistant", second, "user", "appended")
	if !strings.Contains(final, `"type":"final"`) {
		t.Errorf("third reply %s", final)
	}
	chat(t, s.url, "system", "tools", "user", turnTask("calm-001"))

	st := modelCalls(s.events(), "chaos-", 2)
	if st.arrived != 4 || st.answered != 4 || st.repeatedKeys != 1 || st.extra != 1 || st.repeatedTurns != 1 || st.finalsAnswered != 1 {
		t.Errorf("stats %+v, want 4 calls of chaos-007, one of them answered twice", st)
	}
	if n := strings.Count(log.String(), "\n"); n != 10 {
		t.Errorf("%d log lines for 5 calls, want an arrival and an answer each:\n%s", n, log.String())
	}
}

// A call whose client goes away first is aborted; the time from its abort,
// or from an answer its worker did not live to record, to its next arrival
// is its recovery.
func TestModelCallsLostAndMadeAgain(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	evs := []callEvent{
		{Time: at(0), Event: eventArrived, Key: "k1", Turn: "chaos-001"},
		{Time: at(1), Event: eventAborted, Key: "k1", Turn: "chaos-001"},
		{Time: at(21), Event: eventArrived, Key: "k1", Turn: "chaos-001"},
		{Time: at(22), Event: eventAnswered, Key: "k1", Turn: "chaos-001"},
		{Time: at(40), Event: eventArrived, Key: "k1", Turn: "chaos-001"},
		{Time: at(41), Event: eventAnswered, Key: "k1", Turn: "chaos-001"},
		{Time: at(2), Event: eventArrived, Key: "k2", Turn: "calm-001"},
		{Time: at(3), Event: eventAborted, Key: "k2", Turn: "calm-001"},
	}
	st := modelCalls(evs, "chaos-", 2)
	if st.aborted != 1 || st.repeatedKeys != 1 || st.extra != 1 || !slices.Equal(st.remade, []time.Duration{20 * time.Second, 18 * time.Second}) {
		t.Errorf("stats %+v", st)
	}
}

func TestLedgerCountsRepeatsAndMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.txt")
	lines := []string{"chaos-001 0", "chaos-001 1", "chaos-002 0", "chaos-002 0", "calm-001 0"}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := ledger(path, "chaos-", []string{"chaos-001", "chaos-002"}, 2)
	if err != nil || st != (ledgerStats{lines: 4, repeated: 1, extra: 1, missing: 1}) {
		t.Errorf("%+v %v", st, err)
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 10; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Second)
	}
	if p50, p90, p100 := percentile(ds, 50), percentile(ds, 90), percentile(ds, 100); p50 != 5*time.Second || p90 != 9*time.Second || p100 != 10*time.Second {
		t.Errorf("p50 %s p90 %s max %s", p50, p90, p100)
	}
	if percentile(nil, 50) != 0 {
		t.Error("no durations")
	}
}
