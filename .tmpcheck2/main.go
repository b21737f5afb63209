package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/morphhost/morph/host"
)

func main() {
	ctx := context.Background()
	l, _ := host.NewLoader(host.LoaderOptions{CacheDir: "off"})
	files, _ := filepath.Glob(filepath.Join(os.Args[1], "*.wasm"))
	loaded := 0
	for _, f := range files {
		rep, err := l.Inspect(ctx, host.Config{Path: f})
		if err != nil {
			fmt.Printf("%-26s read error %v\n", filepath.Base(f), err)
			continue
		}
		cfg := host.Config{Path: f, Limits: host.Limits{Timeout: 3 * time.Second}}
		for _, line := range rep.Suggested {
			if v, ok := strings.CutPrefix(line, "export = "); ok {
				cfg.Tools = append(cfg.Tools, host.ExportTool{Export: strings.Trim(v, `"`), Input: "field:input"})
			}
			if strings.Contains(line, "extism:host/user.") {
				name := line[strings.Index(line, `user."`)+6:]
				name = name[:strings.Index(name, `"`)]
				i64 := []api.ValueType{api.ValueTypeI64}
				cfg.HostFunctions = append(cfg.HostFunctions, host.HostFunction{Name: name, Params: i64, Results: i64,
					Func: func(context.Context, *host.HostCall, []uint64) error { return nil }})
			}
		}
		i64 := []api.ValueType{api.ValueTypeI64}
		switch filepath.Base(f) {
		case "host.wasm":
			cfg.HostFunctions = []host.HostFunction{{Name: "mult", Params: append(i64, i64...), Results: i64, Func: func(_ context.Context, _ *host.HostCall, st []uint64) error {
				st[0] = api.EncodeI32(api.DecodeI32(st[0]) * api.DecodeI32(st[1]))
				return nil
			}}}
		case "host_memory.wasm":
			cfg.HostFunctions = []host.HostFunction{{Module: "host", Name: "to_upper", Params: i64, Results: i64, Func: func(_ context.Context, c *host.HostCall, st []uint64) error {
				b, err := c.Read(st[0])
				if err != nil {
					return err
				}
				st[0], err = c.Write([]byte(strings.ToUpper(string(b))))
				return err
			}}}
		case "main.wasm":
			cfg.Modules = []host.LinkedModule{{Name: "lib", Path: filepath.Join(filepath.Dir(f), "lib.wasm")}}
		case "fs.wasm", "fs_std.wasm":
			cfg.Grants.Paths = []host.PathGrant{{Host: filepath.Join(filepath.Dir(f), "..", "testdata"), Guest: "/mnt"}}
		case "noop.wasm":
			cfg.Tools = []host.ExportTool{{Export: "run_test"}}
		case "count_vowels_std.wasm", "exit.wasm", "std_command.wasm":
			cfg.Tools = []host.ExportTool{{Export: "_start", Name: "start", Input: "field:input"}}
		}
		p, err := l.Load(ctx, cfg)
		if err != nil {
			fmt.Printf("%-26s %-7s LOAD FAIL %s\n", filepath.Base(f), rep.Loader, strings.ReplaceAll(err.Error(), "\n", " | ")[:min(300, len(err.Error()))])
			continue
		}
		loaded++
		var res []string
		for _, t := range p.Tools() {
			out, err := t.Execute(ctx, map[string]any{"input": "benjamin"})
			if err != nil {
				res = append(res, t.Name()+"=ERR "+strings.ReplaceAll(err.Error(), "\n", " ")[:min(120, len(err.Error()))])
			} else {
				res = append(res, t.Name()+"="+fmt.Sprintf("%q", out[:min(60, len(out))]))
			}
		}
		fmt.Printf("%-26s %-7s ok  %s\n", filepath.Base(f), rep.Loader, strings.Join(res, "; "))
		p.Close(ctx)
	}
	fmt.Println("loaded", loaded, "of", len(files))
}
