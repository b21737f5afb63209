// cap_go is a standard Go guest for the host's capability tests: its tools
// use files, the environment and HTTP through the ordinary Go APIs and the
// Go PDK, so the tests see what a real plugin sees, grants or none.
package main

import (
	"encoding/json"
	"os"
	"sort"
	"strings"

	"github.com/morphhost/morph/abi"
	"github.com/morphhost/morph/guests/go/pdk"
)

func str(p map[string]any, key string) string {
	s, _ := p[key].(string)
	return s
}

func init() {
	pdk.Plugin("cap_go", "1.0.0")
	pdk.Capabilities(pdk.CapHTTP, pdk.CapFS, pdk.CapEnv)
	pdk.Tool("read", "Reads a file.", `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`,
		func(p map[string]any) (string, error) {
			b, err := os.ReadFile(str(p, "path"))
			return string(b), err
		})
	pdk.Tool("write", "Writes a file.", `{"type":"object","properties":{"path":{"type":"string"},"text":{"type":"string"}},"required":["path","text"]}`,
		func(p map[string]any) (string, error) {
			return "written", os.WriteFile(str(p, "path"), []byte(str(p, "text")), 0o644)
		})
	pdk.Tool("symlink", "Creates a symbolic link.", `{"type":"object","properties":{"target":{"type":"string"},"link":{"type":"string"}},"required":["target","link"]}`,
		func(p map[string]any) (string, error) {
			return "linked", os.Symlink(str(p, "target"), str(p, "link"))
		})
	pdk.Tool("list", "Lists a directory.", `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`,
		func(p map[string]any) (string, error) {
			entries, err := os.ReadDir(str(p, "path"))
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			return strings.Join(names, ","), err
		})
	pdk.Tool("environ", "Lists the environment.", "", func(map[string]any) (string, error) {
		env := os.Environ()
		sort.Strings(env)
		return strings.Join(env, "\n"), nil
	})
	pdk.Tool("fetch", "Sends an HTTP request; answers the response as JSON.",
		`{"type":"object","properties":{"url":{"type":"string"},"method":{"type":"string"},"body":{"type":"string"},"headers":{"type":"object"}},"required":["url"]}`,
		func(p map[string]any) (string, error) {
			req := abi.HTTPRequest{URL: str(p, "url"), Method: str(p, "method"), Body: str(p, "body")}
			if h, ok := p["headers"].(map[string]any); ok {
				req.Headers = map[string]string{}
				for k, v := range h {
					req.Headers[k], _ = v.(string)
				}
			}
			resp, err := pdk.HTTP(req)
			if err != nil {
				return "", err
			}
			b, err := json.Marshal(resp)
			return string(b), err
		})
}

func main() {}
