package config_test

import (
	"os"
	"strings"
	"testing"

	"github.com/morphhost/morph/config"
	"github.com/morphhost/morph/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The tests discover no plugins of the developer's: the user plugin
// directory is in a temporary home.
func TestUserPluginsAreIsolated(t *testing.T) {
	dirs := config.Discovery{}.Directories()
	if user := dirs[len(dirs)-1]; !strings.HasPrefix(user, os.TempDir()) {
		t.Fatalf("user plugin directory %q, want one in a temporary home", user)
	}
}
