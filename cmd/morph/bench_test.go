package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/morphhost/morph/internal/testenv"
)

// The test binary is morph itself when this is set (see init): the cold
// start benchmarks run it as a new process, which is what an operator
// pays, without a separate build.
const asMorphEnv = "MORPH_TEST_AS_MORPH"

func init() {
	if os.Getenv(asMorphEnv) == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
}

// BenchmarkColdStartProcess is a whole morph process, the disk cache warm
// (the first of the b.N runs fills it, before the timer): `version` is the
// floor of any process (the Go runtime, the command line); `inspect` loads
// a plugin (compile from the cache, instantiate, describe); `run-demo` is
// the offline demo of the README, `morph run` with the go-hooks plugin
// against the scripted model, through its shutdown.
func BenchmarkColdStartProcess(b *testing.B) {
	root, err := filepath.Abs("../..")
	if err != nil {
		b.Fatal(err)
	}
	goHooks := testenv.Built(b, filepath.Join(root, "examples/go-hooks/go-hooks.wasm"), "examples")
	cases := []struct {
		name string
		args []string
	}{
		{"version", []string{"version"}},
		{"inspect/wat-minimal", []string{"plugin", "inspect", filepath.Join(root, "guests/testdata/minimal.wasm")}},
		{"inspect/go-hooks", []string{"plugin", "inspect", goHooks}},
		{"run-demo", []string{"run", "--config", filepath.Join(root, "morph.toml"), "What is 17.5% of 2,340 plus the square root of 1,764?"}},
	}
	cache := b.TempDir() // the user cache dir of the processes: compiled modules land there
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			start := func() {
				cmd := exec.Command(os.Args[0], c.args...)
				cmd.Env = append(os.Environ(), asMorphEnv+"=1", "XDG_CACHE_HOME="+cache)
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("morph %v: %v\n%s", c.args, err, out)
				}
			}
			start() // fills the cache
			for b.Loop() {
				start()
			}
		})
	}
}
