//! The Rust payload types agree with the ABI's JSON Schemas (abi/schema/*.json)
//! and read the samples of abi/SPEC.md:
//!
//! - a fully populated value of each type serializes exactly the schema's
//!   properties, with the schema's JSON types, and reads back equal;
//! - the zero value of each type serializes the schema's required
//!   properties and nothing the schema does not know;
//! - every JSON sample of SPEC.md that matches a schema reads into the Rust
//!   type, and writes back every field it had, unchanged.
#![cfg(feature = "serde")]

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use morph_pdk::serde_json::{self, json, Value};
use morph_pdk::types::*;

fn abi_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("..").join("abi")
}

fn schema(file: &str) -> Value {
    let path = abi_dir().join("schema").join(file);
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// Reads v into the Rust type of schema file, and writes it back.
fn roundtrip(file: &str, v: &Value) -> Result<Value, String> {
    macro_rules! by_file {
        ($($f:literal => $t:ty,)*) => {
            match file {
                $($f => serde_json::from_value::<$t>(v.clone()).map(|x| serde_json::to_value(x).unwrap()),)*
                _ => panic!("no Rust type for schema {file}"),
            }
        };
    }
    by_file! {
        "action.json" => Action,
        "after_run_input.json" => AfterRunInput,
        "after_tool_call_input.json" => AfterToolCallInput,
        "after_tool_call_output.json" => AfterToolCallOutput,
        "before_run_input.json" => BeforeRunInput,
        "before_run_output.json" => BeforeRunOutput,
        "before_tool_call_input.json" => BeforeToolCallInput,
        "before_tool_call_output.json" => BeforeToolCallOutput,
        "fallback_input.json" => FallbackInput,
        "http_request.json" => HttpRequest,
        "http_response.json" => HttpResponse,
        "instance_replaced.json" => InstanceReplaced,
        "final.json" => Final,
        "manifest.json" => Manifest,
        "message.json" => Message,
        "observation.json" => Observation,
        "params_input.json" => ParamsInput,
        "params_output.json" => ParamsOutput,
        "plan.json" => Plan,
        "prompt_input.json" => PromptInput,
        "prompt_output.json" => PromptOutput,
        "run_options.json" => RunOptions,
        "stage_input.json" => StageInput,
        "stage_outcome.json" => StageOutcome,
        "tool_call_input.json" => ToolCallInput,
        "tool_call_output.json" => ToolCallOutput,
        "tool_spec.json" => ToolSpec,
        "tool_success_input.json" => ToolSuccessInput,
        "turn_final.json" => TurnFinal,
        "turn_start.json" => TurnStart,
        "usage.json" => Usage,
    }
    .map_err(|e| e.to_string())
}

fn obj(v: Value) -> Object {
    v.as_object().unwrap().clone()
}

fn usage() -> Usage {
    Usage { input_tokens: 1700, output_tokens: 95, total_tokens: 1795, cost: 0.0006 }
}

fn plan() -> Plan {
    Plan {
        thought: Some("t".into()),
        summary: Some("s".into()),
        steps: vec![PlanStep { step: "look it up".into(), status: "completed".into() }],
        risks: Some(vec!["r".into()]),
        questions: Some(vec!["q".into()]),
        completion: Some("c".into()),
    }
}

fn fin() -> Final {
    Final { thought: "t".into(), output: json!({"n": 2}), plan: Some(plan()) }
}

fn tool_spec() -> ToolSpec {
    ToolSpec { name: "word_count".into(), description: "d".into(), parameters: json!({"type": "object"}) }
}

fn history() -> Option<Vec<Message>> {
    Some(vec![Message { role: "user".into(), content: "c".into() }])
}

fn stage_outcome() -> StageOutcome {
    StageOutcome {
        status: stage_status::FAIL.into(),
        preferred_label: Some("fix".into()),
        suggested_next_ids: Some(vec!["implement".into()]),
        context_updates: Some(obj(json!({"verify.passed": false}))),
        notes: Some("n".into()),
        failure_reason: Some("r".into()),
    }
}

/// A value of every type with every field set, by schema file.
fn full_samples() -> Vec<(&'static str, Value)> {
    fn v<T: serde::Serialize>(x: T) -> Value {
        serde_json::to_value(x).unwrap()
    }
    let params = obj(json!({"text": "a b"}));
    vec![
        ("usage.json", v(usage())),
        ("tool_spec.json", v(tool_spec())),
        (
            "run_options.json",
            v(RunOptions {
                model: Some("m".into()),
                max_steps: Some(15),
                parse_retries: Some(-1),
                token_budget: Some(1000),
                parameters: Some(obj(json!({"temperature": 0.2}))),
            }),
        ),
        ("final.json", v(fin())),
        ("plan.json", v(plan())),
        (
            "prompt_input.json",
            v(PromptInput { task: "t".into(), tools: vec![tool_spec()], default_prompt: "p".into() }),
        ),
        ("prompt_output.json", v(PromptOutput { system_prompt: "p".into() })),
        (
            "params_input.json",
            v(ParamsInput {
                task: "t".into(),
                options: RunOptions {
                    model: Some("m".into()),
                    max_steps: Some(1),
                    parse_retries: Some(1),
                    token_budget: Some(1),
                    parameters: Some(Object::new()),
                },
            }),
        ),
        ("params_output.json", v(ParamsOutput { parameters: obj(json!({"max_tokens": 800})) })),
        (
            "tool_success_input.json",
            v(ToolSuccessInput { tool: "w".into(), step: 3, params: params.clone(), observation: "5".into() }),
        ),
        ("fallback_input.json", v(FallbackInput { task: "t".into(), reason: "r".into(), steps: 15, usage: usage() })),
        (
            "manifest.json",
            v(Manifest {
                name: "n".into(),
                version: "1".into(),
                abi_version: 1,
                hooks: vec!["build_prompt".into()],
                tools: Some(vec![tool_spec()]),
                capabilities: Some(vec!["log".into()]),
                history: true,
                requires: Some(vec!["guard".into()]),
            }),
        ),
        (
            "tool_call_input.json",
            v(ToolCallInput { tool: "w".into(), params: params.clone(), call_id: "s/n/1/1/1".into() }),
        ),
        (
            "instance_replaced.json",
            v(InstanceReplaced { session_id: "s".into(), reason: replaced_reason::MOVED.into() }),
        ),
        (
            "tool_call_output.json",
            v(ToolCallOutput {
                output: "3".into(),
                images: vec![Image { mime_type: "image/png".into(), data: "iVBORw0KGgo=".into() }],
            }),
        ),
        ("message.json", v(Message { role: "user".into(), content: "c".into() })),
        ("turn_start.json", v(TurnStart { session_id: "s".into(), turn: 2, input: "i".into(), history: history() })),
        (
            "action.json",
            v(Action {
                session_id: "s".into(),
                turn: 2,
                step: 1,
                tool: "w".into(),
                thought: Some("t".into()),
                input: params.clone(),
                history: history(),
            }),
        ),
        (
            "observation.json",
            v(Observation {
                session_id: "s".into(),
                turn: 2,
                step: 1,
                tool: "w".into(),
                observation: "o".into(),
                is_error: true,
                history: history(),
            }),
        ),
        (
            "turn_final.json",
            v(TurnFinal {
                session_id: "s".into(),
                turn: 2,
                step: 2,
                r#final: Some("{}".into()),
                status: "error".into(),
                error: Some("e".into()),
                step_usage: usage(),
                turn_usage: usage(),
            }),
        ),
        (
            "before_run_input.json",
            v(BeforeRunInput {
                session_id: "s".into(),
                turn: 2,
                system_prompt: "p".into(),
                tools: vec!["w".into()],
                model: Some("m".into()),
            }),
        ),
        ("before_run_output.json", v(BeforeRunOutput { system_prompt: Some("p".into()), tools: Some(vec![]) })),
        (
            "before_tool_call_input.json",
            v(BeforeToolCallInput {
                session_id: "s".into(),
                turn: 2,
                step: 1,
                tool: "w".into(),
                input: params.clone(),
            }),
        ),
        (
            "before_tool_call_output.json",
            v(BeforeToolCallOutput { input: Some(params.clone()), deny: true, reason: Some("r".into()) }),
        ),
        (
            "after_tool_call_input.json",
            v(AfterToolCallInput {
                session_id: "s".into(),
                turn: 2,
                step: 1,
                tool: "w".into(),
                input: params,
                output: "o".into(),
                is_error: true,
            }),
        ),
        ("after_tool_call_output.json", v(AfterToolCallOutput::replace(""))),
        (
            "http_request.json",
            v(HttpRequest {
                method: Some("POST".into()),
                url: "https://api.example.com/notes".into(),
                headers: Some([("Content-Type".to_string(), "application/json".to_string())].into_iter().collect()),
                body: Some("{}".into()),
            }),
        ),
        (
            "http_response.json",
            v(HttpResponse {
                status: 200,
                headers: Some([("Content-Type".to_string(), "text/plain".to_string())].into_iter().collect()),
                body: "ok".into(),
            }),
        ),
        (
            "stage_input.json",
            v(StageInput {
                node_id: "verify".into(),
                attrs: [("marker".to_string(), "tests pass".to_string())].into_iter().collect(),
                goal: "g".into(),
                context: obj(json!({"last_response": "ok"})),
                previous: Some(stage_outcome()),
            }),
        ),
        ("stage_outcome.json", v(stage_outcome())),
        (
            "after_run_input.json",
            v(AfterRunInput {
                session_id: "s".into(),
                turn: 2,
                r#final: Some(fin()),
                status: "error".into(),
                error: Some("e".into()),
                usage: usage(),
                steps: 2,
            }),
        ),
    ]
}

/// The zero value of every type, by schema file.
fn zero_samples() -> Vec<(&'static str, Value)> {
    fn z<T: Default + serde::Serialize>() -> Value {
        serde_json::to_value(T::default()).unwrap()
    }
    vec![
        ("usage.json", z::<Usage>()),
        ("tool_spec.json", z::<ToolSpec>()),
        ("run_options.json", z::<RunOptions>()),
        ("final.json", z::<Final>()),
        ("plan.json", z::<Plan>()),
        ("prompt_input.json", z::<PromptInput>()),
        ("prompt_output.json", z::<PromptOutput>()),
        ("params_input.json", z::<ParamsInput>()),
        ("params_output.json", z::<ParamsOutput>()),
        ("tool_success_input.json", z::<ToolSuccessInput>()),
        ("fallback_input.json", z::<FallbackInput>()),
        ("manifest.json", z::<Manifest>()),
        ("tool_call_input.json", z::<ToolCallInput>()),
        ("instance_replaced.json", z::<InstanceReplaced>()),
        ("tool_call_output.json", z::<ToolCallOutput>()),
        ("message.json", z::<Message>()),
        ("turn_start.json", z::<TurnStart>()),
        ("action.json", z::<Action>()),
        ("observation.json", z::<Observation>()),
        ("turn_final.json", z::<TurnFinal>()),
        ("before_run_input.json", z::<BeforeRunInput>()),
        ("before_run_output.json", z::<BeforeRunOutput>()),
        ("before_tool_call_input.json", z::<BeforeToolCallInput>()),
        ("before_tool_call_output.json", z::<BeforeToolCallOutput>()),
        ("after_tool_call_input.json", z::<AfterToolCallInput>()),
        ("after_tool_call_output.json", z::<AfterToolCallOutput>()),
        ("after_run_input.json", z::<AfterRunInput>()),
        ("http_request.json", z::<HttpRequest>()),
        ("http_response.json", z::<HttpResponse>()),
        ("stage_input.json", z::<StageInput>()),
        ("stage_outcome.json", z::<StageOutcome>()),
    ]
}

/// How strictly check compares a value with its schema.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// Every property present, with the schema's types.
    Full,
    /// Required properties present; no unknown ones; types not checked.
    Zero,
    /// No unknown properties, required ones present, the schema's types.
    Sample,
}

fn type_matches(t: &str, v: &Value) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "null" => v.is_null(),
        _ => true,
    }
}

/// Checks v against sch (part of root, the schema of file), recording mismatches.
fn check(file: &str, root: &Value, sch: &Value, v: &Value, at: &str, mode: Mode, errs: &mut Vec<String>) {
    if let Some(r) = sch.get("$ref").and_then(Value::as_str) {
        match r.strip_prefix("#/$defs/") {
            Some(def) => check(file, root, &root["$defs"][def], v, at, mode, errs),
            None => {
                let other = schema(r);
                check(r, &other, &other, v, at, mode, errs);
            }
        }
        return;
    }
    if let Some(alts) = sch.get("oneOf").and_then(Value::as_array) {
        match alts.iter().find(|a| a.get("type").and_then(Value::as_str).map_or(true, |t| type_matches(t, v))) {
            Some(alt) => check(file, root, alt, v, at, mode, errs),
            None => errs.push(format!("{file} {at}: {v} matches no alternative")),
        }
        return;
    }
    if mode != Mode::Zero {
        let types: Vec<&str> = match sch.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        if !types.is_empty() && !types.iter().any(|t| type_matches(t, v)) {
            errs.push(format!("{file} {at}: {v} is not of type {types:?}"));
        }
    }
    match v {
        Value::Object(m) => {
            let props = match sch.get("properties").and_then(Value::as_object) {
                Some(p) => p,
                None => return, // a free-form object: tool params, model parameters, a tool's schema
            };
            for k in m.keys() {
                if !props.contains_key(k) {
                    errs.push(format!("{file} {at}: field {k:?} is not in the schema"));
                }
            }
            for r in sch.get("required").and_then(Value::as_array).into_iter().flatten() {
                let r = r.as_str().unwrap();
                if !m.contains_key(r) {
                    errs.push(format!("{file} {at}: required field {r:?} missing"));
                }
            }
            for (k, p) in props {
                match m.get(k) {
                    Some(fv) => check(file, root, p, fv, &format!("{at}.{k}"), mode, errs),
                    None if mode == Mode::Full => errs.push(format!("{file} {at}: property {k:?} never serialized")),
                    None => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = sch.get("items") {
                for (i, x) in items.iter().enumerate() {
                    check(file, root, item, x, &format!("{at}[{i}]"), mode, errs);
                }
            }
        }
        _ => {}
    }
}

fn check_file(file: &str, v: &Value, mode: Mode) -> Vec<String> {
    let root = schema(file);
    let mut errs = Vec::new();
    check(file, &root, &root, v, "$", mode, &mut errs);
    errs
}

#[test]
fn every_schema_has_a_rust_type() {
    let files: BTreeSet<String> = fs::read_dir(abi_dir().join("schema"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|f| f.ends_with(".json"))
        .collect();
    let full: BTreeSet<String> = full_samples().into_iter().map(|(f, _)| f.to_string()).collect();
    let zero: BTreeSet<String> = zero_samples().into_iter().map(|(f, _)| f.to_string()).collect();
    assert_eq!(full, files, "full samples vs abi/schema");
    assert_eq!(zero, files, "zero samples vs abi/schema");
}

#[test]
fn full_values_serialize_exactly_the_schema_properties() {
    let mut errs = Vec::new();
    for (file, v) in full_samples() {
        errs.extend(check_file(file, &v, Mode::Full));
        // And read back to the same value.
        match roundtrip(file, &v) {
            Ok(back) if back == v => {}
            Ok(back) => errs.push(format!("{file}: {v} reads back as {back}")),
            Err(e) => errs.push(format!("{file}: {v} does not read back: {e}")),
        }
    }
    assert!(errs.is_empty(), "{}", errs.join("\n"));
}

#[test]
fn zero_values_serialize_the_required_properties() {
    let mut errs = Vec::new();
    for (file, v) in zero_samples() {
        errs.extend(check_file(file, &v, Mode::Zero));
    }
    assert!(errs.is_empty(), "{}", errs.join("\n"));
}

/// Whether every field of want is in got with the same value (objects
/// recursively; got may have more fields: zero values the sample left out).
fn subset(want: &Value, got: &Value) -> bool {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => w.iter().all(|(k, wv)| g.get(k).map_or(false, |gv| subset(wv, gv))),
        (Value::Array(w), Value::Array(g)) => w.len() == g.len() && w.iter().zip(g).all(|(a, b)| subset(a, b)),
        (Value::Number(w), Value::Number(g)) => w.as_f64() == g.as_f64(),
        _ => want == got,
    }
}

/// The JSON values of SPEC.md's ```json blocks; a block that is not plain
/// JSON (it has placeholders like `[ToolSpec...]`) is skipped from its first
/// unparseable value on.
fn spec_samples() -> Vec<Value> {
    let spec = fs::read_to_string(abi_dir().join("SPEC.md")).unwrap();
    let mut out = Vec::new();
    let mut rest = spec.as_str();
    while let Some(start) = rest.find("```json\n") {
        let body = &rest[start + 8..];
        let end = body.find("```").expect("unclosed block");
        for v in serde_json::Deserializer::from_str(&body[..end]).into_iter::<Value>() {
            match v {
                Ok(v) => out.push(v),
                Err(_) => break,
            }
        }
        rest = &body[end + 3..];
    }
    out
}

#[test]
fn spec_samples_read_into_the_rust_types() {
    let files: Vec<&str> = full_samples().into_iter().map(|(f, _)| f).collect();
    let samples = spec_samples();
    assert!(samples.len() >= 15, "only {} samples found in SPEC.md", samples.len());
    let mut errs = Vec::new();
    for sample in &samples {
        if !sample.is_object() {
            continue;
        }
        // The schemas the sample fits: no unknown field, the required ones, the types.
        let candidates: Vec<&str> =
            files.iter().copied().filter(|f| check_file(f, sample, Mode::Sample).is_empty()).collect();
        if candidates.is_empty() {
            errs.push(format!("SPEC.md sample {sample} fits no schema"));
        }
        for file in candidates {
            match roundtrip(file, sample) {
                Ok(back) if subset(sample, &back) => {}
                Ok(back) => errs.push(format!("{file}: SPEC.md sample {sample} reads back as {back}")),
                Err(e) => errs.push(format!("{file}: SPEC.md sample {sample} does not read: {e}")),
            }
        }
    }
    assert!(errs.is_empty(), "{}", errs.join("\n"));
}
