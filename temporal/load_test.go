package temporal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/morphhost/morph/engine"
	"go.temporal.io/sdk/client"
)

// rssPeakKB is the peak resident memory of process pid (VmHWM), in KiB.
func rssPeakKB(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	return 0
}

// BenchmarkLoad runs 200 turns at once (5 model calls and 4 tool calls
// each), locally on one engine and on Temporal over two worker processes
// (the dev server on loopback): the turns a second, the p50 and p99 of a
// turn's latency, and on Temporal the workers' peak RSS.
func BenchmarkLoad(b *testing.B) {
	const sessions = 200
	model := statelessModel(b, 4)
	ctx := context.Background()
	// load runs the sessions at once with turn, and reports the figures.
	load := func(b *testing.B, turn func(i int) error) {
		var latencies []time.Duration
		var total time.Duration
		for b.Loop() {
			var mu sync.Mutex
			var wg sync.WaitGroup
			start := time.Now()
			for i := range sessions {
				wg.Go(func() {
					t0 := time.Now()
					if err := turn(i); err != nil {
						b.Errorf("session %d: %v", i, err)
					}
					mu.Lock()
					latencies = append(latencies, time.Since(t0))
					mu.Unlock()
				})
			}
			wg.Wait()
			total += time.Since(start)
		}
		slices.Sort(latencies)
		b.ReportMetric(float64(sessions*b.N)/total.Seconds(), "turns/s")
		b.ReportMetric(float64(latencies[len(latencies)/2].Milliseconds()), "p50-ms")
		b.ReportMetric(float64(latencies[len(latencies)*99/100].Milliseconds()), "p99-ms")
	}
	b.Run("local", func(b *testing.B) {
		rt, err := benchConfig(b, model.URL, false).Open(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			b.Fatal(err)
		}
		defer rt.Close(ctx)
		load(b, func(i int) error {
			_, _, err := rt.Engine.NewSession(fmt.Sprint("s", i)).RunTurn(ctx, "count", engine.RunOptions{})
			return err
		})
	})
	b.Run("temporal", func(b *testing.B) {
		c := dev(b)
		srv, _ := devServer()
		queue := fmt.Sprint("load-", time.Now().UnixNano())
		cfg := filepath.Join(b.TempDir(), "morph.toml")
		os.WriteFile(cfg, []byte(fmt.Sprintf("[llm]\nprovider = \"openai\"\nmodel = \"m\"\nbase_url = %q\napi_key_env = \"\"\n\n"+
			"[tools]\nbuiltin = [\"calc\"]\n\n[discovery]\nproject = false\nuser = false\n\n[temporal]\nhost_port = %q\ntask_queue = %q\n",
			model.URL+"/v1", srv.FrontendHostPort(), queue)), 0o644)
		var workers []*exec.Cmd
		for range 2 {
			w := exec.Command(bin(b, "morph-temporal"), "worker", "--config", cfg)
			if err := w.Start(); err != nil {
				b.Fatal(err)
			}
			workers = append(workers, w)
		}
		defer func() {
			for _, w := range workers {
				w.Process.Kill()
				w.Wait()
			}
		}()
		load(b, func(i int) error {
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, TurnWorkflow,
				TurnInput{SessionID: fmt.Sprint("s", i), Task: "count"})
			var res TurnResult
			if err == nil {
				err = run.Get(ctx, &res)
			}
			if err == nil && res.Final == nil {
				err = errors.New(res.Error)
			}
			return err
		})
		rss := 0
		for _, w := range workers {
			rss = max(rss, rssPeakKB(w.Process.Pid))
		}
		b.ReportMetric(float64(rss)/1024, "worker-peak-MiB")
	})
}
