// Package pipeline runs DOT pipelines: a Graphviz digraph whose nodes are
// the stages of multi-stage agent work (plan, implement, verify, ask a
// person, fan out and in) and whose edges route on each stage's outcome.
// It follows strongDM's attractor model and keeps the names of mammoth's
// attractor package (Graph, Node, Edge, ParseDOT, Outcome, Context,
// ArtifactStore, Handler, HandlerRegistry, CodergenBackend,
// ConditionalHandler, DetectOutcomeMarker, SelectEdge), so hosts written
// for it port over. It runs on package engine and knows nothing of
// WebAssembly: package host adapts a plugin's morph_handle_stage export to
// a Handler.
//
// A run has four phases: ParseDOT, ApplyTransforms ($goal, the model
// stylesheet), Validate (diagnostics; any ERROR refuses the run), and
// Runner.Run, which walks one node at a time, picks each next edge with
// SelectEdge, and saves a checkpoint after every node so that
// Runner.Resume continues where a run stopped.
//
// A runner's time, timeouts and parallel branches are Go's unless its Clock
// is an Executor: then they are the executor's, which is how package
// temporal runs the same runner in a Temporal workflow's code (durable
// timers, workflow coroutines). A host that replays runs gives RunConfig a
// RunID and the Runner a deterministic Rand.
//
// # The DOT morph accepts
//
// One digraph (not strict, not an undirected graph, no "--" edges).
// Statements end with an optional ';'. Comments: //, /* */ and lines
// starting with #. Node ids are [A-Za-z_][A-Za-z0-9_]*. Quoted strings take
// \" \n \t and \\. Attribute keys may be dotted (human.default_choice).
// graph [..], node [..] and edge [..] set defaults for later statements of
// their scope; a subgraph { } is a scope, and its label becomes a class of
// the nodes in it (lowercased, spaces to '-', other punctuation dropped).
// A -> B -> C [attrs] makes an edge per pair, each with the attrs. A
// top-level key = value is a graph attribute. Durations are a number and
// ms, s, m, h or d: 250ms, 30s, 5m, 2h, 1d; a bare whole number is seconds
// (timeout="300" is 300s, with an attr_value warning).
//
// Graph attributes:
//
//	goal                   the run's goal: $goal in prompts and labels, graph.goal in the context
//	label                  a title, for render
//	model_stylesheet       CSS-like rules setting llm_model, llm_provider, reasoning_effort (below)
//	default_max_retries    retries of every node without max_retries (default 0; default_max_retry is read as it)
//	retry_target           where a failed node goes when no edge and no node target takes it
//	fallback_retry_target  the next place to try
//	default_fidelity       fidelity of nodes and edges that set none (default compact)
//	thread_id              the thread of full-fidelity stages whose node and edge set none
//	max_node_visits        how often one node may run (default 25, Limits.MaxNodeVisits)
//	max_restarts           loop_restart edges the run may take (default 5; 1 or more; [pipeline] max_restarts
//	                       in morph.toml, Limits.MaxRestarts, wins over it)
//	max_steps              the stages a run may take, repeats included (default max(1000, 4 x the nodes);
//	                       [pipeline] max_steps in morph.toml, Limits.MaxSteps, wins over it)
//
// Node attributes (every node):
//
//	label          shown by render, and the prompt when there is no prompt
//	shape          picks the handler when type is not set (table below); default box
//	type           the handler type: start, exit, codergen, conditional, wait.human, tool,
//	               parallel, parallel.fan_in, stack.manager_loop, or wasm:<plugin>
//	node_type      read as type when type is not set (kilroy's and fabro's name), with a warning
//	handler        a WebAssembly stage handler's plugin: the same as type="wasm:<plugin>"
//	class          classes for the stylesheet, comma- or space-separated
//	max_retries    extra attempts when the stage asks to retry (default: the graph's default_max_retries)
//	allow_partial  a stage that still asks to retry when attempts run out is partial_success, not fail (default false)
//	timeout        the stage's time limit (default none; a tool node's default is Limits.ToolTimeout, 5m)
//	goal_gate      the run may not exit unless this node ended success or partial_success (default false)
//	retry_target, fallback_retry_target
//	               where a failed stage, or an unsatisfied goal gate, sends the run
//	max_node_visits
//	               this node's own cap on runs
//
// Agent stages (codergen, the hybrid diamond, a fan-in with a prompt):
//
//	prompt            the agent's task; $goal and ${context.key} are expanded (codergen falls back to label)
//	llm_model         the model (default: the config's; the stylesheet may set it)
//	llm_provider      another provider of the config ("openai", "scripted")
//	base_url          another OpenAI-compatible endpoint (node, then the context's base_url); morph pipeline run
//	                  takes only [llm] base_url and those listed in [pipeline] endpoints: the API key goes with it
//	reasoning_effort  low, medium or high, sent as the reasoning_effort parameter when set
//	max_turns         the agent's step limit (default: the config's agent.max_steps; 20 for a diamond)
//	system_prompt     replaces the agent's identity (node, then the context's system_prompt)
//	fidelity          full, truncate, compact (default), summary:low, summary:medium, summary:high
//	thread_id         the conversation a full-fidelity stage continues (default: the incoming edge's, the
//	                  graph's, the node's first class, else the previous node's id; spec 5.4)
//	auto_status       codergen: without an OUTCOME marker, the agent's success decides (default true); false: no
//	                  marker is a FAIL (a hybrid diamond always lets its agent's success decide)
//	workdir           given to the backend as AgentRunConfig.WorkDir (default: the run's artifact directory);
//	                  morph's EngineBackend has none: its tools are plugins, with their own grants
//
// An agent stage's OUTCOME marker: "OUTCOME: <word>" (or '=', any case) in
// the agent's reply sets the stage's status when the word is success
// (PASS), fail, partial_success, retry or skipped, or a custom outcome a
// condition on the node's outgoing edges tests (OUTCOME: needs_dod with an
// edge condition="outcome=needs_dod"). Another word is not a marker. FAIL
// wins when several appear, else the last.
//
// Other handlers' attributes:
//
//	human.default_choice  wait.human: the choice taken on a timeout (else the stage asks to retry)
//	human.timeout         wait.human: how long to wait for an answer (default: no limit)
//	human.type            wait.human: multiple_choice (default), yes_no, confirmation or freeform
//	                      (tracker's mode is read as it, "choice" as multiple_choice, with a warning)
//	tool                  tool: the morph tool to run (a built-in or a plugin's; plugin tools run in their sandbox)
//	tool_input            tool: its input, a JSON object; $goal and ${context.key} expand inside its strings
//	tool_command          tool: a shell command, run only when [pipeline] allow_shell = true; it sees
//	                      MORPH_GOAL, MORPH_NODE and MORPH_RUN_DIR and a minimal environment, never the API key
//	join_policy           parallel: wait_all (default: partial_success when any branch failed, all
//	                      included, and the fan-in fails) or first_success (fails when none succeeded)
//	max_parallel          parallel: branches run at once (default 4)
//	merge_context         parallel.fan_in: none (default: the branches' context updates stay in
//	                      parallel.results.<branch>, spec 3.8) or best (the chosen branch's are applied)
//	stack.child_dotfile   stack.manager_loop: the child pipeline, relative to this file (on the node, else
//	                      on the graph, as Appendix A has it)
//	manager.poll_interval stack.manager_loop: how often it observes the child (default 45s; more than 0)
//	manager.max_cycles    stack.manager_loop: polls before it cancels the child and fails (default 1000;
//	                      1 or more; counted over the visit's child runs and the parent's resumes; before
//	                      attractor 4.11's polls it counted child runs: a value under 10 without
//	                      manager.poll_interval warns)
//	manager.max_child_runs
//	                      stack.manager_loop: runs of a failing child, each goal naming the last failure
//	                      (default 1; 1 or more)
//	manager.stop_condition
//	                      stack.manager_loop: evaluated against the parent's context at every poll; true
//	                      cancels the child (resumable) and the stage succeeds
//	manager.actions       stack.manager_loop: observe,wait (default), plus steer
//	manager.steer_prompt  stack.manager_loop: the steer text ($goal, ${context.key} expanded), escaped, at
//	                      most 16 KiB, every manager.steer_cooldown polls (default 2)
//	manager.goal          stack.manager_loop: the child's goal (default the parent's)
//	tool_hooks.pre        graph or agent node (the node's wins): a shell command run before each tool
//	tool_hooks.post       call of the agent, and after it; only with [pipeline] allow_shell = true
//	tool_hooks.timeout    graph or node: each hook's time (default 30s, at most 10m)
//
// Edge attributes:
//
//	label      for human gates and preferred labels; accelerators "[Y] Yes", "Y) Yes", "Y - Yes"
//	condition  clauses joined by &&: key=value or key!=value; keys outcome, preferred_label,
//	           context.<key> (or a bare context key); outcome compares case-insensitively
//	           and may name a custom status a handler reports (outcome=needs_dod: a warning)
//	weight     an integer; the higher wins among matching edges (default 0)
//	fidelity   the fidelity of the stage the edge leads to; it beats the node's (spec 5.4), which
//	           beats a fidelity key in the context, then the graph's default_fidelity
//	thread_id  the thread of the stage the edge leads to, when the node sets none
//	loop_restart
//	           true: taking the edge starts a fresh loop at its target (see Loops that restart)
//
// Shapes and the handlers they imply: Mdiamond start, Msquare exit, box
// codergen, diamond conditional, hexagon wait.human, parallelogram tool,
// component parallel, tripleoctagon parallel.fan_in, house
// stack.manager_loop; any other shape is codergen. A graph without a
// start or an exit by shape or type takes a node named start, and nodes
// named exit or end, in any case (Start, EXIT), as them (spec 4.3, 4.4)
// unless they name another handler. A type no handler runs falls back to the shape's handler, with
// a type_known warning (4.2); a wasm:<plugin> type whose plugin is missing
// fails.
//
// The stylesheet: rules "selector { key: value; ... }" where the selector
// is * (specificity 0), a shape (1), .class (2) or #id (3); the most
// specific rule wins, a later one among equals; a node's own attribute
// always wins. The properties model and provider (fabro's) are read as
// llm_model and llm_provider, each with a stylesheet_syntax warning.
//
// # Routing
//
// After a stage, SelectEdge picks the next edge: the edges whose condition
// holds (highest weight, then the lexically first target); else the
// unconditional edge whose label matches the outcome's preferred label;
// else the first of its suggested next ids; else the unconditional edges
// by weight and target. A FAIL never falls through to an unconditional
// edge: it takes a matching condition, else the node's retry_target,
// fallback_retry_target, then the graph's, else the run fails naming the
// node and its reason. Goal gates fail closed: a gate the run never
// reached is unsatisfied.
//
// # Where the spec disagrees with itself
//
// A FAIL with only an unconditional edge (3.2 vs 3.7). Section 3.2's
// run loop routes every outcome through select_edge ("next_edge =
// select_edge(node, outcome, context, graph)"), whose steps 4-5 take an
// unconditional edge whatever the status; section 3.7 says "When a stage
// returns FAIL (or retries are exhausted), the engine attempts failure
// routing in this order: 1. Fail edge ... 2. Retry target ... 3. Fallback
// retry target ... 4. Pipeline termination". morph follows 3.7: a FAIL
// takes a matching condition, else the retry targets, else the run fails.
// Under 3.2 a failed build would flow on down its "happy path" edge to
// deploy; 3.7 is the section written about failures, and that fall-through
// is a failure mode the implementations' bug reports record.
//
// Retries on FAIL (3.5 vs 11.5). Section 3.5's execute_with_retry retries
// a RETRY outcome and an exception that should_retry accepts ("network
// errors, rate limit errors (HTTP 429), server errors (HTTP 5xx), and
// provider-reported transient failures"), and says of a FAIL outcome
// "RETURN outcome"; section 11.5's checklist says "Nodes with max_retries >
// 0 are retried on RETRY or FAIL outcomes". morph follows 3.5: a returned
// FAIL is final and routes by 3.7, since it is the stage's verdict (the
// tests failed) and running it again spends the same tokens on the same
// verdict. A handler error that wraps ErrTransient (should_retry's
// predicate: a handler, tool or stage plugin says which of its errors are
// transient) is retried within max_retries with the RETRY backoff, which
// meets 11.5 for the FAIL an exception becomes; other errors and a node
// timeout FAIL at once. Like an exhausted RETRY, an exhausted transient
// error is partial_success when the node sets allow_partial (3.5 returns
// FAIL for it). The OpenAI client already retries HTTP 408/409/429/5xx
// itself, so what reaches the runner is past those retries.
//
// Resume of a full-fidelity stage (5.3 step 6 degrades it to
// summary:high): morph keeps the real conversation in threads/ and a
// resumed stage continues it, which loses nothing.
//
// # Human gates and tool hooks
//
// A gate's question has a type (spec 6.2): multiple_choice offers its
// outgoing edges; yes_no and confirmation offer Yes and No, mapped to the
// edges labelled yes and no ("[Y] Approve" counts), else to the first and
// second edge; a no with no edge of its own fails the gate ("declined"),
// and where the edges have conditions (tracker's outcome=success /
// outcome=fail) yes is a SUCCESS and no a FAIL for them to route. A
// freeform gate keeps the text as human.gate.text and
// human.response.<node> and routes to the edge whose label is the text,
// else as conditions and weights say. An answer of Value "skipped" fails
// any gate (4.6). AutoApprove says yes, takes the default or first choice,
// and answers freeform with the default or "auto-approved" (6.4).
// QueueInterviewer differs from the spec's: an empty queue waits for Push
// (morph pipeline serve answers as clients post) instead of answering
// SKIPPED. In a run directory, every question and answer is appended to
// interviews.jsonl (RecordingInterviewer; texts cut to 64 KiB) and the
// gate writes <node>/question.md and answer.md; LoadRecordings and
// ReplayInterviewer replay a run's answers.
//
// tool_hooks.pre and tool_hooks.post (9.7) run as tool_command does
// (sh -c, its environment, never the API key) plus MORPH_TOOL_NAME,
// MORPH_TOOL_CALL_ID and MORPH_NODE_ID, with the call as JSON on standard
// input ({"tool", "input", "node", "call_id"}, and "output", "is_error"
// for post). A pre hook's status other than 0, or its timeout, denies the
// call and the model is told why; a post hook never changes or blocks the
// result. A failure is an EventToolHook, a log line and a line of
// <node>/tool_hooks.log, quoting the first 300 bytes of its standard
// error, escaped. The hooks run in the engine's tool-call middleware
// (ToolHooks, which config.OpenPipeline registers when allow_shell is
// on); a stage whose engine lacks it fails rather than run unhooked.
//
// # Manager loops
//
// A stack.manager_loop stage (attractor 4.11) runs its child pipeline
// beside an observer, through the Runner's Executor. Every
// manager.poll_interval (through the Clock) the observer copies the child's
// progress into the parent's context: stack.child.status (running,
// completed, failed, or stopped), stack.child.outcome, .active_stage,
// .completed (stages finished) and .retries; then it evaluates
// manager.stop_condition, and with steer in manager.actions writes the
// steer as steer.md into the child's active stage directory and hands it to
// the child, whose run puts it in its context as stack.steer before its next
// stage; the next codergen stage reads it into its preamble and deletes it,
// so one stage reads it (a new steer replaces one not yet read; a steer cut
// at 16 KiB warns). The child's run directory is
// <manager's stage dir>/cycle-<n>, its n-th run, under visit-<v>/ on the
// node's v-th visit; manager.json beside the runs keeps the polls spent, and
// a resumed parent takes the child's progress from its checkpoint, so that
// neither counts from 0 again. Three differences from attractor 4.11: the
// manager waits between polls whatever manager.actions says; the stop
// condition is evaluated before the steer, not after; and a bare outcome=
// in it reads the parent's last stage outcome (the child's is
// context.stack.child.outcome). A Temporal workflow does not
// run manager loops (temporal's durable rule).
//
// # Loops that restart
//
// An edge with loop_restart=true (attractor 2.7, 3.2 step 7) ends the
// run's current loop and starts a fresh one at its target, in the same run
// directory: visits, retry counts, outcomes, goal-gate retries and the
// context go back to the run's start (its goal); the new loop's stage files
// go to restart-<n>/<node>/. The path, the usage and the budgets run on over
// the loops; the context's log and an EventLoopRestarted event say where
// each loop began. The journal's restart record makes a resume exact. At most
// max_restarts restarts (Limits.MaxRestarts, [pipeline] max_restarts, when
// set, else the graph's attribute, default 5); past them the run fails, naming the
// key. Full-fidelity threads (threads/) carry over: the loops share the
// run's conversations.
//
// # The run directory
//
// journal.jsonl (one line per node finished since checkpoint.json was
// written, fsynced before the run goes on: the same cost at any graph
// size), checkpoint.json (the whole state with the spec's field names,
// 5.3: written atomically at the start, when the journal has grown past
// it, and when the run stops; a version 1 file, morph's earlier names,
// is still read), manifest.json, pipeline.dot (the source, for resume and
// render), a directory per stage that did work, <node>/ (node_<node>/ for
// a node named artifacts or threads), holding the files the stage wrote
// (Execution.WriteStageFile: an agent's prompt.md and response.md, a
// tool's command.sh or tool_call.json and output.txt, a plugin stage's
// plugin.json, a human gate's, a manager's manager.md beside its child's
// cycle-N/ runs) and its status.json (Appendix C: "outcome"
// and the rest of the stage's result), artifacts/ (an agent's or tool's
// whole output as <node>.output), and threads/ (full-fidelity
// conversations). Stages that write no file (start, exit, a pass-through
// diamond, parallel, fan-in) get no directory: their outcome is in the
// journal and checkpoint.
// checkpoint.json alone (jq) may be a few records behind a running run;
// LoadCheckpoint folds the journal into it and is current. A torn last
// journal line (a crash mid-write) is left out; a damaged line before
// the last is ErrJournalCorrupt. A resume starts at the checkpoint's next
// node; a node that was running when the process died runs again.
// LoadCheckpoint, LoadManifest and LoadThreads
// read what a resume needs of it (SaveCheckpoint, SaveManifest and
// SaveThreads write it), for a host that moves a run between directories.
package pipeline
