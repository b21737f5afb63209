//! The plugin's tools: `reverse` and `char_stats`. Both take `{"text": "..."}`;
//! the host validates the params against [`TEXT_SCHEMA`] before they run.

use morph_pdk::serde_json;
use serde::{Deserialize, Serialize};

/// The params schema of both tools.
pub const TEXT_SCHEMA: &str = r#"{
  "type": "object",
  "properties": {
    "text": {"type": "string", "description": "the text"}
  },
  "required": ["text"],
  "additionalProperties": false
}"#;

/// The params of both tools.
#[derive(Debug, Deserialize)]
pub struct TextParams {
    /// The text.
    pub text: String,
}

/// reverse's description, as the model sees it.
pub const REVERSE_DESCRIPTION: &str = "Reverses a text, character by character (Unicode code points).";

/// The longest text reverse takes, in characters.
pub const MAX_REVERSE: usize = 10_000;

/// reverse: the text backwards; a text over [`MAX_REVERSE`] characters is a
/// tool error the model sees.
pub fn reverse(p: TextParams) -> Result<String, String> {
    let n = p.text.chars().count();
    if n > MAX_REVERSE {
        return Err(format!("the text has {n} characters; reverse takes at most {MAX_REVERSE}"));
    }
    Ok(p.text.chars().rev().collect())
}

/// char_stats's description.
pub const CHAR_STATS_DESCRIPTION: &str = "Counts the characters of a text by kind. Returns JSON \
{\"chars\":n,\"bytes\":n,\"letters\":n,\"uppercase\":n,\"lowercase\":n,\"digits\":n,\"whitespace\":n,\"other\":n}.";

/// char_stats's result.
#[derive(Debug, Default, PartialEq, Serialize)]
pub struct CharStats {
    /// Unicode code points.
    pub chars: usize,
    /// UTF-8 bytes.
    pub bytes: usize,
    /// Alphabetic characters.
    pub letters: usize,
    /// Upper-case letters.
    pub uppercase: usize,
    /// Lower-case letters.
    pub lowercase: usize,
    /// Decimal digits 0-9.
    pub digits: usize,
    /// White space.
    pub whitespace: usize,
    /// Everything else: punctuation, symbols, ...
    pub other: usize,
}

/// The statistics of text.
pub fn stats(text: &str) -> CharStats {
    let mut s = CharStats { bytes: text.len(), ..Default::default() };
    for c in text.chars() {
        s.chars += 1;
        if c.is_alphabetic() {
            s.letters += 1;
            s.uppercase += c.is_uppercase() as usize;
            s.lowercase += c.is_lowercase() as usize;
        } else if c.is_ascii_digit() {
            s.digits += 1;
        } else if c.is_whitespace() {
            s.whitespace += 1;
        } else {
            s.other += 1;
        }
    }
    s
}

/// char_stats: [`stats`] as compact JSON.
pub fn char_stats(p: TextParams) -> Result<String, serde_json::Error> {
    serde_json::to_string(&stats(&p.text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use morph_pdk::testing::call_str;

    #[test]
    fn reverse_tool() {
        assert_eq!(reverse(TextParams { text: "héllo, wörld".into() }).unwrap(), "dlröw ,olléh");
        assert_eq!(reverse(TextParams { text: String::new() }).unwrap(), "");
        let err = reverse(TextParams { text: "x".repeat(MAX_REVERSE + 1) }).unwrap_err();
        assert_eq!(err, "the text has 10001 characters; reverse takes at most 10000");
    }

    #[test]
    fn char_stats_tool() {
        assert_eq!(
            char_stats(TextParams { text: "Hé 42!\n".into() }).unwrap(),
            r#"{"chars":7,"bytes":8,"letters":2,"uppercase":1,"lowercase":1,"digits":2,"whitespace":2,"other":1}"#
        );
    }

    #[test]
    fn through_the_export() {
        assert_eq!(
            call_str(crate::morph_call_tool, r#"{"tool":"reverse","params":{"text":"abc"}}"#).unwrap(),
            r#"{"output":"cba"}"#
        );
        let err = call_str(crate::morph_call_tool, r#"{"tool":"char_stats","params":{}}"#).unwrap_err();
        assert!(err.starts_with("char_stats: invalid params: missing field `text`"), "{err}");
    }
}
