//! A minimal JSON toolkit, enough for the crate's core to work without
//! serde: quoting strings, splitting an object into its fields (raw value
//! text), and decoding a string value. The core uses it for the manifest and
//! for `morph_call_tool`; raw hooks may use it too. It validates what it
//! reads, but does not decode numbers, arrays or nested objects: it hands
//! out their text.

/// Appends `s` to `out` as a JSON string literal, quotes included.
pub fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `s` as a JSON string literal.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    write_str(&mut out, s);
    out
}

/// The fields of the JSON object `text`, in order, each with its value's
/// raw text (trimmed). Fails unless `text` is exactly one well-formed object.
pub fn object_fields(text: &str) -> Result<Vec<(String, &str)>, String> {
    let b = text.as_bytes();
    let mut i = ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return Err("not a JSON object".into());
    }
    let mut fields = Vec::new();
    i = ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        i += 1;
    } else {
        loop {
            if b.get(i) != Some(&b'"') {
                return Err(format!("expected a key at byte {i}"));
            }
            let end = skip_string(b, i)?;
            let key = string_value(&text[i..end])?;
            i = ws(b, end);
            if b.get(i) != Some(&b':') {
                return Err(format!("expected ':' at byte {i}"));
            }
            let start = ws(b, i + 1);
            let end = skip_value(b, start, 0)?;
            fields.push((key, &text[start..end]));
            i = ws(b, end);
            match b.get(i) {
                Some(b',') => i = ws(b, i + 1),
                Some(b'}') => {
                    i += 1;
                    break;
                }
                _ => return Err(format!("expected ',' or '}}' at byte {i}")),
            }
        }
    }
    if ws(b, i) != b.len() {
        return Err(format!("data after the object at byte {i}"));
    }
    Ok(fields)
}

/// Decodes the JSON string literal `raw` (quotes included).
pub fn string_value(raw: &str) -> Result<String, String> {
    let b = raw.as_bytes();
    if b.len() < 2 || b[0] != b'"' || skip_string(b, 0)? != b.len() {
        return Err("not a JSON string".into());
    }
    let inner = &raw[1..raw.len() - 1];
    if !inner.contains('\\') {
        return Ok(inner.to_string());
    }
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('"') => out.push('"'),
            Some('\\') => out.push('\\'),
            Some('/') => out.push('/'),
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some('u') => {
                let hi = hex4(&mut chars)?;
                let c = if (0xD800..0xDC00).contains(&hi) {
                    // A surrogate pair: \uD83D\uDE00.
                    let lo = match (chars.next(), chars.next()) {
                        (Some('\\'), Some('u')) => hex4(&mut chars)?,
                        _ => 0,
                    };
                    if !(0xDC00..0xE000).contains(&lo) {
                        return Err("unpaired surrogate in a string".into());
                    }
                    char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))
                } else {
                    char::from_u32(hi)
                };
                out.push(c.ok_or("invalid \\u escape in a string")?);
            }
            _ => return Err("invalid escape in a string".into()),
        }
    }
    Ok(out)
}

fn hex4(chars: &mut std::str::Chars) -> Result<u32, String> {
    let mut v = 0;
    for _ in 0..4 {
        let d = chars.next().and_then(|c| c.to_digit(16)).ok_or("invalid \\u escape in a string")?;
        v = v * 16 + d;
    }
    Ok(v)
}

fn ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// The end of the string starting at b[i] == '"'.
fn skip_string(b: &[u8], mut i: usize) -> Result<usize, String> {
    i += 1;
    while i < b.len() {
        match b[i] {
            b'"' => return Ok(i + 1),
            b'\\' => i += 2,
            c if c < 0x20 => return Err(format!("control character in a string at byte {i}")),
            _ => i += 1,
        }
    }
    Err("unterminated string".into())
}

/// Nesting deeper than this is refused rather than risking the stack.
const MAX_DEPTH: usize = 256;

/// The end of the value starting at b[i].
fn skip_value(b: &[u8], i: usize, depth: usize) -> Result<usize, String> {
    if depth > MAX_DEPTH {
        return Err("JSON nested too deeply".into());
    }
    match b.get(i) {
        None => Err("unexpected end of JSON".into()),
        Some(b'"') => skip_string(b, i),
        Some(&open @ (b'{' | b'[')) => {
            let close = if open == b'{' { b'}' } else { b']' };
            let mut j = ws(b, i + 1);
            if b.get(j) == Some(&close) {
                return Ok(j + 1);
            }
            loop {
                if open == b'{' {
                    if b.get(j) != Some(&b'"') {
                        return Err(format!("expected a key at byte {j}"));
                    }
                    j = ws(b, skip_string(b, j)?);
                    if b.get(j) != Some(&b':') {
                        return Err(format!("expected ':' at byte {j}"));
                    }
                    j = ws(b, j + 1);
                }
                j = ws(b, skip_value(b, j, depth + 1)?);
                match b.get(j) {
                    Some(b',') => j = ws(b, j + 1),
                    Some(&c) if c == close => return Ok(j + 1),
                    _ => return Err(format!("expected ',' or '{}' at byte {j}", close as char)),
                }
            }
        }
        Some(b't') if b[i..].starts_with(b"true") => Ok(i + 4),
        Some(b'f') if b[i..].starts_with(b"false") => Ok(i + 5),
        Some(b'n') if b[i..].starts_with(b"null") => Ok(i + 4),
        Some(b'-' | b'0'..=b'9') => {
            let mut j = i + 1;
            while j < b.len() && matches!(b[j], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') {
                j += 1;
            }
            Ok(j)
        }
        Some(_) => Err(format!("unexpected character at byte {i}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(quote("plain"), r#""plain""#);
        assert_eq!(quote("a\"b\\c\nd\te\u{1}é😀"), "\"a\\\"b\\\\c\\nd\\te\\u0001é😀\"");
    }

    #[test]
    fn fields() {
        let f = object_fields(
            r#" {"tool":"re\"verse", "params" : {"text":"a}b","n":[1,{"x":null}]}, "z":-1.5e3, "t":true} "#,
        )
        .unwrap();
        let keys: Vec<&str> = f.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["tool", "params", "z", "t"]);
        assert_eq!(string_value(f[0].1).unwrap(), "re\"verse");
        assert_eq!(f[1].1, r#"{"text":"a}b","n":[1,{"x":null}]}"#);
        assert_eq!(f[2].1, "-1.5e3");
        assert_eq!(f[3].1, "true");
        assert_eq!(object_fields("{}").unwrap(), vec![]);
        assert_eq!(object_fields(r#"{"k\u00e9y":1}"#).unwrap()[0].0, "kéy");
    }

    #[test]
    fn malformed() {
        for bad in [
            "",
            "[]",
            "{",
            r#"{"a"}"#,
            r#"{"a":}"#,
            r#"{"a":1,}"#,
            r#"{"a":1} x"#,
            r#"{"a":[1,2}"#,
            r#"{"a":"b"#,
            r#"{"a":tru}"#,
            "{\"a\":\"\u{1}\"}",
            r#"{a:1}"#,
        ] {
            assert!(object_fields(bad).is_err(), "{bad:?} accepted");
        }
        let deep = "[".repeat(MAX_DEPTH + 10) + &"]".repeat(MAX_DEPTH + 10);
        assert!(object_fields(&format!("{{\"a\":{deep}}}")).is_err());
    }

    #[test]
    fn strings() {
        assert_eq!(string_value(r#""a\/b\u00e9\ud83d\ude00\n""#).unwrap(), "a/bé😀\n");
        assert!(string_value(r#""\ud83d""#).is_err());
        assert!(string_value(r#""\x""#).is_err());
        assert!(string_value("x").is_err());
        assert!(string_value(r#""a"b""#).is_err());
        for s in ["", "plain", "q\"uote", "back\\slash", "\u{1f}ctl", "tab\tnew\nline", "ünï😀"] {
            assert_eq!(string_value(&quote(s)).unwrap(), s);
        }
    }
}
