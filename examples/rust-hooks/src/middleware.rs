//! The plugin's session middleware (abi/SPEC.md section 10): an audit log, a
//! guard on tool calls and a redaction of tool outputs.

use morph_pdk::types::{
    Action, AfterRunInput, AfterToolCallInput, AfterToolCallOutput, BeforeRunInput, BeforeRunOutput,
    BeforeToolCallInput, BeforeToolCallOutput, Object, Observation, TurnEnd, TurnStart,
};

// The audit log: one `rust-audit: ...` line in the host's log per event.

/// on_turn_start: the turn's input, redacted and clipped.
pub fn on_turn_start(ev: TurnStart) {
    morph_pdk::info!(
        "rust-audit: turn {} start session {} input {:?}",
        ev.turn,
        ev.session_id,
        clip(&redact(&ev.input), 80)
    );
}

/// on_action: the tool asked for and its parameter names (not their values,
/// which may be large or private).
pub fn on_action(ev: Action) {
    morph_pdk::info!("rust-audit: turn {} action {} step {} params {}", ev.turn, ev.tool, ev.step, keys(&ev.input));
}

/// on_observation: whether the call succeeded, and its size.
pub fn on_observation(ev: Observation) {
    let status = if ev.is_error { "error" } else { "ok" };
    morph_pdk::info!(
        "rust-audit: turn {} observation {} step {} {status}, {} bytes",
        ev.turn,
        ev.tool,
        ev.step,
        ev.observation.len()
    );
}

/// on_final: how the turn ended.
pub fn on_final(ev: TurnEnd) {
    let mut line = format!(
        "rust-audit: turn {} final {} after {} steps, {} tokens",
        ev.turn,
        ev.status,
        ev.step,
        ev.turn_usage.total()
    );
    if let Some(err) = ev.error.filter(|e| !e.is_empty()) {
        line += &format!(": {}", clip(&err, 200));
    }
    morph_pdk::log(morph_pdk::Level::Info, &line);
}

/// after_run: the turn's account and its final output, clipped.
pub fn after_run(ev: AfterRunInput) {
    let output = ev.r#final.map(|f| f.output.to_string()).unwrap_or_else(|| "none".into());
    morph_pdk::info!(
        "rust-audit: turn {} after_run {} in {} steps, {} tokens, ${:.6}, output {}",
        ev.turn,
        ev.status,
        ev.steps,
        ev.usage.total(),
        ev.usage.cost,
        clip(&redact(&output), 80)
    );
}

/// before_run narrows nothing: every tool stays offered. The prompt is left
/// as it is, unless the config value `prompt_marker` is set: then that line
/// is appended to it, which shows where middleware runs in the turn.
pub fn before_run(input: BeforeRunInput) -> BeforeRunOutput {
    morph_pdk::info!(
        "rust-audit: turn {} before_run, {} tools offered ({}), model {}",
        input.turn,
        input.tools.len(),
        input.tools.join(", "),
        input.model.as_deref().unwrap_or("default")
    );
    match morph_pdk::config("prompt_marker").filter(|m| !m.trim().is_empty()) {
        Some(marker) => {
            BeforeRunOutput { system_prompt: Some(format!("{}\n{marker}\n", input.system_prompt)), tools: None }
        }
        None => BeforeRunOutput::default(), // unchanged
    }
}

// The guard: before_tool_call denies the tools the config value
// "deny_tools" names (comma-separated).

/// The tools the config value `deny_tools` names.
pub fn denied_tools(config: Option<String>) -> Vec<String> {
    config.unwrap_or_default().split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()
}

/// before_tool_call: a denial for a denied tool; every other call passes
/// unchanged (the zero output).
pub fn before_tool_call(input: BeforeToolCallInput) -> BeforeToolCallOutput {
    if denied_tools(morph_pdk::config("deny_tools")).contains(&input.tool) {
        let reason = format!("tool {} is denied by policy (rust-hooks deny_tools)", input.tool);
        morph_pdk::info!("rust-audit: turn {} denied {} at step {}", input.turn, input.tool, input.step);
        return BeforeToolCallOutput::deny(reason);
    }
    BeforeToolCallOutput::default()
}

// The redaction: after_tool_call hides API-key-like tokens in tool outputs,
// failed ones included, before the model sees them.

/// What [`redact`] puts in place of a key.
pub const REDACTED: &str = "[redacted]";

/// Replaces strings that look like API keys with [`REDACTED`]: "sk-" (after
/// no letter, digit or underscore) and at least 16 more letters, digits, '-'
/// or '_', like OpenAI's sk-... and sk-proj-... keys.
pub fn redact(s: &str) -> String {
    if !s.contains("sk-") {
        return s.to_string(); // the common case
    }
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let (mut last, mut i) = (0, 0);
    while i < b.len() {
        if b[i..].starts_with(b"sk-") && (i == 0 || !is_word(b[i - 1])) {
            let mut j = i + 3;
            while j < b.len() && (is_word(b[j]) || b[j] == b'-') {
                j += 1;
            }
            if j - (i + 3) >= 16 {
                out.push_str(&s[last..i]);
                out.push_str(REDACTED);
                last = j;
                i = j;
                continue;
            }
        }
        i += 1;
    }
    out.push_str(&s[last..]);
    out
}

fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// after_tool_call: the output with its keys redacted, or unchanged.
pub fn after_tool_call(input: AfterToolCallInput) -> AfterToolCallOutput {
    let out = redact(&input.output);
    if out == input.output {
        return AfterToolCallOutput::default(); // unchanged
    }
    morph_pdk::info!("rust-audit: turn {} redacted the output of {} at step {}", input.turn, input.tool, input.step);
    AfterToolCallOutput::replace(out)
}

/// A tool call's parameter names, sorted: "[a b]".
fn keys(m: &Object) -> String {
    let names: Vec<&str> = m.keys().map(String::as_str).collect(); // a BTreeMap: sorted
    format!("[{}]", names.join(" "))
}

/// s shortened to at most n bytes, on a character boundary, marking the cut.
pub fn clip(s: &str, n: usize) -> String {
    if s.len() <= n {
        return s.to_string();
    }
    let mut end = n;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use morph_pdk::serde_json::json;
    use morph_pdk::testing;

    #[test]
    fn redaction() {
        let key = "sk-abcdefghijklmnop1234";
        for (input, want) in [
            ("no keys here", "no keys here"),
            (key, REDACTED),
            ("The key: sk-abcdefghijklmnop1234.", "The key: [redacted]."),
            ("a sk-proj-AAAA_BBBB-CCCC-DDDD b sk-short c", "a [redacted] b sk-short c"),
            ("task-abcdefghijklmnopqrstu", "task-abcdefghijklmnopqrstu"),
            ("ünï sk-abcdefghijklmnop1234 ünï", "ünï [redacted] ünï"),
        ] {
            assert_eq!(redact(input), want, "{input}");
        }
        let out = after_tool_call(AfterToolCallInput {
            tool: "reverse".into(),
            output: format!("k={key}"),
            ..Default::default()
        });
        assert_eq!(out.output.as_deref(), Some("k=[redacted]"));
        assert_eq!(after_tool_call(AfterToolCallInput { output: "clean".into(), ..Default::default() }).output, None);
    }

    #[test]
    fn guard() {
        testing::set_config("deny_tools", " calc, rm ,,");
        assert_eq!(denied_tools(morph_pdk::config("deny_tools")), ["calc", "rm"]);
        let out = before_tool_call(BeforeToolCallInput { tool: "calc".into(), ..Default::default() });
        assert!(out.deny);
        assert_eq!(out.reason.as_deref(), Some("tool calc is denied by policy (rust-hooks deny_tools)"));
        assert_eq!(
            before_tool_call(BeforeToolCallInput { tool: "reverse".into(), ..Default::default() }),
            BeforeToolCallOutput::default()
        );
        testing::clear_config();
        assert!(!before_tool_call(BeforeToolCallInput { tool: "calc".into(), ..Default::default() }).deny);
    }

    #[test]
    fn before_run_changes_nothing_without_a_marker() {
        testing::clear_config();
        let input = BeforeRunInput {
            turn: 1,
            system_prompt: "P".into(),
            tools: vec!["a".into(), "b".into()],
            ..Default::default()
        };
        assert_eq!(before_run(input.clone()), BeforeRunOutput::default());
        testing::set_config("prompt_marker", "(checked by rust-hooks)");
        assert_eq!(before_run(input).system_prompt.as_deref(), Some("P\n(checked by rust-hooks)\n"));
        testing::clear_config();
    }

    #[test]
    fn audit_lines() {
        testing::take_logs();
        on_turn_start(TurnStart {
            session_id: "s1".into(),
            turn: 1,
            input: "use sk-abcdefghijklmnop1234".into(),
            history: None,
        });
        on_action(Action {
            turn: 1,
            step: 2,
            tool: "reverse".into(),
            input: json!({"text": "x", "a": 1}).as_object().unwrap().clone(),
            ..Default::default()
        });
        on_observation(Observation {
            turn: 1,
            step: 2,
            tool: "reverse".into(),
            observation: "abc".into(),
            is_error: true,
            ..Default::default()
        });
        on_final(TurnEnd {
            turn: 1,
            step: 3,
            status: "error".into(),
            error: Some("boom".into()),
            ..Default::default()
        });
        let lines: Vec<String> = testing::take_logs().into_iter().map(|(_, m)| m).collect();
        assert_eq!(
            lines,
            [
                r#"rust-audit: turn 1 start session s1 input "use [redacted]""#,
                "rust-audit: turn 1 action reverse step 2 params [a text]",
                "rust-audit: turn 1 observation reverse step 2 error, 3 bytes",
                "rust-audit: turn 1 final error after 3 steps, 0 tokens: boom",
            ]
        );
    }

    #[test]
    fn clipping() {
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(clip("abcd", 3), "abc...");
        assert_eq!(clip("aéb", 2), "a...");
    }
}
