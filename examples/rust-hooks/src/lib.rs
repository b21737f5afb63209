//! rust-hooks: an example morph plugin written in Rust with the PDK
//! (`guests/rust`, crate `morph-pdk`). It implements every hook of ABI v1
//! and serves two tools:
//!
//! - `build_prompt` appends a "## Rust house rules (from rust-hooks plugin)"
//!   section to the engine's default prompt, with the rule from the config
//!   value `rule`;
//! - `build_params` sets `temperature` 0.3 and `max_tokens` 400;
//! - `on_tool_success` counts successful tool calls per tool and logs each;
//! - `fallback_final` answers an "incomplete" final carrying the counts;
//! - the session middleware ([`middleware`]): an audit log (`on_turn_start`,
//!   `on_action`, `on_observation`, `on_final`, `after_run`, and
//!   `before_run`, each one line `rust-audit: ...` in the host's log), a
//!   `before_run` that narrows nothing and leaves the prompt as it is unless
//!   the config value `prompt_marker` asks for a marker line, a guard
//!   (`before_tool_call` denies the tools of the config value `deny_tools`)
//!   and a redaction (`after_tool_call` replaces `sk-...` API keys in tool
//!   outputs with `[redacted]`);
//! - the tools `reverse` and `char_stats` ([`tools`]).
//!
//! Build (from this directory):
//!
//! ```text
//! RUSTC=/usr/bin/rustc /usr/bin/cargo build --release --target wasm32-unknown-unknown
//! ```
//!
//! which writes `target/wasm32-unknown-unknown/release/rust_hooks.wasm`.

pub mod middleware;
pub mod tools;

use std::cell::RefCell;
use std::collections::BTreeMap;

use morph_pdk::serde_json::json;
use morph_pdk::types::{FallbackInput, Final, ParamsInput, ParamsOutput, PromptInput, PromptOutput, ToolSuccessInput};

morph_pdk::plugin! {
    name: "rust-hooks",
    version: env!("CARGO_PKG_VERSION"),
    capabilities: ["log", "config"],
    // The engine hooks.
    build_prompt: build_prompt,
    build_params: build_params,
    on_tool_success: on_tool_success,
    fallback_final: fallback_final,
    // The session middleware.
    on_turn_start: middleware::on_turn_start,
    before_run: middleware::before_run,
    on_action: middleware::on_action,
    before_tool_call: middleware::before_tool_call,
    after_tool_call: middleware::after_tool_call,
    on_observation: middleware::on_observation,
    on_final: middleware::on_final,
    after_run: middleware::after_run,
    tools: [
        { name: "reverse", description: tools::REVERSE_DESCRIPTION, schema: tools::TEXT_SCHEMA, run: tools::reverse },
        { name: "char_stats", description: tools::CHAR_STATS_DESCRIPTION, schema: tools::TEXT_SCHEMA, run: tools::char_stats },
    ],
    destroy: on_destroy,
}

/// The heading build_prompt appends to the default prompt.
pub const PROMPT_SECTION: &str = "## Rust house rules (from rust-hooks plugin)";

/// The house rule when the config has no `rule`.
pub const DEFAULT_RULE: &str = "Give every number with its unit, and say which tool produced it.";

fn build_prompt(input: PromptInput) -> PromptOutput {
    let rule = morph_pdk::config("rule").filter(|r| !r.trim().is_empty()).unwrap_or_else(|| DEFAULT_RULE.to_string());
    PromptOutput { system_prompt: format!("{}\n{PROMPT_SECTION}\n- {rule}\n", input.default_prompt) }
}

/// The model parameters of build_params.
pub const TEMPERATURE: f64 = 0.3;
/// The token limit of build_params.
pub const MAX_TOKENS: u32 = 400;

fn build_params(_: ParamsInput) -> ParamsOutput {
    let parameters = json!({"temperature": TEMPERATURE, "max_tokens": MAX_TOKENS});
    ParamsOutput { parameters: parameters.as_object().cloned().unwrap_or_default() }
}

thread_local! {
    /// Tool successes per tool, in this instance's memory. The host may run
    /// several instances and replaces one after a fault: a best-effort tally.
    static SUCCESSES: RefCell<BTreeMap<String, u64>> = RefCell::new(BTreeMap::new());
}

fn on_tool_success(input: ToolSuccessInput) {
    let n = SUCCESSES.with(|s| {
        let mut s = s.borrow_mut();
        let n = s.entry(input.tool.clone()).or_insert(0);
        *n += 1;
        *n
    });
    morph_pdk::info!("rust-hooks: tool {} succeeded ({n} so far)", input.tool);
}

fn total_successes() -> u64 {
    SUCCESSES.with(|s| s.borrow().values().sum())
}

fn fallback_final(input: FallbackInput) -> Final {
    let by_tool = SUCCESSES.with(|s| s.borrow().clone());
    Final {
        thought: "The model did not reach a usable final answer; the rust-hooks plugin reports what the run achieved."
            .into(),
        output: json!({
            "status": "incomplete",
            "reason": input.reason,
            "steps": input.steps,
            "tool_successes": total_successes(),
            "by_tool": by_tool,
        }),
        plan: None,
    }
}

fn on_destroy() {
    morph_pdk::debug!("rust-hooks: instance closed after {} tool successes", total_successes());
}

#[cfg(test)]
mod tests {
    use morph_pdk::serde_json::{self, json, Value};
    use morph_pdk::testing::{self, call_str};

    fn call(export: testing::Export, input: Value) -> Value {
        let out = call_str(export, &input.to_string()).unwrap();
        if out.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&out).unwrap()
        }
    }

    #[test]
    fn manifest_lists_every_hook() {
        let m = call(super::morph_describe, Value::Null);
        // Every hook of a session plugin: a pipeline stage handler is another kind of plugin.
        let hooks: Vec<&str> =
            morph_pdk::registry::HOOKS.iter().map(|(h, _)| *h).filter(|h| *h != "handle_stage").collect();
        assert_eq!(m["name"], "rust-hooks");
        assert_eq!(m["hooks"], json!(hooks));
        assert_eq!(m["tools"][0]["name"], "reverse");
        assert_eq!(m["tools"][1]["name"], "char_stats");
        assert_eq!(m["capabilities"], json!(["log", "config"]));
    }

    #[test]
    fn prompt_and_params() {
        testing::clear_config();
        let out = call(super::morph_build_prompt, json!({"task": "t", "tools": [], "default_prompt": "D"}));
        assert_eq!(out["system_prompt"], format!("D\n{}\n- {}\n", super::PROMPT_SECTION, super::DEFAULT_RULE));
        testing::set_config("rule", "Be terse.");
        let out = call(super::morph_build_prompt, json!({"default_prompt": "D"}));
        assert_eq!(out["system_prompt"], format!("D\n{}\n- Be terse.\n", super::PROMPT_SECTION));
        let out = call(super::morph_build_params, json!({"task": "t", "options": {}}));
        assert_eq!(out, json!({"parameters": {"temperature": 0.3, "max_tokens": 400}}));
    }

    #[test]
    fn successes_reach_the_fallback() {
        for tool in ["reverse", "char_stats", "reverse"] {
            assert_eq!(call(super::morph_on_tool_success, json!({"tool": tool, "step": 1})), Value::Null);
        }
        let logs = testing::take_logs();
        assert_eq!(logs.last().unwrap().1, "rust-hooks: tool reverse succeeded (2 so far)");
        let f = call(super::morph_fallback_final, json!({"task": "t", "reason": "why", "steps": 4, "usage": {}}));
        assert_eq!(
            f["output"],
            json!({"status": "incomplete", "reason": "why", "steps": 4, "tool_successes": 3, "by_tool": {"char_stats": 1, "reverse": 2}})
        );
        assert!(f["thought"].as_str().unwrap().contains("rust-hooks"));
    }
}
