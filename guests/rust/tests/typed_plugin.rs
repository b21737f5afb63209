//! plugin! with typed hooks and tools (the serde feature), called natively
//! through the exports it generates, exactly as the host calls them.
#![cfg(feature = "serde")]

use morph_pdk::serde_json::{self, json, Value};
use morph_pdk::testing::{self, call, call_str};
use morph_pdk::types::*;
use morph_pdk::{Error, Level};

fn build_prompt(input: PromptInput) -> PromptOutput {
    let names: Vec<&str> = input.tools.iter().map(|t| t.name.as_str()).collect();
    PromptOutput { system_prompt: format!("{}|{}|{}", input.default_prompt, input.task, names.join(",")) }
}

fn build_params(input: ParamsInput) -> Result<ParamsOutput, String> {
    let mut parameters = input.options.parameters.unwrap_or_default();
    parameters.insert("temperature".into(), json!(0.3));
    Ok(ParamsOutput { parameters })
}

fn on_tool_success(input: ToolSuccessInput) -> Result<(), Error> {
    if input.tool == "fail" {
        return Err(Error::new("on_tool_success refused"));
    }
    morph_pdk::info!("success {} step {}", input.tool, input.step);
    Ok(())
}

fn fallback_final(input: FallbackInput) -> Final {
    Final { thought: input.reason, output: json!({"steps": input.steps, "tokens": input.usage.total()}), plan: None }
}

fn on_turn_start(ev: TurnStart) {
    morph_pdk::info!("turn {} start {} history {}", ev.turn, ev.input, ev.history.map_or(0, |h| h.len()));
}

fn on_action(ev: Action) {
    if ev.tool == "panic" {
        panic!("on_action broke on {}", ev.step);
    }
    morph_pdk::debug!("action {}", ev.tool);
}

fn on_observation(ev: Observation) {
    morph_pdk::warn!("observation {} error={}", ev.observation, ev.is_error);
}

fn on_final(ev: TurnEnd) {
    morph_pdk::error!("final {} {}", ev.status, ev.r#final.unwrap_or_default());
}

fn before_run(input: BeforeRunInput) -> BeforeRunOutput {
    if input.turn == 1 {
        return BeforeRunOutput::default();
    }
    BeforeRunOutput { system_prompt: Some(input.system_prompt + "!"), tools: Some(input.tools[..1].to_vec()) }
}

fn after_run(ev: AfterRunInput) {
    morph_pdk::info!("after_run {} {}", ev.status, ev.r#final.map(|f| f.thought).unwrap_or_default());
}

fn before_tool_call(input: BeforeToolCallInput) -> BeforeToolCallOutput {
    match input.tool.as_str() {
        "rm" => BeforeToolCallOutput::deny("no rm"),
        "upper" => {
            let text = input.input.get("text").and_then(Value::as_str).unwrap_or_default().to_uppercase();
            BeforeToolCallOutput {
                input: Some(json!({ "text": text }).as_object().unwrap().clone()),
                ..Default::default()
            }
        }
        _ => BeforeToolCallOutput::default(),
    }
}

fn after_tool_call(input: AfterToolCallInput) -> AfterToolCallOutput {
    if input.output.contains("secret") {
        AfterToolCallOutput::replace(input.output.replace("secret", "[redacted]"))
    } else {
        AfterToolCallOutput::default()
    }
}

#[derive(serde::Deserialize)]
struct TextParams {
    text: String,
}

fn reverse(p: TextParams) -> String {
    p.text.chars().rev().collect()
}

fn count(p: Object) -> Result<String, Error> {
    let n = p.get("n").and_then(Value::as_i64).ok_or("n must be an integer")?;
    Ok((0..n).map(|i| i.to_string()).collect::<Vec<_>>().join(" "))
}

fn raw_echo(params: &str) -> Result<String, String> {
    Ok(params.to_string())
}

fn handle_stage(input: StageInput) -> Result<StageOutcome, String> {
    let marker = input.attrs.get("marker").ok_or("the node sets no marker")?;
    match input.context.get("last_response").and_then(Value::as_str) {
        Some(text) if text.contains(marker.as_str()) => Ok(StageOutcome::success()),
        _ => Ok(StageOutcome { preferred_label: Some("fix".into()), ..StageOutcome::fail(format!("no {marker:?}")) }),
    }
}

thread_local! {
    static DESTROYED: std::cell::Cell<u32> = std::cell::Cell::new(0);
}

fn on_destroy() {
    DESTROYED.with(|d| d.set(d.get() + 1));
}

thread_local! {
    static REPLACED: std::cell::RefCell<Vec<InstanceReplaced>> = std::cell::RefCell::new(Vec::new());
}

fn on_replaced(r: InstanceReplaced) {
    REPLACED.with(|v| v.borrow_mut().push(r));
}

morph_pdk::plugin! {
    name: "typed",
    version: "1.2.3",
    capabilities: ["log"],
    history: true,
    requires: ["guard"],
    // In an order other than the manifest's.
    after_tool_call: after_tool_call,
    before_tool_call: before_tool_call,
    after_run: after_run,
    before_run: before_run,
    on_final: on_final,
    on_observation: on_observation,
    on_action: on_action,
    on_turn_start: on_turn_start,
    fallback_final: fallback_final,
    on_tool_success: on_tool_success,
    build_params: build_params,
    build_prompt: build_prompt,
    handle_stage: handle_stage,
    tools: [
        { name: "reverse", description: "Reverses a text.",
          schema: r#"{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}"#, run: reverse },
        { name: "count", description: "Counts to n.", schema: "", run: count },
        { name: "echo", description: "Echoes its params.", schema: r#"{"type":"object"}"#, run: raw raw_echo },
    ],
    destroy: on_destroy,
    instance_replaced: on_replaced,
}

fn json_call(export: testing::Export, input: Value) -> Result<Value, String> {
    let out = call(export, input.to_string().as_bytes())?;
    if out.is_empty() {
        return Ok(Value::Null);
    }
    Ok(serde_json::from_slice(&out).expect("output is not JSON"))
}

#[test]
fn manifest() {
    let out = call(morph_describe, b"").unwrap();
    let m: Manifest = serde_json::from_slice(&out).unwrap();
    assert_eq!((m.name.as_str(), m.version.as_str(), m.abi_version), ("typed", "1.2.3", 1));
    let hooks: Vec<&str> = morph_pdk::registry::HOOKS.iter().map(|(h, _)| *h).collect();
    assert_eq!(m.hooks, hooks, "every hook, in the ABI's order");
    let tools = m.tools.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["reverse", "count", "echo"]);
    assert_eq!(tools[0].parameters["required"], json!(["text"]));
    assert_eq!(tools[1].parameters, json!({"type": "object"}), "an empty schema is any object");
    assert_eq!(m.capabilities, Some(vec!["log".to_string()]));
    assert!(m.history);
    assert_eq!(m.requires, Some(vec!["guard".to_string()]));
}

#[test]
fn engine_hooks() {
    let out = json_call(
        morph_build_prompt,
        json!({"task": "t", "tools": [{"name": "a", "description": "", "parameters": {}}], "default_prompt": "D", "later": 1}),
    )
    .unwrap();
    assert_eq!(out, json!({"system_prompt": "D|t|a"}));
    // Empty input is the zero payload.
    assert_eq!(call_str(morph_build_prompt, "").unwrap(), r#"{"system_prompt":"||"}"#);

    let out = json_call(morph_build_params, json!({"task": "t", "options": {"parameters": {"top_p": 0.9}}})).unwrap();
    assert_eq!(out, json!({"parameters": {"top_p": 0.9, "temperature": 0.3}}));

    testing::take_logs();
    assert_eq!(
        call_str(morph_on_tool_success, r#"{"tool":"reverse","step":2,"params":null}"#).unwrap(),
        "",
        "observing: empty"
    );
    assert_eq!(testing::take_logs(), [(Level::Info, "success reverse step 2".to_string())]);
    assert_eq!(call_str(morph_on_tool_success, r#"{"tool":"fail"}"#).unwrap_err(), "on_tool_success refused");

    let out = json_call(
        morph_fallback_final,
        json!({"task": "t", "reason": "why", "steps": 3, "usage": {"input_tokens": 5, "output_tokens": 6}}),
    )
    .unwrap();
    assert_eq!(out, json!({"thought": "why", "output": {"steps": 3, "tokens": 11}}));
}

#[test]
fn middleware() {
    testing::take_logs();
    for (export, input) in [
        (
            morph_on_turn_start as testing::Export,
            json!({"session_id": "s", "turn": 2, "input": "hi", "history": [{"role": "user", "content": "x"}]}),
        ),
        (morph_on_action, json!({"session_id": "s", "turn": 2, "step": 1, "tool": "word_count", "input": {}})),
        (
            morph_on_observation,
            json!({"session_id": "s", "turn": 2, "step": 1, "tool": "w", "observation": "5", "is_error": true}),
        ),
        (
            morph_on_final,
            json!({"session_id": "s", "turn": 2, "step": 2, "final": "{\"output\":5}", "status": "final", "step_usage": {}, "turn_usage": {}}),
        ),
        (
            morph_after_run,
            json!({"session_id": "s", "turn": 2, "final": {"thought": "done", "output": 5}, "status": "final", "usage": {}, "steps": 2}),
        ),
    ] {
        assert_eq!(call(export, input.to_string().as_bytes()).unwrap(), b"", "observing hooks answer empty output");
    }
    let logs: Vec<(Level, String)> = testing::take_logs();
    assert_eq!(
        logs,
        [
            (Level::Info, "turn 2 start hi history 1".to_string()),
            (Level::Debug, "action word_count".to_string()),
            (Level::Warn, "observation 5 error=true".to_string()),
            (Level::Error, "final final {\"output\":5}".to_string()),
            (Level::Info, "after_run final done".to_string()),
        ]
    );

    let unchanged = json_call(morph_before_run, json!({"turn": 1, "system_prompt": "P", "tools": ["a", "b"]})).unwrap();
    assert_eq!(unchanged, json!({}));
    let changed = json_call(morph_before_run, json!({"turn": 2, "system_prompt": "P", "tools": ["a", "b"]})).unwrap();
    assert_eq!(changed, json!({"system_prompt": "P!", "tools": ["a"]}));

    let deny = json_call(morph_before_tool_call, json!({"tool": "rm", "input": {}})).unwrap();
    assert_eq!(deny, json!({"deny": true, "reason": "no rm"}));
    let rewrite = json_call(morph_before_tool_call, json!({"tool": "upper", "input": {"text": "abc"}})).unwrap();
    assert_eq!(rewrite, json!({"input": {"text": "ABC"}}));
    assert_eq!(json_call(morph_before_tool_call, json!({"tool": "ls", "input": null})).unwrap(), json!({}));

    let red = json_call(morph_after_tool_call, json!({"tool": "t", "input": {}, "output": "my secret"})).unwrap();
    assert_eq!(red, json!({"output": "my [redacted]"}));
    assert_eq!(json_call(morph_after_tool_call, json!({"tool": "t", "output": "clean"})).unwrap(), json!({}));
}

#[test]
fn stage_handler() {
    let input = |response: &str| json!({"node_id": "v", "attrs": {"marker": "pass"}, "goal": "", "context": {"last_response": response}});
    assert_eq!(json_call(morph_handle_stage, input("tests pass")).unwrap(), json!({"status": "success"}));
    assert_eq!(
        json_call(morph_handle_stage, input("2 failed")).unwrap(),
        json!({"status": "fail", "preferred_label": "fix", "failure_reason": "no \"pass\""})
    );
    let err = call_str(morph_handle_stage, r#"{"node_id":"v","attrs":null,"context":null}"#).unwrap_err();
    assert_eq!(err, "the node sets no marker");
}

#[test]
fn tools() {
    let ok = |input: Value| json_call(morph_call_tool, input).map(|v| v["output"].as_str().unwrap().to_string());
    assert_eq!(ok(json!({"tool": "reverse", "params": {"text": "héllo"}})).unwrap(), "olléh");
    assert_eq!(ok(json!({"tool": "count", "params": {"n": 3}})).unwrap(), "0 1 2");
    assert_eq!(ok(json!({"tool": "echo", "params": {"a": [1, 2]}})).unwrap(), r#"{"a": [1, 2]}"#.replace(' ', ""));
    assert_eq!(ok(json!({"tool": "echo", "params": null})).unwrap(), "{}");
    // Guest-reported errors.
    assert_eq!(ok(json!({"tool": "count", "params": {}})).unwrap_err(), "n must be an integer");
    let err = ok(json!({"tool": "reverse", "params": {"txt": "x"}})).unwrap_err();
    assert!(err.starts_with("reverse: invalid params: missing field `text`"), "{err}");
    assert_eq!(ok(json!({"tool": "nope", "params": {}})).unwrap_err(), r#"unknown tool "nope""#);
}

#[test]
fn failures_are_guest_errors() {
    let err = call_str(morph_build_prompt, r#"{"task":"#).unwrap_err();
    assert!(err.starts_with("build_prompt: invalid input: "), "{err}");
    let err = call_str(morph_build_params, r#"{"task":3}"#).unwrap_err();
    assert!(err.starts_with("build_params: invalid input: invalid type"), "{err}");
    // A panic that unwinds (native builds) is a guest error too...
    let err = call_str(morph_on_action, r#"{"tool":"panic","step":4}"#).unwrap_err();
    assert_eq!(err, "morph_on_action: panic: on_action broke on 4");
    // ...and the exchange stays in service.
    assert_eq!(call_str(morph_on_action, r#"{"tool":"x"}"#).unwrap(), "");
}

#[test]
fn no_buffer_outlives_its_call() {
    for _ in 0..3 {
        call_str(morph_build_prompt, r#"{"task":"t","default_prompt":"D"}"#).unwrap();
        assert_eq!(testing::buffers_held(), (0, 1), "only the last output is kept");
        call_str(morph_on_turn_start, r#"{"turn":1}"#).unwrap();
        assert_eq!(testing::buffers_held(), (0, 0), "empty output keeps nothing");
    }
    // An input the host did not get from morph_alloc.
    let (ptr, len, is_err) = morph_pdk::exchange::unpack(morph_build_prompt(4096, 10));
    assert!(is_err && ptr != 0 && len > 0);
}

#[test]
fn instance_replaced() {
    assert_eq!(call(morph_instance_replaced, br#"{"session_id":"s1","reason":"moved"}"#).unwrap(), b"");
    let got = REPLACED.with(|v| v.borrow().clone());
    assert_eq!(got, vec![InstanceReplaced { session_id: "s1".into(), reason: replaced_reason::MOVED.into() }]);
    assert!(call(morph_instance_replaced, br#"{"session_id":"#).is_err());
    // No hook: the manifest does not list it.
    let manifest = String::from_utf8(call(morph_describe, b"").unwrap()).unwrap();
    assert!(!manifest.contains("instance_replaced"), "{manifest}");
}

#[test]
fn destroy() {
    assert_eq!(call(morph_destroy, b"").unwrap(), b"");
    assert_eq!(DESTROYED.with(|d| d.get()), 1);
}

#[test]
fn marker_and_alloc() {
    morph_abi_v1();
    assert_eq!(morph_alloc(u32::MAX), 0, "an impossible request answers 0");
    assert_ne!(morph_alloc(16), 0);
}
