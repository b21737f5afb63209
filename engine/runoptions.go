package engine

// WithDefaults returns o as a run uses it: its zero limits replaced by the
// engine's defaults (MaxSteps by DefaultMaxSteps, ParseRetries by
// DefaultParseRetries), so that a host can log or show what applies.
func (o RunOptions) WithDefaults() RunOptions { return withDefaults(o) }
