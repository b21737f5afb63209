package host

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/morphhost/morph/abi"
)

// FuzzLoad loads arbitrary bytes as a module: whatever they are, Load
// returns a plugin or an error, never a panic.
func FuzzLoad(f *testing.F) {
	for _, name := range []string{"minimal", "echo", "trap", "nomarker", "badjson"} {
		if b, err := os.ReadFile("../guests/testdata/" + name + ".wasm"); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("\x00asm\x01\x00\x00\x00"))
	f.Add([]byte("not wasm"))
	l, err := NewLoader(LoaderOptions{CacheDir: "off"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, wasm []byte) {
		p, err := l.Load(context.Background(), Config{Name: "fuzz", Wasm: wasm, Limits: Limits{MemoryMiB: 4}})
		if err == nil {
			p.Close(context.Background())
		}
	})
}

// FuzzDecodeOutput feeds arbitrary guest output to the decoding every
// adapter uses (through the echo guest, which answers its input): a typed
// error or a payload, never a panic.
func FuzzDecodeOutput(f *testing.F) {
	f.Add([]byte(`{"system_prompt":"x"}`))
	f.Add([]byte(`{"thought":"t","output":{"a":[1,2,{"b":null}]},"plan":{"steps":["s",{"step":"x","status":"done"}]}}`))
	f.Add([]byte(`{"parameters":{"temperature":"hot"}}`))
	f.Add([]byte(`[`))
	wasm, err := os.ReadFile("../guests/testdata/echo.wasm")
	if err != nil {
		f.Skip("run `make fixtures`")
	}
	l, err := NewLoader(LoaderOptions{CacheDir: "off"})
	if err != nil {
		f.Fatal(err)
	}
	p, err := l.Load(context.Background(), Config{Wasm: wasm})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		ctx := context.Background()
		var raw json.RawMessage = out
		if !json.Valid(out) {
			raw, _ = json.Marshal(string(out)) // the echo guest answers its input, which must be JSON to be sent
		}
		invoke[abi.PromptOutput](ctx, p, abi.ExportBuildPrompt, raw)
		invoke[*abi.Final](ctx, p, abi.ExportBuildPrompt, raw)
		invoke[abi.ParamsOutput](ctx, p, abi.ExportBuildPrompt, raw)
		invoke[abi.BeforeToolCallOutput](ctx, p, abi.ExportBuildPrompt, raw)
		invoke[abi.Manifest](ctx, p, abi.ExportBuildPrompt, raw)
	})
}
