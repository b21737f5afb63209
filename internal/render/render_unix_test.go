//go:build unix

package render

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSVGReadsNoFiles: Graphviz would read a node's image from the host
// (relative to the working directory), and block for ever opening a named
// pipe.
func TestSVGReadsNoFiles(t *testing.T) {
	t.Chdir(t.TempDir())
	// A 1x1 PNG.
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")
	if err := os.WriteFile("a.png", png, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo("fifo", 0o644); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{
		`digraph { a [image="a.png"] }`,
		`digraph { a [label=<<table><tr><td><img src="a.png"/></td></tr></table>>] }`,
		`digraph { a [image="fifo"] }`,
	} {
		svg, err := SVG(context.Background(), []byte(src), nil, Options{Timeout: 5 * time.Second})
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		if strings.Contains(string(svg), "<image") {
			t.Errorf("%s: graphviz read the image:\n%s", src, svg)
		}
	}
}
