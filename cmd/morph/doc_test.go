package main

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// The package doc lists every command the CLI has, so that it stays the
// map of the CLI when a command is added.
func TestPackageDocListsCommands(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	doc, _, _ := strings.Cut(string(src), "package main")
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" {
				continue
			}
			if sub.HasSubCommands() && sub.Name() != "completion" { // completion's are one per shell
				walk(sub)
				continue
			}
			if !strings.Contains(doc, "//\t"+sub.CommandPath()+" ") && !strings.Contains(doc, "//\t"+sub.CommandPath()+"\n") {
				t.Errorf("the package doc (main.go) does not list %q", sub.CommandPath())
			}
		}
	}
	root := newRoot(strings.NewReader(""), io.Discard, io.Discard)
	root.InitDefaultCompletionCmd()
	walk(root)
}
