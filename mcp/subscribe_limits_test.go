package mcp_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/morphhost/morph/engine"
	"github.com/morphhost/morph/mcp"
)

// A client subscribes only to a URI a plugin serves now (a listed
// resource or a template's match), of at most MaxSubscribeURIBytes: a URI
// of 1 MiB, or one no plugin serves, is refused and counted, so a
// session's subscriptions are bounded in bytes, not only in number.
func TestSubscribeServedURIsOnly(t *testing.T) {
	p := &itemsPlugin{name: "news", answers: map[string]string{
		engine.MethodListResources:         `{"resources":[{"uri":"test://a","name":"a"}]}`,
		engine.MethodListResourceTemplates: `{"resourceTemplates":[{"uriTemplate":"test://t/{id}","name":"t"}]}`,
	}}
	srv := newServer(t, engine.New(nil, engine.NewRegistry(), engine.WithExtenders(p)), mcp.Options{})
	a := watch(t, srv)
	ctx := context.Background()
	for _, uri := range []string{"test://a", "test://t/7"} {
		if err := a.cs.Subscribe(ctx, &sdk.SubscribeParams{URI: uri}); err != nil {
			t.Errorf("subscribing to %s, which the plugin serves: %v", uri, err)
		}
	}
	for _, c := range []struct {
		uri, want string
		code      int64
	}{
		{"test://t/" + strings.Repeat("x", 1<<20), "MaxSubscribeURIBytes", jsonrpc.CodeInvalidParams},
		{"test://" + strings.Repeat("a", 1<<20), "MaxSubscribeURIBytes", jsonrpc.CodeInvalidParams},
		{"test://nobody", "not served", sdk.CodeResourceNotFound},
	} {
		err := a.cs.Subscribe(ctx, &sdk.SubscribeParams{URI: c.uri})
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code != c.code || !strings.Contains(err.Error(), c.want) {
			t.Errorf("subscribing to %.40s... (%d bytes): %v, want a JSON-RPC error %d naming %s", c.uri, len(c.uri), err, c.code, c.want)
		}
	}
	if n := srv.Refusals().Subscriptions; n != 3 {
		t.Errorf("Refusals().Subscriptions %d, want 3", n)
	}
}

// deafTransport is a client transport whose reading stops while hold is
// open: the server's writes to it block, as to a client that does not
// read.
type deafTransport struct {
	sdk.Transport
	hold chan struct{}
}

func (d deafTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := d.Transport.Connect(ctx)
	return deafConn{c, d.hold}, err
}

type deafConn struct {
	sdk.Connection
	hold chan struct{}
}

func (c deafConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if _, ok := msg.(*jsonrpc.Request); ok { // a notification: stop reading until released
		<-c.hold
	}
	return msg, err
}

// A subscribed client that does not read holds neither a plugin's
// notify_resource_updated nor a reload: the notifications are sent in the
// background, a URI announced again while queued sent once.
func TestResourceUpdatedDoesNotWaitForClients(t *testing.T) {
	p := newsPlugin{&itemsPlugin{name: "news", answers: map[string]string{
		engine.MethodListResources: `{"resources":[{"uri":"test://a","name":"a"}]}`,
	}}}
	srv := newServer(t, engine.New(nil, engine.NewRegistry(), engine.WithExtenders(p)), mcp.Options{})
	hold := make(chan struct{})
	released := false
	release := func() {
		if !released {
			released = true
			close(hold)
		}
	}
	defer release()
	st, ct := sdk.NewInMemoryTransports()
	go srv.Serve(context.Background(), st)
	deaf, err := sdk.NewClient(&sdk.Implementation{Name: "deaf", Version: "1"}, nil).
		Connect(context.Background(), deafTransport{ct, hold}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer deaf.Close()
	ctx := context.Background()
	if err := deaf.Subscribe(ctx, &sdk.SubscribeParams{URI: "test://a"}); err != nil {
		t.Fatal(err)
	}
	other := watch(t, srv)
	done := make(chan error, 1)
	go func() {
		for range 3 {
			if _, err := other.cs.CallTool(ctx, &sdk.CallToolParams{Name: "touch", Arguments: map[string]any{"uri": "test://a"}}); err != nil {
				done <- err
				return
			}
			srv.Reloaded(ctx, "news")
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(25 * time.Second):
		// The SDK bounds each send at 10 s: serial sends take 60 s.
		t.Fatal("3 touches and reloads still running after 25 s while a subscribed client does not read: they wait for it")
	}
	release()
}
