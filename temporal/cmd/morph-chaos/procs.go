package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
)

// proc is a process the harness started, in a process group of its own
// so that a kill reaches what it started too (morph run's morph-temporal).
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed at its exit
	err  error
}

// startProc starts name with args, its output appended to logPath.
func startProc(logPath, name string, args ...string) (*proc, error) {
	out, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		out.Close()
		close(p.done)
	}()
	return p, nil
}

// signal sends sig to p's process group.
func (p *proc) signal(sig syscall.Signal) { syscall.Kill(-p.cmd.Process.Pid, sig) }

// kill kills p's group with SIGKILL and waits for p's exit.
func (p *proc) kill() {
	p.signal(syscall.SIGKILL)
	<-p.done
}

// stop asks p's group to end (SIGTERM), and kills it after grace.
func (p *proc) stop(grace time.Duration) {
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.kill()
	}
	p.signal(syscall.SIGKILL) // what it started and left behind
}

// freePort is a port of 127.0.0.1 that nothing listened on a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// devServer is a Temporal dev server on 127.0.0.1 keeping its state in a
// database file, so that it can be killed and started again on it.
type devServer struct {
	cli, db, logPath string
	port, http, mets int
	p                *proc
}

func newDevServer(cli, dir string) (*devServer, error) {
	s := &devServer{cli: cli, db: filepath.Join(dir, "temporal.db"), logPath: filepath.Join(dir, "server.log")}
	for _, port := range []*int{&s.port, &s.http, &s.mets} {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		*port = p
	}
	return s, nil
}

func (s *devServer) hostPort() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// start starts the server and waits until it answers, a minute at most.
func (s *devServer) start(ctx context.Context) error {
	p, err := startProc(s.logPath, s.cli, "server", "start-dev", "--ip", "127.0.0.1", "--headless",
		"--port", fmt.Sprint(s.port), "--http-port", fmt.Sprint(s.http), "--metrics-port", fmt.Sprint(s.mets),
		"--db-filename", s.db, "--log-level", "error",
		"--dynamic-config-value", "system.enableActivityEagerExecution=true")
	if err != nil {
		return err
	}
	s.p = p
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	quiet := log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	for {
		dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
		c, err := client.DialContext(dctx, client.Options{HostPort: s.hostPort(), Logger: quiet})
		dcancel()
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("the Temporal dev server exited (%v): see %s", p.err, s.logPath)
		case <-ctx.Done():
			return fmt.Errorf("the Temporal dev server did not answer in a minute (%w): see %s", err, s.logPath)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// workerSlot keeps one `morph worker` running: one that exits (killed, or
// unable to reach a server that is down) is started again.
type workerSlot struct {
	morph, cfg, logPath string

	mu       sync.Mutex
	p        *proc
	restarts int
}

// run keeps the worker running until ctx ends, then stops it.
func (w *workerSlot) run(ctx context.Context) error {
	for {
		p, err := startProc(w.logPath, w.morph, "worker", "--config", w.cfg)
		if err != nil {
			return err
		}
		w.mu.Lock()
		w.p = p
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			p.stop(5 * time.Second)
			return nil
		case <-p.done:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(500 * time.Millisecond):
		}
		w.mu.Lock()
		w.restarts++
		w.mu.Unlock()
	}
}

// kill kills the worker running now with SIGKILL (run starts another).
func (w *workerSlot) kill() error {
	w.mu.Lock()
	p := w.p
	w.mu.Unlock()
	if p == nil {
		return errors.New("no worker running")
	}
	p.kill()
	return nil
}
