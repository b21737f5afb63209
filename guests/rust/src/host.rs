//! The host functions of `morph:host/v1` (SPEC section 5): the host's log,
//! the plugin's own configuration, and HTTP to the hosts the plugin is
//! allowed.
//!
//! On `wasm32` these are the host's imports. Elsewhere (native tests) [`log`]
//! records the message for [`crate::testing::take_logs`], [`config`] reads
//! the values set with [`crate::testing::set_config`], and
//! [`http_request_raw`] asks the handler set with
//! [`crate::testing::set_http`], each through a stand-in with the host's
//! exact contract.

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
///
/// The values are fixed while the plugin is loaded (SPEC section 5), so the
/// answers for the first [`CONFIG_CACHED`] keys asked are kept: a hook that
/// reads its config on every call makes one host call per key, not one per call.
pub fn config(key: &str) -> Option<String> {
    if let Some(v) = CONFIG_CACHE.with(|c| c.borrow().iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())) {
        return v;
    }
    let v = fetch_config(key);
    CONFIG_CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() < CONFIG_CACHED {
            c.push((key.to_string(), v.clone()));
        }
    });
    v
}

/// How many keys [`config`] keeps the answers of; a plugin that reads more
/// (keys it makes up, say) asks the host for the others every time.
pub const CONFIG_CACHED: usize = 64;

thread_local! {
    static CONFIG_CACHE: std::cell::RefCell<Vec<(String, Option<String>)>> = std::cell::RefCell::new(Vec::new());
}

/// Forgets the answers [`config`] kept (native tests change the values).
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn forget_config() {
    CONFIG_CACHE.with(|c| c.borrow_mut().clear());
}

fn fetch_config(key: &str) -> Option<String> {
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

/// Sends an HTTP request through the host's `http_request` (capability
/// `http`): `req` is an `HTTPRequest`'s JSON (`{"method":"POST","url":...,
/// "headers":{...},"body":"..."}`), the answer an `HTTPResponse`'s JSON
/// (`{"status":200,"headers":{...},"body":"..."}`). The host sends the
/// request only to the hosts its operator allows the plugin, checking every
/// redirect hop, within its time and size limits; a denial or a failure is
/// the `Err`, with the host's message. A 4xx or 5xx status is a response,
/// not an error. Bodies are text.
pub fn http_request_raw(req: &[u8]) -> Result<Vec<u8>, String> {
    let result = sys::http_request(req);
    match crate::exchange::with(|x| x.claim(result)) {
        Err(e) => Err(format!("http_request: {e}")),
        Ok((msg, true)) if msg.is_empty() => {
            Err("http_request failed, and the plugin could not allocate the host's message".to_string())
        }
        Ok((msg, true)) => Err(String::from_utf8_lossy(&msg).into_owned()),
        Ok((out, false)) => Ok(out),
    }
}

/// [`http_request_raw`] with the typed payloads (`serde` feature):
///
/// ```ignore
/// let resp = morph_pdk::http_request(&HttpRequest {
///     url: "https://api.example.com/v1/notes".into(),
///     ..Default::default()
/// })?;
/// ```
#[cfg(feature = "serde")]
pub fn http_request(req: &crate::types::HttpRequest) -> Result<crate::types::HttpResponse, crate::Error> {
    let out = http_request_raw(&serde_json::to_vec(req)?)?;
    serde_json::from_slice(&out)
        .map_err(|e| crate::Error::new(format!("http_request: the host's answer is not an HTTPResponse: {e}")))
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
        #[link_name = "http_request"]
        fn morph_http_request(req_ptr: *const u8, req_len: usize) -> u64;
    }

    pub(super) fn http_request(req: &[u8]) -> u64 {
        // SAFETY: the host reads req.len() bytes at req's address; it writes
        // its answer only into a buffer it gets from morph_alloc.
        unsafe { morph_http_request(req.as_ptr(), req.len()) }
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
        pub(crate) static HTTP: RefCell<Option<HttpHandler>> = RefCell::new(None);
    }

    /// A test's stand-in for the host's HTTP: the request's JSON in, the
    /// answer's bytes and whether they are an error's message out.
    pub(crate) type HttpHandler = Box<dyn Fn(&[u8]) -> (Vec<u8>, bool)>;

    /// The host's http_request: the answer goes into a buffer from the
    /// guest's morph_alloc, packed like an export's result.
    pub(super) fn http_request(req: &[u8]) -> u64 {
        let answer = HTTP.with(|h| h.borrow().as_ref().map(|f| f(req)));
        let (out, is_err) = answer.unwrap_or_else(|| (b"http_request: no host outside WebAssembly".to_vec(), true));
        if out.is_empty() {
            return crate::exchange::pack(0, 0, is_err);
        }
        let p = crate::exchange::alloc(out.len() as u32);
        if p == 0 || !crate::exchange::with(|x| x.write(p, &out)) {
            return crate::exchange::pack(0, 0, true);
        }
        crate::exchange::pack(p, out.len() as u32, is_err)
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
    fn config_asks_the_host_once_per_key() {
        testing::clear_config();
        testing::set_config("rule", "r1");
        let calls = || sys::CONFIG_CALLS.with(|c| *c.borrow());
        let before = calls();
        for _ in 0..3 {
            assert_eq!(config("rule").as_deref(), Some("r1"));
            assert_eq!(config("absent"), None);
        }
        assert_eq!(calls() - before, 2, "one host call for each key, absent ones included");
        testing::set_config("rule", "r2"); // a test's change: forgets the answers
        assert_eq!(config("rule").as_deref(), Some("r2"));
        testing::clear_config();
        let before = calls();
        for i in 0..CONFIG_CACHED + 10 {
            config(&format!("k{i}"));
        }
        let after_first = calls() - before;
        for i in 0..CONFIG_CACHED + 10 {
            config(&format!("k{i}"));
        }
        assert_eq!(calls() - before - after_first, 10, "past the cache's size, the rest are asked every time");
    }

    #[test]
    fn http_request_through_the_exchange() {
        testing::set_http(|req| {
            let req = String::from_utf8(req.to_vec()).unwrap();
            if req.contains("evil") {
                (b"host not allowed: evil.example.com".to_vec(), true)
            } else if req.contains("quiet") {
                (Vec::new(), true)
            } else {
                (format!("{{\"status\":200,\"body\":{:?}}}", req).into_bytes(), false)
            }
        });
        let out = http_request_raw(br#"{"url":"https://api.example.com/"}"#).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"status":200,"body":"{\"url\":\"https://api.example.com/\"}"}"#
        );
        assert_eq!(testing::buffers_held(), (0, 0), "the answer's buffer was claimed");
        assert_eq!(
            http_request_raw(br#"{"url":"https://evil.example.com/"}"#).unwrap_err(),
            "host not allowed: evil.example.com"
        );
        assert!(http_request_raw(br#"{"url":"https://quiet.example.com/"}"#)
            .unwrap_err()
            .contains("could not allocate"));
        testing::clear_http();
        assert!(http_request_raw(b"{}").unwrap_err().contains("no host outside WebAssembly"));
    }

    #[cfg(feature = "serde")]
    #[test]
    fn typed_http_request() {
        use crate::types::{HttpRequest, HttpResponse};
        use std::collections::BTreeMap;
        testing::set_http(|req| {
            let req: HttpRequest = serde_json::from_slice(req).unwrap();
            let headers: BTreeMap<String, String> =
                [("X-Method".to_string(), req.method.unwrap_or_default())].into_iter().collect();
            let resp = HttpResponse { status: 201, headers: Some(headers), body: req.body.unwrap_or_default() };
            (serde_json::to_vec(&resp).unwrap(), false)
        });
        let resp = http_request(&HttpRequest {
            method: Some("POST".into()),
            url: "https://api.example.com/notes".into(),
            headers: None,
            body: Some("hi".into()),
        })
        .unwrap();
        assert_eq!(resp.status, 201);
        assert_eq!(resp.body, "hi");
        assert_eq!(resp.headers.unwrap()["X-Method"], "POST");
        testing::set_http(|_| (b"not json".to_vec(), false));
        let err = http_request(&HttpRequest::default()).unwrap_err();
        assert!(err.message().contains("not an HTTPResponse"), "{}", err);
        testing::clear_http();
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
