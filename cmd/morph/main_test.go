package main

import (
	"os"
	"strings"
	"testing"

	"github.com/morphhost/morph/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The CLI's tests discover no plugins of the developer's (~/.morph/plugins
// broke TestRun): their home is a temporary directory.
func TestHomeIsIsolated(t *testing.T) {
	if home, err := os.UserHomeDir(); err != nil || !strings.HasPrefix(home, os.TempDir()) {
		t.Fatalf("home %q (%v), want a temporary directory", home, err)
	}
}
