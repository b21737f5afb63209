//go:build !wasip1

package pdk

import (
	"fmt"
	"os"
)

// Outside WebAssembly (go vet, go test, tools that import a plugin's
// package) there is no host: Log writes to stderr, Config finds nothing and
// HTTP fails, unless a test sets nativeConfig, or nativeHTTP and nativeMem.

var nativeConfig map[string]string

// nativeHTTP stands in for the host's http_request: it gets the request's
// JSON and answers a packed result as the host does, in a buffer it took
// from nativeMem's alloc.
var (
	nativeHTTP func(req []byte) uint64
	nativeMem  *exchange
)

func hostHTTP(req []byte) ([]byte, bool, error) {
	if nativeHTTP == nil {
		return []byte("http_request: there is no host outside WebAssembly"), true, nil
	}
	return nativeMem.claim(nativeHTTP(req))
}

var nativeLog = func(level int32, msg string) {
	fmt.Fprintf(os.Stderr, "pdk log level=%d: %s\n", level, msg)
}

func hostLog(level int32, msg string) { nativeLog(level, msg) }

// hostConfigGet follows config_get: -1 when absent, else the value's length,
// with the value copied to out only when it fits.
func hostConfigGet(key string, out []byte) int32 {
	v, ok := nativeConfig[key]
	if !ok {
		return -1
	}
	if len(v) <= len(out) {
		copy(out, v)
	}
	return int32(len(v))
}
