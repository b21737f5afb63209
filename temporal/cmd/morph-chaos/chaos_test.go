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
	// 4 calls of chaos-007, one of them answered twice.
	checkCounts(t, []count{
		{"arrived", st.arrived, 4}, {"answered", st.answered, 4},
		{"repeatedKeys", st.repeatedKeys, 1}, {"extra", st.extra, 1},
		{"repeatedTurns", st.repeatedTurns, 1}, {"finalsAnswered", st.finalsAnswered, 1},
	})
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
	checkCounts(t, []count{{"aborted", st.aborted, 1}, {"repeatedKeys", st.repeatedKeys, 1}, {"extra", st.extra, 1}})
	if want := []time.Duration{20 * time.Second, 18 * time.Second}; !slices.Equal(st.remade, want) {
		t.Errorf("remade = %v, want %v", st.remade, want)
	}
}

// count is one counter of callStats a test checks: its name, value and
// the value wanted.
type count struct {
	name      string
	got, want int
}

// checkCounts reports each count whose value is not the one wanted.
func checkCounts(t *testing.T, cs []count) {
	t.Helper()
	for _, c := range cs {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
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
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 5 * time.Second}, {90, 9 * time.Second}, {100, 10 * time.Second}} {
		if got := percentile(ds, c.p); got != c.want {
			t.Errorf("percentile(ds, %v) = %s, want %s", c.p, got, c.want)
		}
	}
	if percentile(nil, 50) != 0 {
		t.Error("no durations")
	}
}
