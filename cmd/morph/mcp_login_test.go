package main

import (
	"strings"
	"testing"
)

// morph mcp login refuses, as a usage error, an entry that is not there
// or has no oauth table, naming it, and a --timeout that is not positive;
// an unattended login that cannot reach its server fails naming it.
func TestMCPLoginRefusals(t *testing.T) {
	cfg := setup(t, []string{finalReply}, "\n[[mcp_servers]]\nname = \"plain\"\nurl = \"http://127.0.0.1:1/mcp\"\n"+
		"\n[[mcp_servers]]\nname = \"guarded\"\nurl = \"http://127.0.0.1:1/mcp\"\noauth = {}\nstartup_timeout = \"5s\"\n")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"plain"}, exitUsage, `entry "plain" with an oauth table`},
		{[]string{"nope"}, exitUsage, `entry "nope" with an oauth table`},
		{[]string{"guarded", "--timeout", "0s"}, exitUsage, "--timeout"},
		{[]string{}, exitUsage, "accepts 1 arg"},
		{[]string{"guarded", "--timeout", "5s"}, 1, `mcp server "guarded"`},
	} {
		code, stdout, stderr := morph(t, "", append([]string{"mcp", "login", "--config", cfg}, tc.args...)...)
		if code != tc.code || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d with %q", tc.args, code, stdout, stderr, tc.code, tc.want)
		}
	}
}
