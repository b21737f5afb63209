//! Helpers for native tests of a plugin (`cargo test` on the build machine,
//! not wasm32): call the exports [`crate::plugin!`] generated exactly as the
//! host does (`morph_alloc`, write the input, call, read the packed result),
//! set the plugin's config, and read what it logged.
//!
//! State is per thread, like an instance's: each test thread has its own
//! memory exchange, config and log.
//!
//! ```ignore
//! #[test]
//! fn prompt() {
//!     morph_pdk::testing::set_config("rule", "Be brief.");
//!     let out = morph_pdk::testing::call_str(crate::morph_build_prompt,
//!         r#"{"task":"t","tools":[],"default_prompt":"D"}"#).unwrap();
//!     assert!(out.contains("Be brief."));
//! }
//! ```

use crate::exchange::{self, unpack};
use crate::host::{sys, Level};

/// An export as [`crate::plugin!`] generates it.
pub type Export = extern "C" fn(u32, u32) -> u64;

/// Calls `export` with `input` as the host does: the output bytes, or the
/// message of a guest-reported error.
pub fn call(export: Export, input: &[u8]) -> Result<Vec<u8>, String> {
    let len = input.len() as u32;
    let ptr = if input.is_empty() {
        0
    } else {
        let p = exchange::alloc(len);
        assert_ne!(p, 0, "morph_alloc({len}) failed");
        assert!(exchange::with(|x| x.write(p, input)));
        p
    };
    let result = export(ptr, len);
    let (p, n, is_err) = unpack(result);
    let out = if result == 0 {
        Vec::new()
    } else {
        exchange::with(|x| x.read(p, n)).unwrap_or_else(|| panic!("result [{p}, +{n}) is not the output buffer"))
    };
    if is_err {
        Err(String::from_utf8_lossy(&out).into_owned())
    } else {
        Ok(out)
    }
}

/// [`call`] with text in and out.
pub fn call_str(export: Export, input: &str) -> Result<String, String> {
    call(export, input.as_bytes()).map(|b| String::from_utf8(b).expect("output is not UTF-8"))
}

/// Sets the plugin's config value for key, as `[plugins.config]` would.
pub fn set_config(key: &str, value: &str) {
    sys::CONFIG.with(|c| c.borrow_mut().insert(key.to_string(), value.to_string()));
    crate::host::forget_config();
}

/// Unsets every config value.
pub fn clear_config() {
    sys::CONFIG.with(|c| c.borrow_mut().clear());
    crate::host::forget_config();
}

/// Serves the plugin's HTTP requests ([`crate::http_request`]) with `f`, as
/// the host would: `f` gets the request's JSON and answers the response's
/// JSON, or, with `true`, the message of a denial or failure. Without a
/// handler every request fails.
pub fn set_http(f: impl Fn(&[u8]) -> (Vec<u8>, bool) + 'static) {
    sys::HTTP.with(|h| *h.borrow_mut() = Some(Box::new(f)));
}

/// Removes the handler of [`set_http`].
pub fn clear_http() {
    sys::HTTP.with(|h| *h.borrow_mut() = None);
}

/// What the plugin logged since the last call, oldest first.
pub fn take_logs() -> Vec<(Level, String)> {
    sys::LOGS
        .with(|l| std::mem::take(&mut *l.borrow_mut()))
        .into_iter()
        .map(|(level, msg)| {
            let level = match level {
                l if l < 0 => Level::Debug,
                l if l < 4 => Level::Info,
                l if l < 8 => Level::Warn,
                _ => Level::Error,
            };
            (level, msg)
        })
        .collect()
}

/// The buffers the memory exchange holds: (inputs allocated and not yet
/// consumed, outputs kept for the host). Between calls it is (0, 0) or
/// (0, 1): nothing leaks from one call to the next.
pub fn buffers_held() -> (usize, usize) {
    exchange::with(|x| x.held())
}
