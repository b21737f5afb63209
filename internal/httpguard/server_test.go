package httpguard

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serve runs s on 127.0.0.1 until the test ends and returns its address.
func serve(t *testing.T, s Server) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	done := make(chan error, 1)
	s.Handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	s.ShutdownTimeout = 10 * time.Second
	s.Ready = func(a net.Addr) { addr <- a }
	go func() { done <- s.Serve(ctx, "127.0.0.1:0") }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	select {
	case a := <-addr:
		return a.String()
	case err := <-done:
		t.Fatal(err)
	}
	return ""
}

// A keep-alive connection left idle is closed within IdleTimeout: it holds
// no goroutine for ever.
func TestServeIdleConnectionClosed(t *testing.T) {
	addr := serve(t, Server{IdleTimeout: 200 * time.Millisecond})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// Generous: the server must close it, not the deadline.
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("the idle connection: %v, want EOF (closed by the server)", err)
	}
}

// A header past MaxHeaderBytes is refused (431), and the server keeps
// serving.
func TestServeMaxHeaderBytes(t *testing.T) {
	addr := serve(t, Server{MaxHeaderBytes: 1 << 10})
	req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 8<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("a 8 KiB header: %d, want 431", resp.StatusCode)
	}
	resp, err = http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("after: %d", resp.StatusCode)
	}
}

// A listen address in use is an error, not a hang.
func TestServeListenError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	err = Server{Handler: http.NotFoundHandler()}.Serve(context.Background(), ln.Addr().String())
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "listen" {
		t.Fatalf("listening on a port in use: %v", err)
	}
}
