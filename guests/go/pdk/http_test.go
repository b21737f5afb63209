//go:build !wasip1

package pdk

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/morphhost/morph/abi"
)

// fakeHost serves HTTP as the host's http_request does: the answer goes into
// a buffer from the guest's alloc (x), packed with the error flag when isErr.
func fakeHost(t *testing.T, x *exchange, answer func(req abi.HTTPRequest) (string, bool)) *[]abi.HTTPRequest {
	t.Helper()
	var seen []abi.HTTPRequest
	oldHTTP, oldMem := nativeHTTP, nativeMem
	t.Cleanup(func() { nativeHTTP, nativeMem = oldHTTP, oldMem })
	nativeMem = x
	nativeHTTP = func(raw []byte) uint64 {
		var req abi.HTTPRequest
		if err := json.Unmarshal(raw, &req); err != nil {
			t.Fatalf("the PDK sent %q: %v", raw, err)
		}
		seen = append(seen, req)
		out, isErr := answer(req)
		if out == "" {
			return abi.Pack(0, 0, isErr)
		}
		p := x.alloc(uint32(len(out)))
		copy(x.pending[p], out)
		return abi.Pack(p, uint32(len(out)), isErr)
	}
	return &seen
}

func TestHTTP(t *testing.T) {
	x := fresh(t)
	seen := fakeHost(t, x, func(req abi.HTTPRequest) (string, bool) {
		switch req.URL {
		case "https://api.example.com/notes":
			return `{"status":201,"headers":{"Content-Type":"application/json"},"body":"{\"id\":7}"}`, false
		case "https://evil.example.com/":
			return "host not allowed: evil.example.com is not in the plugin's allowed_hosts", true
		case "https://big.example.com/":
			return "", true // the guest could not allocate the message
		}
		return "not json", false
	})
	req := abi.HTTPRequest{Method: "POST", URL: "https://api.example.com/notes", Headers: map[string]string{"Content-Type": "application/json"}, Body: `{"text":"hi"}`}
	resp, err := HTTP(req)
	want := abi.HTTPResponse{Status: 201, Headers: map[string]string{"Content-Type": "application/json"}, Body: `{"id":7}`}
	if err != nil || !reflect.DeepEqual(resp, want) {
		t.Fatalf("HTTP = %+v, %v; want %+v", resp, err, want)
	}
	if len(*seen) != 1 || !reflect.DeepEqual((*seen)[0], req) {
		t.Fatalf("the host got %+v, want %+v", *seen, req)
	}
	if len(x.pending) != 0 {
		t.Fatalf("%d buffers still pending: the answer's buffer was not claimed", len(x.pending))
	}
	if !reg.used[CapHTTP] {
		t.Fatal("HTTP use not recorded")
	}
	for url, wantErr := range map[string]string{
		"https://evil.example.com/": "pdk.HTTP: host not allowed: evil.example.com",
		"https://big.example.com/":  "the host's answer could not be allocated (the plugin's memory is full: raise memory_mb)",
		"https://odd.example.com/":  "the host's answer is not an HTTPResponse",
	} {
		if _, err := HTTP(abi.HTTPRequest{URL: url}); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%s: err %v, want %q", url, err, wantErr)
		}
	}
}

// A host answering a buffer the guest never allocated is an error, not a
// read of arbitrary memory.
func TestHTTPForeignBuffer(t *testing.T) {
	x := fresh(t)
	fakeHost(t, x, nil)
	nativeHTTP = func([]byte) uint64 { return abi.Pack(4242, 10, false) }
	if _, err := HTTP(abi.HTTPRequest{URL: "https://api.example.com/"}); err == nil || !strings.Contains(err.Error(), "not a buffer from morph_alloc") {
		t.Fatalf("err %v", err)
	}
	nativeHTTP = nil
	if _, err := HTTP(abi.HTTPRequest{URL: "https://api.example.com/"}); err == nil || !strings.Contains(err.Error(), "no host outside WebAssembly") {
		t.Fatalf("without a host: err %v", err)
	}
}
