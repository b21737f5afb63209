//! Registration and dispatch: what [`crate::plugin!`] generates code
//! against. The manifest (`morph_describe`), tool dispatch
//! (`morph_call_tool`), and the adapters of raw hooks and tools.

use std::fmt::Display;

use crate::exchange::RawResult;
use crate::json;

pub use crate::hooks::HOOKS;

/// The ABI version of the manifest.
pub const ABI_VERSION: u32 = 1;

/// The capabilities a plugin asks for when it declares none: both host
/// functions, since any hook may log or read its config.
pub const DEFAULT_CAPABILITIES: [&str; 2] = ["log", "config"];

/// The parameters schema of a tool declared with an empty one: any object.
pub const DEFAULT_SCHEMA: &str = r#"{"type":"object"}"#;

/// Everything [`crate::plugin!`] declares, built again by each
/// `morph_describe` call. Mistakes (an empty name, a tool twice, a schema
/// that is not a JSON object) are collected and make `morph_describe` fail
/// with a message naming them, so the host refuses the module and says why.
#[derive(Debug, Default)]
pub struct Meta {
    name: Option<String>,
    version: String,
    hooks: Vec<&'static str>,
    tools: Vec<(String, String, String)>,
    capabilities: Option<Vec<String>>,
    history: bool,
    requires: Vec<String>,
    errs: Vec<String>,
}

impl Meta {
    /// An empty declaration.
    pub fn new() -> Meta {
        Meta::default()
    }

    /// The plugin's name (required, not blank).
    pub fn name(&mut self, name: &str) {
        if name.trim().is_empty() {
            self.errs.push("empty plugin name".into());
        }
        if self.name.is_some() {
            self.errs.push("name declared twice".into());
        }
        self.name = Some(name.to_string());
    }

    /// The plugin's own version.
    pub fn version(&mut self, version: &str) {
        self.version = version.to_string();
    }

    /// A hook the plugin implements (one of [`HOOKS`]).
    pub fn hook(&mut self, hook: &'static str) {
        if !HOOKS.iter().any(|(h, _)| *h == hook) {
            self.errs.push(format!("unknown hook {hook:?}"));
        } else if self.hooks.contains(&hook) {
            self.errs.push(format!("hook {hook} declared twice"));
        } else {
            self.hooks.push(hook);
        }
    }

    /// A tool, with the JSON Schema of its params object (empty: any object).
    pub fn tool(&mut self, name: &str, description: &str, schema: &str) {
        let schema = if schema.trim().is_empty() { DEFAULT_SCHEMA } else { schema.trim() };
        if name.trim().is_empty() {
            self.errs.push("a tool with an empty name".into());
        } else if self.tools.iter().any(|(n, _, _)| n == name) {
            self.errs.push(format!("tool {name:?} declared twice"));
        } else if let Err(e) = json::object_fields(schema) {
            self.errs.push(format!("tool {name:?}: the schema is not a JSON object: {e}"));
        } else {
            self.tools.push((name.to_string(), description.to_string(), schema.to_string()));
        }
    }

    /// The capabilities asked of the host; without a call, [`DEFAULT_CAPABILITIES`].
    pub fn capabilities(&mut self, caps: &[&str]) {
        self.capabilities = Some(caps.iter().map(|c| c.to_string()).collect());
    }

    /// Asks for the session history in middleware payloads.
    pub fn history(&mut self, on: bool) {
        self.history = on;
    }

    /// Plugins that must be loaded before this one.
    pub fn requires(&mut self, names: &[&str]) {
        self.requires.extend(names.iter().map(|n| n.to_string()));
    }

    /// The manifest as JSON, or the registration mistakes.
    pub fn manifest_json(&self) -> RawResult {
        let mut errs = self.errs.clone();
        if self.name.is_none() {
            errs.push("no name: declare `name: \"...\"` in morph_pdk::plugin!".into());
        }
        if !errs.is_empty() {
            return Err(format!("plugin registration: {}", errs.join("; ")));
        }
        let mut out = String::with_capacity(256);
        out.push_str("{\"name\":");
        json::write_str(&mut out, self.name.as_deref().unwrap_or_default());
        out.push_str(",\"version\":");
        json::write_str(&mut out, &self.version);
        out.push_str(&format!(",\"abi_version\":{ABI_VERSION},\"hooks\":["));
        let mut first = true;
        for (hook, _) in HOOKS.iter().filter(|(h, _)| self.hooks.contains(h)) {
            if !first {
                out.push(',');
            }
            first = false;
            json::write_str(&mut out, hook);
        }
        out.push(']');
        if !self.tools.is_empty() {
            out.push_str(",\"tools\":[");
            for (i, (name, description, schema)) in self.tools.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str("{\"name\":");
                json::write_str(&mut out, name);
                out.push_str(",\"description\":");
                json::write_str(&mut out, description);
                out.push_str(",\"parameters\":");
                out.push_str(schema);
                out.push('}');
            }
            out.push(']');
        }
        let caps: Vec<&str> = match &self.capabilities {
            Some(c) => c.iter().map(String::as_str).collect(),
            None => DEFAULT_CAPABILITIES.to_vec(),
        };
        if !caps.is_empty() {
            out.push_str(",\"capabilities\":");
            write_list(&mut out, &caps);
        }
        if self.history {
            out.push_str(",\"history\":true");
        }
        if !self.requires.is_empty() {
            out.push_str(",\"requires\":");
            write_list(&mut out, &self.requires.iter().map(String::as_str).collect::<Vec<_>>());
        }
        out.push('}');
        Ok(out.into_bytes())
    }
}

fn write_list(out: &mut String, items: &[&str]) {
    out.push('[');
    for (i, s) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        json::write_str(out, s);
    }
    out.push(']');
}

/// A tool's function as `morph_call_tool` dispatches it: the params object's
/// JSON text in, the observation out (or the error the model sees as
/// `error: <message>`).
pub type ToolFn<'a> = &'a dyn Fn(&str) -> Result<String, String>;

/// One tool of [`call_tool`]'s table.
pub struct Tool<'a> {
    /// The tool's name, as the manifest declares it.
    pub name: &'a str,
    /// Its function.
    pub run: ToolFn<'a>,
}

/// `morph_call_tool`: reads the `ToolCallInput` (`{"tool": ..., "params":
/// {...}}`), runs the named tool and answers the `ToolCallOutput`
/// (`{"output": ...}`). Absent or null params are `{}`.
pub fn call_tool(input: &[u8], tools: &[Tool]) -> RawResult {
    let text = std::str::from_utf8(input).map_err(|_| "call_tool: invalid input: not UTF-8".to_string())?;
    let fields = json::object_fields(text).map_err(|e| format!("call_tool: invalid input: {e}"))?;
    let mut name = None;
    let mut params = "{}";
    for (k, v) in fields {
        match k.as_str() {
            "tool" => name = Some(json::string_value(v).map_err(|e| format!("call_tool: invalid input: tool: {e}"))?),
            "params" if v != "null" => params = v,
            _ => {}
        }
    }
    let name = name.unwrap_or_default();
    let tool = tools.iter().find(|t| t.name == name).ok_or_else(|| format!("unknown tool {}", json::quote(&name)))?;
    let out = (tool.run)(params)?;
    let mut json = String::with_capacity(out.len() + 16);
    json.push_str("{\"output\":");
    json::write_str(&mut json, &out);
    json.push('}');
    Ok(json.into_bytes())
}

/// Runs a raw hook: the input JSON bytes in (empty for no input), the
/// output JSON bytes out (empty: the zero payload).
pub fn raw_hook<F, E>(f: F, input: &[u8]) -> RawResult
where
    F: FnOnce(&[u8]) -> Result<Vec<u8>, E>,
    E: Display,
{
    f(input).map_err(|e| e.to_string())
}

/// Runs a raw tool: the params object's JSON text in.
pub fn raw_tool<F, E>(f: F, params: &str) -> Result<String, String>
where
    F: Fn(&str) -> Result<String, E>,
    E: Display,
{
    f(params).map_err(|e| e.to_string())
}

/// Runs the `destroy` function of `morph_destroy`.
pub fn destroy<F: FnOnce()>(f: F) -> RawResult {
    f();
    Ok(Vec::new())
}

/// Runs the `instance_replaced` function of `morph_instance_replaced` on
/// its decoded input; its output is empty.
#[cfg(feature = "serde")]
pub fn instance_replaced<F: FnOnce(crate::types::InstanceReplaced)>(input: &[u8], f: F) -> RawResult {
    f(crate::typed::decode("morph_instance_replaced", input)?);
    Ok(Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(m: &Meta) -> String {
        String::from_utf8(m.manifest_json().unwrap()).unwrap()
    }

    #[test]
    fn minimal_manifest() {
        let mut m = Meta::new();
        m.name("min");
        m.version("1");
        assert_eq!(
            manifest(&m),
            r#"{"name":"min","version":"1","abi_version":1,"hooks":[],"capabilities":["log","config"]}"#
        );
    }

    #[test]
    fn full_manifest_in_canonical_hook_order() {
        let mut m = Meta::new();
        m.name("rust \"hooks\"");
        m.version("0.1.0");
        for (h, _) in HOOKS.iter().rev() {
            m.hook(h);
        }
        m.tool("reverse", "Reverses\ta text.", r#" {"type":"object","properties":{"text":{"type":"string"}}} "#);
        m.tool("any", "", "");
        m.capabilities(&["log"]);
        m.history(true);
        m.requires(&["guard", "audit"]);
        let hooks: Vec<String> = HOOKS.iter().map(|(h, _)| json::quote(h)).collect();
        assert_eq!(
            manifest(&m),
            format!(
                "{{\"name\":\"rust \\\"hooks\\\"\",\"version\":\"0.1.0\",\"abi_version\":1,\"hooks\":[{}],\
                 \"tools\":[{{\"name\":\"reverse\",\"description\":\"Reverses\\ta text.\",\
                 \"parameters\":{{\"type\":\"object\",\"properties\":{{\"text\":{{\"type\":\"string\"}}}}}}}},\
                 {{\"name\":\"any\",\"description\":\"\",\"parameters\":{{\"type\":\"object\"}}}}],\
                 \"capabilities\":[\"log\"],\"history\":true,\"requires\":[\"guard\",\"audit\"]}}",
                hooks.join(",")
            )
        );
        // No capabilities at all: the field is left out.
        m.capabilities(&[]);
        assert!(!manifest(&m).contains("capabilities"));
    }

    #[test]
    fn registration_mistakes() {
        let mut m = Meta::new();
        m.version("1");
        let err = m.manifest_json().unwrap_err();
        assert!(err.contains("no name"), "{err}");

        let mut m = Meta::new();
        m.name(" ");
        m.hook("build_prompt");
        m.hook("build_prompt");
        m.hook("on_everything");
        m.tool("t", "", "[]");
        m.tool("u", "", "{");
        m.tool("", "", "{}");
        m.tool("v", "", "{}");
        m.tool("v", "", "{}");
        let err = m.manifest_json().unwrap_err();
        for want in [
            "plugin registration: ",
            "empty plugin name",
            "hook build_prompt declared twice",
            "unknown hook \"on_everything\"",
            "tool \"t\": the schema is not a JSON object",
            "tool \"u\": the schema is not a JSON object",
            "a tool with an empty name",
            "tool \"v\" declared twice",
        ] {
            assert!(err.contains(want), "{err} lacks {want}");
        }
    }

    fn tools_table(input: &str) -> Result<String, String> {
        let upper = |p: &str| -> Result<String, String> { Ok(p.to_uppercase()) };
        let fail = |_: &str| -> Result<String, String> { Err("it broke".into()) };
        let tools = [Tool { name: "upper", run: &upper }, Tool { name: "fail", run: &fail }];
        call_tool(input.as_bytes(), &tools).map(|b| String::from_utf8(b).unwrap())
    }

    #[test]
    fn tool_dispatch() {
        assert_eq!(
            tools_table(r#"{"tool":"upper","params":{"text":"a\"b"}}"#).unwrap(),
            r#"{"output":"{\"TEXT\":\"A\\\"B\"}"}"#
        );
        assert_eq!(tools_table(r#"{"params":null,"tool":"upper","later":[1]}"#).unwrap(), r#"{"output":"{}"}"#);
        assert_eq!(tools_table(r#"{"tool":"upper"}"#).unwrap(), r#"{"output":"{}"}"#);
        assert_eq!(tools_table(r#"{"tool":"fail","params":{}}"#).unwrap_err(), "it broke");
        assert_eq!(tools_table(r#"{"tool":"nope","params":{}}"#).unwrap_err(), r#"unknown tool "nope""#);
        assert!(tools_table(r#"{"tool":"#).unwrap_err().starts_with("call_tool: invalid input"));
        assert!(tools_table(r#"{"tool":3}"#).unwrap_err().starts_with("call_tool: invalid input: tool"));
    }
}
