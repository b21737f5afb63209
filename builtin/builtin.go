// Package builtin holds morph's built-in tools, which a config enables by
// name (see Lookup and Names). Every tool here is stateless and safe for
// concurrent use.
package builtin

import (
	"sort"

	"github.com/morphhost/morph/engine"
)

// tools maps each built-in tool's name to its constructor.
var tools = map[string]func() engine.Tool{
	CalcName: func() engine.Tool { return Calc{} },
}

// Lookup returns the built-in tool called name.
func Lookup(name string) (engine.Tool, bool) {
	mk, ok := tools[name]
	if !ok {
		return nil, false
	}
	return mk(), true
}

// Names returns the names of the built-in tools, sorted.
func Names() []string {
	names := make([]string, 0, len(tools))
	for name := range tools {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
