package pipeline

// DefaultHandlerRegistry returns a registry with the built-in handlers:
// start, exit, codergen, conditional, wait.human, tool, parallel,
// parallel.fan_in and stack.manager_loop. They take their agent backend,
// interviewer and tools from the Runner that runs them (see Execution),
// unless a handler's own field sets one.
func DefaultHandlerRegistry() *HandlerRegistry {
	r := NewHandlerRegistry()
	r.Register(StartHandler{})
	r.Register(ExitHandler{})
	r.Register(&CodergenHandler{})
	r.Register(&ConditionalHandler{})
	r.Register(&HumanHandler{})
	r.Register(&ToolHandler{})
	r.Register(ParallelHandler{})
	r.Register(&FanInHandler{})
	r.Register(ManagerLoopHandler{})
	return r
}
