package guest

import (
	"reflect"

	"github.com/tetratelabs/wazero/api"
)

// MemoryOf is mod's memory, nil when it has none. A module that may have
// none is asked through it (the native ABI checks at load that its modules
// export one), not through mod.Memory(): wazero (v1.12) answers a module without a
// memory with a nil *MemoryInstance inside a non-nil api.Memory, which
// passes a `!= nil` test and panics at its first Size or Grow (issue 28: a
// memoryless Extism module hung Load).
func MemoryOf(mod api.Module) api.Memory {
	mem := mod.Memory()
	if mem == nil {
		return nil
	}
	if v := reflect.ValueOf(mem); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil
	}
	return mem
}
