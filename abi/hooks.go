package abi

// The payloads of the four engine hooks. Each hook receives an input object
// and answers with an output object; both travel as JSON between host and
// guest.

// PromptInput asks a prompt builder for the run's system prompt.
type PromptInput struct {
	Task          string     `json:"task"`
	Tools         []ToolSpec `json:"tools"`
	DefaultPrompt string     `json:"default_prompt"` // what the engine would use; builders may extend it
}

// PromptOutput is a prompt builder's answer.
type PromptOutput struct {
	SystemPrompt string `json:"system_prompt"`
}

// ParamsInput asks a params builder for the run's model parameters.
type ParamsInput struct {
	Task    string     `json:"task"`
	Options RunOptions `json:"options"`
}

// ParamsOutput is a params builder's answer: model parameters sent with every
// chat request of the run (temperature, top_p, max_tokens, ...).
type ParamsOutput struct {
	Parameters map[string]any `json:"parameters"`
}

// ToolSuccessInput tells a hook that a tool was found and returned no error.
type ToolSuccessInput struct {
	Tool        string         `json:"tool"`
	Step        int            `json:"step"`
	Params      map[string]any `json:"params"`
	Observation string         `json:"observation"`
}

// FallbackInput asks for the final answer when the forced conclusion failed.
type FallbackInput struct {
	Task   string `json:"task"`
	Reason string `json:"reason"` // why the forced conclusion failed
	Steps  int    `json:"steps"`
	Usage  Usage  `json:"usage"`
}
