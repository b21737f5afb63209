//! The host functions of `morph:host/v1` (SPEC section 5): the host's log and
//! the plugin's own configuration.
//!
//! On `wasm32` these are the host's imports. Elsewhere (native tests) [`log`]
//! records the message for [`crate::testing::take_logs`], and [`config`]
//! reads the values set with [`crate::testing::set_config`], through a stand-in
//! for `config_get` with the host's exact contract.

/// A log level of the host's log (the values of Go's log/slog levels).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum Level {
    /// Debug: shown by `morph run -v`.
    Debug = -4,
    /// Info.
    Info = 0,
    /// Warn.
    Warn = 4,
    /// Error.
    Error = 8,
}

/// Writes `msg` to the host's log under the plugin's name, at `level`. The
/// host logs at most its per-instance log budget of one message.
pub fn log(level: Level, msg: &str) {
    sys::log(level as i32, msg.as_bytes());
}

/// The size of the first buffer [`config`] offers the host; a longer value
/// costs one more host call.
pub const CONFIG_BUF: usize = 256;

/// The plugin's own config value for `key` (the `[plugins.config]` table of
/// morph's configuration), or `None` when it is not set. A value longer than
/// the first buffer is fetched again with a buffer of its size.
pub fn config(key: &str) -> Option<String> {
    let mut buf = vec![0u8; CONFIG_BUF];
    // A value cannot change between two calls; the bound only guards
    // against a host that keeps answering a larger size.
    for _ in 0..4 {
        let n = sys::config_get(key.as_bytes(), &mut buf);
        if n < 0 {
            return None;
        }
        let n = n as usize;
        if n <= buf.len() {
            buf.truncate(n);
            return Some(match String::from_utf8(buf) {
                Ok(s) => s,
                Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
            });
        }
        buf = vec![0u8; n];
    }
    None
}

/// On wasm32, a panic hook that logs the panic's message to the host (at
/// error level, naming the export) before the module aborts: with
/// panic=abort the host otherwise sees only an `unreachable` trap. Installed
/// by the first export call; elsewhere Rust's default hook stays.
pub(crate) fn install_panic_hook() {
    #[cfg(target_arch = "wasm32")]
    {
        use std::sync::atomic::{AtomicBool, Ordering};
        static INSTALLED: AtomicBool = AtomicBool::new(false);
        if !INSTALLED.swap(true, Ordering::Relaxed) {
            std::panic::set_hook(Box::new(|info| {
                log(Level::Error, &format!("{}: {}", crate::exchange::current(), info));
            }));
        }
    }
}

#[cfg(target_arch = "wasm32")]
mod sys {
    #[link(wasm_import_module = "morph:host/v1")]
    extern "C" {
        #[link_name = "log"]
        fn morph_log(level: i32, ptr: *const u8, len: usize);
        #[link_name = "config_get"]
        fn morph_config_get(key_ptr: *const u8, key_len: usize, out_ptr: *mut u8, out_cap: usize) -> i32;
    }

    pub(super) fn log(level: i32, msg: &[u8]) {
        // SAFETY: the host reads len bytes at ptr, which msg holds.
        unsafe { morph_log(level, msg.as_ptr(), msg.len()) }
    }

    pub(super) fn config_get(key: &[u8], out: &mut [u8]) -> i32 {
        // SAFETY: the host reads key and writes at most out.len() bytes to out.
        unsafe { morph_config_get(key.as_ptr(), key.len(), out.as_mut_ptr(), out.len()) }
    }
}

#[cfg(not(target_arch = "wasm32"))]
pub(crate) mod sys {
    use std::cell::RefCell;
    use std::collections::HashMap;

    thread_local! {
        pub(crate) static LOGS: RefCell<Vec<(i32, String)>> = RefCell::new(Vec::new());
        pub(crate) static CONFIG: RefCell<HashMap<String, String>> = RefCell::new(HashMap::new());
        pub(crate) static CONFIG_CALLS: RefCell<usize> = RefCell::new(0);
    }

    pub(super) fn log(level: i32, msg: &[u8]) {
        LOGS.with(|l| l.borrow_mut().push((level, String::from_utf8_lossy(msg).into_owned())));
    }

    /// The host's config_get: -1 when absent; else the value's length, the
    /// value written only when it fits.
    pub(super) fn config_get(key: &[u8], out: &mut [u8]) -> i32 {
        CONFIG_CALLS.with(|c| *c.borrow_mut() += 1);
        let key = String::from_utf8_lossy(key);
        CONFIG.with(|c| match c.borrow().get(key.as_ref()) {
            None => -1,
            Some(v) => {
                if v.len() <= out.len() {
                    out[..v.len()].copy_from_slice(v.as_bytes());
                }
                v.len() as i32
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    #[test]
    fn config_grows_and_retries() {
        testing::clear_config();
        testing::set_config("short", "abc");
        let long = "x".repeat(CONFIG_BUF * 3 + 1);
        testing::set_config("long", &long);
        testing::set_config("exact", &"y".repeat(CONFIG_BUF));
        testing::set_config("empty", "");

        let calls = || sys::CONFIG_CALLS.with(|c| *c.borrow());
        let before = calls();
        assert_eq!(config("short").as_deref(), Some("abc"));
        assert_eq!(calls() - before, 1);
        let before = calls();
        assert_eq!(config("long").as_deref(), Some(long.as_str()));
        assert_eq!(calls() - before, 2, "one call to learn the size, one to read");
        let before = calls();
        assert_eq!(config("exact").map(|v| v.len()), Some(CONFIG_BUF));
        assert_eq!(calls() - before, 1);
        assert_eq!(config("empty").as_deref(), Some(""));
        assert_eq!(config("absent"), None);
    }

    #[test]
    fn logs_are_recorded() {
        testing::take_logs();
        log(Level::Info, "hello");
        log(Level::Warn, "careful");
        assert_eq!(
            testing::take_logs(),
            vec![(Level::Info, "hello".to_string()), (Level::Warn, "careful".to_string())]
        );
        assert_eq!(Level::Debug as i32, -4);
        assert_eq!(Level::Error as i32, 8);
    }
}
