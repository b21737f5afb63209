//! The Rust payload types agree with the ABI's JSON Schemas (abi/schema/*.json)
//! and read the samples of abi/SPEC.md:
//!
//! - a fully populated value of each type serializes exactly the schema's
//!   properties, with the schema's JSON types, and reads back equal;
//! - the zero value of each type serializes the schema's required
//!   properties and nothing the schema does not know;
//! - every JSON sample of SPEC.md that matches a schema reads into the Rust
//!   type, and writes back every field it had, unchanged.
//!
//! The samples of the types generated from abi's Go types are generated
//! with them (schema/payloads.rs, by abi/internal/gen), so a payload type
//! added in Go is checked here without a sample written by hand.
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

// The samples of the payload types generated from abi's Go types.
include!("schema/payloads.rs");

/// Reads v into T, and writes it back.
fn rt<T: serde::de::DeserializeOwned + serde::Serialize>(v: &Value) -> Result<Value, String> {
    serde_json::from_value::<T>(v.clone()).map(|x| serde_json::to_value(x).unwrap()).map_err(|e| e.to_string())
}

/// Reads v into the Rust type of schema file, and writes it back.
fn roundtrip(file: &str, v: &Value) -> Result<Value, String> {
    if let Some(r) = generated_roundtrip(file, v) {
        return r;
    }
    // The types written by hand.
    match file {
        "http_request.json" => rt::<HttpRequest>(v),
        "http_response.json" => rt::<HttpResponse>(v),
        _ => panic!("no Rust type for schema {file}"),
    }
}

/// A value of every type with every field set, by schema file.
fn full_samples() -> Vec<(&'static str, Value)> {
    let mut out = generated_full_samples();
    out.push((
        "http_request.json",
        serde_json::to_value(HttpRequest {
            method: Some("POST".into()),
            url: "https://api.example.com/notes".into(),
            headers: Some([("Content-Type".to_string(), "application/json".to_string())].into_iter().collect()),
            body: Some("{}".into()),
        })
        .unwrap(),
    ));
    out.push((
        "http_response.json",
        serde_json::to_value(HttpResponse {
            status: 200,
            headers: Some([("Content-Type".to_string(), "text/plain".to_string())].into_iter().collect()),
            body: "ok".into(),
        })
        .unwrap(),
    ));
    out
}

/// The zero value of every type, by schema file.
fn zero_samples() -> Vec<(&'static str, Value)> {
    let mut out = generated_zero_samples();
    out.push(("http_request.json", serde_json::to_value(HttpRequest::default()).unwrap()));
    out.push(("http_response.json", serde_json::to_value(HttpResponse::default()).unwrap()));
    out
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
