package main

import (
	"context"

	"github.com/morphhost/morph/telemetry"
)

// traced is ctx joined to the trace of the environment's TRACEPARENT
// (telemetry.FromEnvironment): the spans of a run started by a traced
// process (a CI job, a script) are that trace's.
func traced(ctx context.Context) context.Context { return telemetry.FromEnvironment(ctx) }
