//! The payloads of ABI v1, mirroring the Go types of package `abi`
//! (`abi.go`, `hooks.go`, `middleware.go`, `v1.go`) and the JSON Schemas of
//! `abi/schema/`. Only with the `serde` feature.
//!
//! How the Go types map:
//!
//! - Field names are the wire's `snake_case` names; the Go `final` field is
//!   `r#final` (a Rust keyword).
//! - Go `int` is `i64`, `float64` is `f64`, `any` is [`Value`],
//!   `map[string]any` is [`Object`], `json.RawMessage` is [`Value`].
//! - A field the Go type marks `omitempty` is an `Option` (absent when
//!   `None`), except booleans, which are `bool` left out when false.
//! - Decoding is lenient, as the ABI requires: unknown fields are ignored
//!   (ABI v1 only ever adds fields), a missing field is its zero value, and a
//!   list or map that arrives as `null` is empty.
//!
//! Every type is `Default`, and the default of a mutating hook's output
//! changes nothing.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// A JSON object: tool params, model parameters.
pub type Object = Map<String, Value>;

/// Reads null as the default (empty) value.
fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The token and cost account of one model call or of a whole run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Usage {
    /// Tokens of the model's input.
    pub input_tokens: i64,
    /// Tokens of the model's output.
    pub output_tokens: i64,
    /// Total tokens; 0 when the model reported none (see [`Usage::total`]).
    pub total_tokens: i64,
    /// Cost in USD.
    pub cost: f64,
}

impl Usage {
    /// `total_tokens`, or input + output when the model reported no total.
    pub fn total(&self) -> i64 {
        if self.total_tokens == 0 {
            self.input_tokens + self.output_tokens
        } else {
            self.total_tokens
        }
    }
}

/// Describes a tool to the model and to prompt builders.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ToolSpec {
    /// The tool's name, as the model calls it.
    pub name: String,
    /// What the tool does.
    pub description: String,
    /// The JSON Schema of the tool's params object.
    pub parameters: Value,
}

/// The per-run settings a params builder receives.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunOptions {
    /// The run's model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The most steps of the run; absent: the engine default (15).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<i64>,
    /// Retries of a reply that does not parse; absent: the default (2); < 0: none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parse_retries: Option<i64>,
    /// The run's token budget; absent: unlimited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_budget: Option<i64>,
    /// Base model parameters, which a params builder's output overrides key by key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Object>,
}

/// An agent's final answer: the output of `fallback_final`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Final {
    /// The reasoning behind the answer.
    pub thought: String,
    /// The answer: any JSON value.
    pub output: Value,
    /// The agent's plan, if any (the engine fills it from the run's last plan).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<Plan>,
}

/// The agent's plan, as the model last stated it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Plan {
    /// The reasoning behind the plan.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thought: Option<String>,
    /// The plan in a sentence or two.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The plan's steps, in order.
    #[serde(deserialize_with = "nullable")]
    pub steps: Vec<PlanStep>,
    /// What could go wrong.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub risks: Option<Vec<String>>,
    /// Open questions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub questions: Option<Vec<String>>,
    /// How the task will be, or was, completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion: Option<String>,
}

/// Plan step statuses.
pub mod step_status {
    /// Not started.
    pub const PENDING: &str = "pending";
    /// Under way.
    pub const IN_PROGRESS: &str = "in_progress";
    /// Done.
    pub const COMPLETED: &str = "completed";
}

/// One step of a [`Plan`]. On the wire it is an object `{"step": ...,
/// "status": ...}` or a bare string, a pending step; a missing or empty
/// status reads as pending, as in Go.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanStep {
    /// What the step does.
    pub step: String,
    /// One of [`step_status`].
    #[serde(skip_serializing_if = "String::is_empty")]
    pub status: String,
}

impl Default for PlanStep {
    fn default() -> PlanStep {
        PlanStep { step: String::new(), status: step_status::PENDING.to_string() }
    }
}

impl<'de> Deserialize<'de> for PlanStep {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<PlanStep, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Wire {
            Text(String),
            Object {
                #[serde(default)]
                step: String,
                #[serde(default)]
                status: Option<String>,
            },
        }
        let (step, status) = match Wire::deserialize(d)? {
            Wire::Text(step) => (step, None),
            Wire::Object { step, status } => (step, status),
        };
        let status = status.filter(|s| !s.is_empty()).unwrap_or_else(|| step_status::PENDING.to_string());
        Ok(PlanStep { step, status })
    }
}

// The engine hooks.

/// The input of `build_prompt`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PromptInput {
    /// The run's task.
    pub task: String,
    /// The tools available to the run.
    #[serde(deserialize_with = "nullable")]
    pub tools: Vec<ToolSpec>,
    /// The system prompt the engine would use; builders may extend it.
    pub default_prompt: String,
}

/// The output of `build_prompt`. An empty `system_prompt` counts as a
/// failure: the engine uses its default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PromptOutput {
    /// The run's system prompt.
    pub system_prompt: String,
}

/// The input of `build_params`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ParamsInput {
    /// The run's task.
    pub task: String,
    /// The run's options, with the base model parameters.
    pub options: RunOptions,
}

/// The output of `build_params`: model parameters sent with every model
/// request of the run, overriding the base parameters key by key.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ParamsOutput {
    /// temperature, top_p, max_tokens, ...
    #[serde(deserialize_with = "nullable")]
    pub parameters: Object,
}

/// The input of `on_tool_success`: a tool was found and returned no error.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ToolSuccessInput {
    /// The tool's name.
    pub tool: String,
    /// The run's step that called it.
    pub step: i64,
    /// The params it was called with.
    #[serde(deserialize_with = "nullable")]
    pub params: Object,
    /// Its result, as the model sees it.
    pub observation: String,
}

/// The input of `fallback_final`: the forced conclusion failed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FallbackInput {
    /// The run's task.
    pub task: String,
    /// Why the forced conclusion failed.
    pub reason: String,
    /// The steps the run took.
    pub steps: i64,
    /// The run's account so far.
    pub usage: Usage,
}

/// What `morph_describe` answers. [`crate::plugin!`] writes it; the type is
/// here for tests and tools that read manifests.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Manifest {
    /// The plugin's name.
    pub name: String,
    /// The plugin's version.
    pub version: String,
    /// Always 1.
    pub abi_version: i64,
    /// The hooks implemented.
    #[serde(deserialize_with = "nullable")]
    pub hooks: Vec<String>,
    /// The tools served by `morph_call_tool`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<ToolSpec>>,
    /// Capabilities asked of the host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Vec<String>>,
    /// Asks for the session history in middleware payloads.
    #[serde(skip_serializing_if = "is_false")]
    pub history: bool,
    /// Plugins that must be loaded before this one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requires: Option<Vec<String>>,
}

/// The input of `morph_call_tool`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ToolCallInput {
    /// The tool to run.
    pub tool: String,
    /// Its params, validated against its schema by the host.
    #[serde(deserialize_with = "nullable")]
    pub params: Object,
    /// The call's ID, the same on every attempt a host makes of this call
    /// (a durable worker that died mid-call, SPEC.md): a tool whose effect
    /// must happen once records the IDs it served, atomically, and answers
    /// a repeated one as before. Empty from a host that sends none.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub call_id: String,
}

/// The output of `morph_call_tool`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ToolCallOutput {
    /// The observation the model sees.
    pub output: String,
    /// Images of the result, sent to the model with the observation when it
    /// takes images (`[llm] images`) and dropped otherwise: say in `output`
    /// what they show.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<Image>,
}

/// An image of a tool's result (SPEC section 4).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Image {
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    pub mime_type: String,
    /// The image's bytes, base64 (standard encoding, padded).
    pub data: String,
}

// Session middleware (SPEC section 10).

/// Turn statuses, as in [`TurnFinal::status`] and [`AfterRunInput::status`].
pub mod status {
    /// The model answered with a final.
    pub const FINAL: &str = "final";
    /// The forced conclusion gave the final.
    pub const FORCED_FINAL: &str = "forced_final";
    /// The fallback final was used.
    pub const FALLBACK: &str = "fallback";
    /// The turn failed.
    pub const ERROR: &str = "error";
    /// The context ended the turn.
    pub const CANCELED: &str = "canceled";
}

/// One message of a session's history.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Message {
    /// "user" or "assistant".
    pub role: String,
    /// The message's text.
    pub content: String,
}

/// The input of `on_turn_start`: a turn's input was recorded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TurnStart {
    /// The session.
    pub session_id: String,
    /// The turn, from 1.
    pub turn: i64,
    /// What the user asked.
    pub input: String,
    /// The history before this turn; only when the manifest asks for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<Vec<Message>>,
}

/// The input of `on_action`: the model asked for a tool, which has not run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Action {
    /// The session.
    pub session_id: String,
    /// The turn, from 1.
    pub turn: i64,
    /// The step, from 1.
    pub step: i64,
    /// The tool asked for.
    pub tool: String,
    /// The model's reasoning, when it gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thought: Option<String>,
    /// The params the model gave.
    #[serde(deserialize_with = "nullable")]
    pub input: Object,
    /// The history so far; only when the manifest asks for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<Vec<Message>>,
}

/// The input of `on_observation`: a tool's result was written back.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Observation {
    /// The session.
    pub session_id: String,
    /// The turn, from 1.
    pub turn: i64,
    /// The step, from 1.
    pub step: i64,
    /// The tool.
    pub tool: String,
    /// What the model sees.
    pub observation: String,
    /// The observation reports an error (unknown tool, denied, failed).
    #[serde(skip_serializing_if = "is_false")]
    pub is_error: bool,
    /// The history so far; only when the manifest asks for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<Vec<Message>>,
}

/// The input of `on_final`: a turn ended, on whichever path.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TurnFinal {
    /// The session.
    pub session_id: String,
    /// The turn, from 1.
    pub turn: i64,
    /// The steps the turn took.
    pub step: i64,
    /// The final payload as JSON text; absent when the turn had none.
    #[serde(rename = "final", skip_serializing_if = "Option::is_none")]
    pub r#final: Option<String>,
    /// One of [`status`].
    pub status: String,
    /// Why the turn failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The last model call's usage.
    pub step_usage: Usage,
    /// The whole turn's usage.
    pub turn_usage: Usage,
}

/// The input of `before_run`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BeforeRunInput {
    /// The session.
    pub session_id: String,
    /// The turn, from 1.
    pub turn: i64,
    /// The system prompt as the previous hooks left it.
    pub system_prompt: String,
    /// The names of the tools offered.
    #[serde(deserialize_with = "nullable")]
    pub tools: Vec<String>,
    /// The turn's model, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// The output of `before_run`; the default changes nothing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BeforeRunOutput {
    /// The new system prompt; `None` (or empty): unchanged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// The tools to offer, a subset of the input's; `None`: unchanged,
    /// `Some(vec![])`: none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
}

/// The input of `before_tool_call`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BeforeToolCallInput {
    /// The session.
    pub session_id: String,
    /// The turn, from 1.
    pub turn: i64,
    /// The step, from 1.
    pub step: i64,
    /// The tool about to run.
    pub tool: String,
    /// Its params as rewritten so far.
    #[serde(deserialize_with = "nullable")]
    pub input: Object,
}

/// The output of `before_tool_call`; the default lets the call run unchanged.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BeforeToolCallOutput {
    /// The params to use instead, as a whole; `None`: unchanged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<Object>,
    /// Denies the call.
    #[serde(skip_serializing_if = "is_false")]
    pub deny: bool,
    /// Why, shown to the model as `Tool call denied: <reason>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl BeforeToolCallOutput {
    /// A denial with its reason.
    pub fn deny(reason: impl Into<String>) -> BeforeToolCallOutput {
        BeforeToolCallOutput { input: None, deny: true, reason: Some(reason.into()) }
    }
}

/// The input of `after_tool_call`: a tool returned (or failed, `is_error`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AfterToolCallInput {
    /// The session.
    pub session_id: String,
    /// The turn, from 1.
    pub turn: i64,
    /// The step, from 1.
    pub step: i64,
    /// The tool.
    pub tool: String,
    /// The params it ran with.
    #[serde(deserialize_with = "nullable")]
    pub input: Object,
    /// Its output, or the error text, as rewritten so far.
    pub output: String,
    /// The call failed.
    #[serde(skip_serializing_if = "is_false")]
    pub is_error: bool,
}

/// The output of `after_tool_call`; the default changes nothing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AfterToolCallOutput {
    /// The output to use instead (`Some("")` included); `None`: unchanged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

impl AfterToolCallOutput {
    /// Replaces the output with `output`.
    pub fn replace(output: impl Into<String>) -> AfterToolCallOutput {
        AfterToolCallOutput { output: Some(output.into()) }
    }
}

/// The input of `after_run`: a turn ended, after `on_final`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AfterRunInput {
    /// The session.
    pub session_id: String,
    /// The turn, from 1.
    pub turn: i64,
    /// The final, decoded; absent when the turn had none.
    #[serde(rename = "final", skip_serializing_if = "Option::is_none")]
    pub r#final: Option<Final>,
    /// One of [`status`].
    pub status: String,
    /// Why the turn failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The whole turn's usage.
    pub usage: Usage,
    /// The steps the turn took.
    pub steps: i64,
}

/// The statuses of a [`StageOutcome`] (SPEC section 11).
pub mod stage_status {
    /// The stage did its work.
    pub const SUCCESS: &str = "success";
    /// The stage failed; `failure_reason` says why.
    pub const FAIL: &str = "fail";
    /// Done in part; counts as done for goal gates.
    pub const PARTIAL_SUCCESS: &str = "partial_success";
    /// Run the stage again, as the node's retry policy allows.
    pub const RETRY: &str = "retry";
    /// Nothing to do.
    pub const SKIPPED: &str = "skipped";
}

/// The input of `handle_stage`: a pipeline node of type `wasm:<plugin>` is
/// to run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StageInput {
    /// The node's id in the pipeline's DOT.
    pub node_id: String,
    /// Every attribute of the node, as text: the handler's own settings.
    #[serde(deserialize_with = "nullable")]
    pub attrs: BTreeMap<String, String>,
    /// The pipeline's goal; empty when it has none.
    pub goal: String,
    /// A copy of the run's context.
    #[serde(deserialize_with = "nullable")]
    pub context: Object,
    /// The outcome of the stage that led here; absent for the first stage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous: Option<StageOutcome>,
}

/// The output of `handle_stage`: how the stage went. `status` is required:
/// the default's empty status is refused by the host, which fails the stage.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StageOutcome {
    /// One of [`stage_status`].
    pub status: String,
    /// A routing hint: the outgoing edge of this label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preferred_label: Option<String>,
    /// A routing hint: node ids, in order of preference.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suggested_next_ids: Option<Vec<String>>,
    /// Keys to set in the run's context after the stage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_updates: Option<Object>,
    /// A note for the run's log and summary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    /// Why the stage failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
}

impl StageOutcome {
    /// A successful stage.
    pub fn success() -> StageOutcome {
        StageOutcome { status: stage_status::SUCCESS.into(), ..Default::default() }
    }

    /// A failed stage, with its reason.
    pub fn fail(reason: impl Into<String>) -> StageOutcome {
        StageOutcome { status: stage_status::FAIL.into(), failure_reason: Some(reason.into()), ..Default::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lenient_decoding() {
        // Unknown fields, missing fields, nulls for lists and maps.
        let p: PromptInput = serde_json::from_str(r#"{"task":"t","tools":null,"added_later":{"x":1}}"#).unwrap();
        assert_eq!(p, PromptInput { task: "t".into(), ..Default::default() });
        let a: Action = serde_json::from_str(r#"{"tool":"x","input":null}"#).unwrap();
        assert!(a.input.is_empty() && a.thought.is_none() && a.history.is_none());
        let o: ParamsOutput = serde_json::from_str(r#"{"parameters":null}"#).unwrap();
        assert!(o.parameters.is_empty());
    }

    #[test]
    fn plan_steps_both_forms() {
        let p: Plan = serde_json::from_str(
            r#"{"steps":["look",{"step":"do","status":"completed"},{"step":"wait","status":""}]}"#,
        )
        .unwrap();
        let st: Vec<(&str, &str)> = p.steps.iter().map(|s| (s.step.as_str(), s.status.as_str())).collect();
        assert_eq!(st, [("look", "pending"), ("do", "completed"), ("wait", "pending")]);
        assert_eq!(serde_json::to_value(&p.steps[0]).unwrap(), json!({"step":"look","status":"pending"}));
    }

    #[test]
    fn zero_outputs_change_nothing() {
        for v in [
            serde_json::to_string(&BeforeRunOutput::default()).unwrap(),
            serde_json::to_string(&BeforeToolCallOutput::default()).unwrap(),
            serde_json::to_string(&AfterToolCallOutput::default()).unwrap(),
        ] {
            assert_eq!(v, "{}");
        }
        assert_eq!(serde_json::to_string(&AfterToolCallOutput::replace("")).unwrap(), r#"{"output":""}"#);
        assert_eq!(serde_json::to_string(&BeforeToolCallOutput::deny("no")).unwrap(), r#"{"deny":true,"reason":"no"}"#);
        assert_eq!(serde_json::to_string(&StageOutcome::success()).unwrap(), r#"{"status":"success"}"#);
        assert_eq!(
            serde_json::to_string(&StageOutcome::fail("no marker")).unwrap(),
            r#"{"status":"fail","failure_reason":"no marker"}"#
        );
        let f: TurnFinal = serde_json::from_str(r#"{"final":"{\"output\":2}","status":"final"}"#).unwrap();
        assert_eq!(f.r#final.as_deref(), Some(r#"{"output":2}"#));
    }

    #[test]
    fn usage_total() {
        assert_eq!(Usage { input_tokens: 3, output_tokens: 4, ..Default::default() }.total(), 7);
        assert_eq!(Usage { input_tokens: 3, output_tokens: 4, total_tokens: 9, cost: 0.0 }.total(), 9);
    }
}

// Host functions (SPEC section 5).

/// What [`crate::http_request`] sends: one HTTP request, to a host the
/// plugin is allowed. Bodies are text in ABI v1.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HttpRequest {
    /// The method; absent: GET.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// The absolute http or https URL.
    pub url: String,
    /// Request headers, one value each.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// The body; absent: none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

/// What [`crate::http_request`] answers: the final response, after any
/// redirects. A 4xx or 5xx status is a response, not an error.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HttpResponse {
    /// The HTTP status code.
    pub status: i64,
    /// Response headers in canonical form, several values joined with ", ".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// The whole body as text; never truncated (a body over the host's limit
    /// is an error instead).
    pub body: String,
}

/// The input of `morph_instance_replaced`, an optional export of a plugin in
/// session isolation: the instance this call runs on is fresh, and the
/// session it now serves had state on an earlier instance that is gone
/// (SPEC.md). The output is empty.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct InstanceReplaced {
    /// The session's ID.
    pub session_id: String,
    /// Why its earlier instance is gone: one of [`replaced_reason`].
    pub reason: String,
}

/// The values of [`InstanceReplaced::reason`].
pub mod replaced_reason {
    /// The session made no call for the plugin's `session_idle`; its
    /// instance was released, then it called again.
    pub const IDLE_EXPIRED: &str = "idle_expired";
    /// The session's instance was discarded after a trap, a timeout or bad
    /// output.
    pub const DISCARDED: &str = "discarded";
    /// The session's earlier calls were served by another process (another
    /// Temporal worker, or this worker before it restarted).
    pub const MOVED: &str = "moved";
}
