//! The payloads of ABI v1, mirroring the Go types of package `abi`
//! (`abi.go`, `hooks.go`, `middleware.go`, `v1.go`, `stage.go`) and the JSON
//! Schemas of `abi/schema/`. Only with the `serde` feature.
//!
//! The payload structs are generated from the Go types (`payloads.rs`, by
//! `abi/internal/gen`: `make generate`), their docs from the schemas'
//! descriptions; this file holds what is not mechanical: the helpers, the
//! constants, [`PlanStep`] with its own `Deserialize`, and the HTTP types of
//! the host function. How the Go types map:
//!
//! - Field names are the wire's `snake_case` names; the Go `final` field is
//!   `r#final` (a Rust keyword).
//! - Go `int` is `i64`, `float64` is `f64`, `any` is [`Value`],
//!   `map[string]any` is [`Object`], `json.RawMessage` is [`Value`].
//! - A field the Go type marks `omitempty` is an `Option` (absent when
//!   `None`), except booleans, which are `bool` left out when false, and
//!   [`ToolCallInput::call_id`] and [`ToolCallOutput::images`], left out
//!   when empty.
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

include!("payloads.rs");

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

/// Turn statuses, as in [`TurnEnd::status`] and [`AfterRunInput::status`].
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

impl BeforeToolCallOutput {
    /// A denial with its reason.
    pub fn deny(reason: impl Into<String>) -> BeforeToolCallOutput {
        BeforeToolCallOutput { input: None, deny: true, reason: Some(reason.into()) }
    }
}

impl AfterToolCallOutput {
    /// Replaces the output with `output`.
    pub fn replace(output: impl Into<String>) -> AfterToolCallOutput {
        AfterToolCallOutput { output: Some(output.into()) }
    }
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
        let f: TurnEnd = serde_json::from_str(r#"{"final":"{\"output\":2}","status":"final"}"#).unwrap();
        assert_eq!(f.r#final.as_deref(), Some(r#"{"output":2}"#));
    }

    #[test]
    fn usage_total() {
        assert_eq!(Usage { input_tokens: 3, output_tokens: 4, ..Default::default() }.total(), 7);
        assert_eq!(Usage { input_tokens: 3, output_tokens: 4, total_tokens: 9, ..Default::default() }.total(), 9);
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
