package pipeline

// ToolNames lists the engine's tools, sorted: validation suggests the
// closest to a tool node's misspelled name (ValidateOptions.ToolNames).
func (b *EngineBackend) ToolNames() []string { return b.Engine.Registry().Names() }
