// ledger is a standard Go guest for make chaos (temporal/cmd/morph-chaos):
// its one tool appends a line to /ledger/ledger.txt, a file its grant
// (allowed_paths = ["DIR:/ledger:rw"]) makes writable, so that a tool call
// made twice leaves its line twice.
package main

import (
	"os"

	"github.com/morphhost/morph/guests/go/pdk"
)

func init() {
	pdk.Plugin("ledger", "1.0.0")
	pdk.Capabilities(pdk.CapFS)
	pdk.Tool("ledger_append", "Appends a line to the ledger.", `{"type":"object","properties":{"line":{"type":"string"}},"required":["line"]}`,
		func(p map[string]any) (string, error) {
			line, _ := p["line"].(string)
			f, err := os.OpenFile("/ledger/ledger.txt", os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
			if err != nil {
				return "", err
			}
			if _, err := f.WriteString(line + "\n"); err != nil {
				f.Close()
				return "", err
			}
			return "appended", f.Close()
		})
}

func main() {}
