package host

import (
	"context"
	"os"
	"testing"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/record"
)

// BenchmarkRecordCall is BenchmarkCall's WAT echo with and without a
// recording: what --record adds to a call (the output copied, input and
// output scrubbed of one secret, the JSON line built and written with one
// write(2), to /dev/null so that the disk is not measured and the file does
// not grow past the caps).
func BenchmarkRecordCall(b *testing.B) {
	ctx := context.Background()
	for _, mode := range []string{"off", "on"} {
		b.Run(mode, func(b *testing.B) {
			opts := LoaderOptions{CacheDir: b.TempDir()}
			if mode == "on" {
				null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
				if err != nil {
					b.Fatal(err)
				}
				defer null.Close()
				rec, err := record.New(null, record.Options{MaxBytes: 1 << 62, MaxCalls: 1<<31 - 1,
					Secrets: []record.Secret{{Name: "BENCH_SECRET", Value: "0123456789abcdef"}}})
				if err != nil {
					b.Fatal(err)
				}
				defer rec.Close()
				opts.Recorder = rec
			}
			l, err := NewLoader(opts)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close(ctx)
			p := load(b, l, Config{Path: fixture(b, "echo"), Limits: Limits{MaxInputBytes: 2 << 20, MaxOutputBytes: 4 << 20}})
			for _, s := range benchSizes[:3] {
				in := jsonPayload(s.n)
				b.Run(s.name, func(b *testing.B) {
					b.SetBytes(int64(s.n))
					b.ReportAllocs()
					for b.Loop() {
						if out, err := p.Call(ctx, abi.ExportBuildPrompt, in); err != nil || len(out) == 0 {
							b.Fatalf("%d bytes, %v", len(out), err)
						}
					}
				})
			}
		})
	}
}
