package wasmbin_test

import (
	"errors"
	"math"
	"testing"

	"github.com/morphhost/morph/host/internal/wasmbin"
)

// TestS32 checks the signed LEB128 reader against the encoder and the spec's bounds: the shortest and the
// padded encodings read back, and a fifth byte whose unused bits do not extend the sign (which wazero
// accepts when only its bit 6 is wrong), a sixth byte or a truncation are malformed.
func TestS32(t *testing.T) {
	for _, v := range []int32{0, 1, -1, 63, 64, -64, -65, 1 << 20, math.MaxInt32, math.MinInt32} {
		r := wasmbin.NewReader(wasmbin.AppendS32(nil, v), "test")
		got, err := r.S32()
		if err != nil {
			t.Errorf("S32 of %d's encoding: %v", v, err)
			continue
		}
		if got != v {
			t.Errorf("S32 of %d's encoding = %d", v, got)
		}
		if n := r.Remaining(); n != 0 {
			t.Errorf("S32 of %d's encoding left %d bytes, want none", v, n)
		}
	}
	good := map[string]int32{
		"\x80\x80\x80\x80\x00": 0,
		"\xff\xff\xff\xff\x7f": -1,
		"\xff\xff\xff\xff\x07": math.MaxInt32,
		"\x80\x80\x80\x80\x78": math.MinInt32,
		"\x81\x80\x00":         1,
	}
	for in, want := range good {
		r := wasmbin.NewReader([]byte(in), "test")
		if got, err := r.S32(); err != nil || got != want {
			t.Errorf("S32(% x) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"\x81\x80\x80\x80\x40", "\xff\xff\xff\xff\x4f", "\xff\xff\xff\xff\x0f", "\x80\x80\x80\x80\x80\x00", "\x80"} {
		r := wasmbin.NewReader([]byte(in), "test")
		if got, err := r.S32(); !errors.Is(err, wasmbin.ErrMalformed) {
			t.Errorf("S32(% x) = %d, %v; want malformed", in, got, err)
		}
	}
}
