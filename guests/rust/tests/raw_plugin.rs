//! plugin! with raw hooks and tools only: the dependency-free core, which
//! works with and without the serde feature.

use morph_pdk::json;
use morph_pdk::testing::{call, call_str};

/// build_prompt over raw JSON: reads default_prompt with the core's JSON
/// toolkit and answers a PromptOutput written by hand.
fn build_prompt(input: &[u8]) -> Result<Vec<u8>, String> {
    let text = std::str::from_utf8(input).map_err(|e| e.to_string())?;
    let mut prompt = String::new();
    for (key, raw) in json::object_fields(text)? {
        if key == "default_prompt" {
            prompt = json::string_value(raw)?;
        }
    }
    let rule = morph_pdk::config("rule").unwrap_or_else(|| "Be brief.".into());
    Ok(format!("{{\"system_prompt\":{}}}", json::quote(&format!("{prompt}\n{rule}"))).into_bytes())
}

fn on_final(input: &[u8]) -> Result<Vec<u8>, &'static str> {
    morph_pdk::info!("final: {} bytes", input.len());
    Ok(Vec::new())
}

fn after_tool_call(_: &[u8]) -> Result<Vec<u8>, String> {
    Err(String::new()) // an error without a message
}

fn length(params: &str) -> Result<String, std::fmt::Error> {
    Ok(params.len().to_string())
}

morph_pdk::plugin! {
    name: "raw",
    version: "0.0.1",
    capabilities: [],
    build_prompt: raw build_prompt,
    on_final: raw on_final,
    after_tool_call: raw after_tool_call,
    tools: [{ name: "length", description: "The params' length.", schema: "{}", run: raw length }]
}

#[test]
fn manifest() {
    assert_eq!(
        call_str(morph_describe, "").unwrap(),
        r#"{"name":"raw","version":"0.0.1","abi_version":1,"hooks":["build_prompt","on_final","after_tool_call"],"tools":[{"name":"length","description":"The params' length.","parameters":{}}]}"#
    );
}

#[test]
fn raw_hooks() {
    morph_pdk::testing::set_config("rule", "Cite \"sources\".");
    let out = call_str(morph_build_prompt, r#"{"task":"t","tools":[],"default_prompt":"D\u00e9"}"#).unwrap();
    assert_eq!(out, r#"{"system_prompt":"Dé\nCite \"sources\"."}"#);
    assert!(call_str(morph_build_prompt, "[]").unwrap_err().contains("not a JSON object"));

    morph_pdk::testing::take_logs();
    assert_eq!(call(morph_on_final, b"{}").unwrap(), b"");
    assert_eq!(morph_pdk::testing::take_logs(), [(morph_pdk::Level::Info, "final: 2 bytes".to_string())]);

    assert_eq!(call_str(morph_after_tool_call, "{}").unwrap_err(), "morph_after_tool_call: error");
}

#[test]
fn raw_tool() {
    assert_eq!(call_str(morph_call_tool, r#"{"tool":"length","params":{"a":1}}"#).unwrap(), r#"{"output":"7"}"#);
}
