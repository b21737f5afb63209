//! The plugin development kit for writing [morph] plugins in Rust.
//!
//! A morph plugin is a WebAssembly module that implements morph's plugin ABI
//! v1 (`abi/SPEC.md` in the morph repository). With this crate you write
//! ordinary Rust functions over typed payloads ([`types`]) and export them
//! with one macro, [`plugin!`], which generates the module's exports: the
//! `morph_abi_v1` marker, `morph_alloc`, `morph_describe` (the manifest, whose
//! hooks are exactly those you give), one `morph_<hook>` per hook, and
//! `morph_call_tool` when there are tools.
//!
//! ```ignore
//! use morph_pdk::types::{PromptInput, PromptOutput, ToolSuccessInput};
//!
//! fn build_prompt(input: PromptInput) -> PromptOutput {
//!     let rule = morph_pdk::config("rule").unwrap_or_else(|| "Be brief.".into());
//!     PromptOutput { system_prompt: format!("{}\n## House rules\n- {rule}\n", input.default_prompt) }
//! }
//!
//! fn on_tool_success(input: ToolSuccessInput) {
//!     morph_pdk::info!("tool {} succeeded", input.tool);
//! }
//!
//! fn shout(p: morph_pdk::types::Object) -> Result<String, morph_pdk::Error> {
//!     let text = p.get("text").and_then(|v| v.as_str()).ok_or("text must be a string")?;
//!     Ok(text.to_uppercase())
//! }
//!
//! morph_pdk::plugin! {
//!     name: "hello",
//!     version: env!("CARGO_PKG_VERSION"),
//!     build_prompt: build_prompt,
//!     on_tool_success: on_tool_success,
//!     tools: [
//!         { name: "shout", description: "Upper-cases a text.",
//!           schema: r#"{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}"#,
//!           run: shout },
//!     ],
//! }
//! ```
//!
//! Build it as a `cdylib` for `wasm32-unknown-unknown` with Debian's
//! toolchain (the crate's README says how):
//!
//! ```text
//! RUSTC=/usr/bin/rustc /usr/bin/cargo build --release --target wasm32-unknown-unknown
//! ```
//!
//! # Hooks
//!
#![doc = include_str!("hooks.md")]
//!
//! Each function may return its output `T` or `Result<T, E>` for any `E:
//! Display` ([`IntoHookResult`]); an error becomes a guest-reported error,
//! which the host reports as such (`ErrGuest`) and which leaves the instance
//! in service. The mutating hooks' outputs change nothing by default
//! (`Default::default()`): set only what you change.
//!
//! `handle_stage` runs the stages of morph's pipelines whose node's type is
//! `wasm:<plugin>` (SPEC section 11): it answers the stage's
//! [`types::StageOutcome`], whose `status` is required (one of
//! [`types::stage_status`]); the host fails the stage on an outcome that
//! breaks the section's rules (a reserved context key, too many updates).
//!
//! A **raw** hook takes the input JSON bytes and returns the output JSON
//! bytes, and works without the `serde` feature: `build_prompt: raw f` with
//! `fn f(input: &[u8]) -> Result<Vec<u8>, E>` (empty output: the zero
//! payload). A raw tool takes the params object's JSON text: `run: raw f`
//! with `fn f(params: &str) -> Result<String, E>`.
//!
//! # The other keys of `plugin!`
//!
//! - `name: "..."` (required) and `version: "..."`: the manifest's identity;
//! - `tools: [{ name: ..., description: ..., schema: ..., run: f }, ...]`: the
//!   tools, in this field order. `schema` is the JSON Schema of the params
//!   object, as text (empty: any object); the host validates every call
//!   against it before the tool runs. A typed `run` function takes its params
//!   as any `serde::Deserialize` type ([`types::Object`] for the raw map, or
//!   a struct of yours) and returns the observation, `String` or
//!   `Result<String, E>`; an error reaches the model as `error: <message>`;
//! - `capabilities: ["log", "config", "http"]`: what the manifest asks of
//!   the host (the default is log and config). Ask for `http` to use
//!   `http_request` ([`http_request_raw`] without `serde`): the host compares
//!   the request with what its operator grants the plugin (`allowed_hosts`)
//!   when it loads it;
//! - `history: true`: ask for the session history in middleware payloads;
//! - `requires: ["other-plugin"]`: plugins whose middleware runs first;
//! - `destroy: f` with `fn f()`: exports `morph_destroy`, called once per
//!   idle instance when the host closes the plugin.
//! - `instance_replaced: f` with `fn f(types::InstanceReplaced)` (feature
//!   `serde`): exports `morph_instance_replaced`, called on a fresh instance
//!   of a plugin in session isolation before it serves a session whose
//!   earlier instance is gone (SPEC.md 10.6): what it kept of the session is
//!   not there.
//!
//! Registration mistakes (no name, a tool twice, a schema that is not a
//! JSON object) make `morph_describe` fail with a message naming them, so the
//! host refuses the module and says why. An unknown hook key or a hook given
//! twice is a compile error.
//!
//! # Panics
//!
//! Every export runs the author's function under
//! [`std::panic::catch_unwind`], so a panic that unwinds becomes a
//! guest-reported error `"<export>: panic: <message>"`: that is what native
//! tests see. On `wasm32-unknown-unknown`, though, panics do not unwind: the
//! target's default, and the usual release setting, is `panic = "abort"`.
//! There the crate's panic hook first sends the panic message to the host's
//! log (error level, naming the export), then the module aborts, the host
//! sees a trap (`ErrTrap`), discards the instance and serves the next call
//! with a fresh one. That is fine: the failure is isolated either way, and
//! the engine applies its rules (a default prompt, a fail-open or
//! fail-closed middleware, an error observation for a tool).
//!
//! # State
//!
//! Calls on one instance never overlap and wasm32 has one thread, so state
//! can live in `thread_local!` cells or `static` atomics without locks. The
//! host may run several instances at once and replaces one after a trap or a
//! timeout: such state is a per-instance cache or counter, not a store.
//!
//! # Without serde
//!
//! With `default-features = false` the crate has no dependencies at all: the
//! memory exchange ([`exchange`]), the host functions ([`log`], [`config`]),
//! the manifest and tool dispatch ([`registry`]), a minimal JSON toolkit
//! ([`json`]), and raw hooks and tools.
//!
//! [morph]: https://github.com/morphhost/morph

#![warn(missing_docs)]

pub mod exchange;
// The hook list and plugin!'s arm per hook, generated from abi.Hooks.
mod hooks;
pub mod host;
pub mod json;
pub mod registry;
#[cfg(not(target_arch = "wasm32"))]
pub mod testing;
#[cfg(feature = "serde")]
pub mod typed;
#[cfg(feature = "serde")]
pub mod types;

#[cfg(feature = "serde")]
pub use host::http_request;
pub use host::{config, http_request_raw, log, Level};
#[cfg(feature = "serde")]
pub use serde_json;
#[cfg(feature = "serde")]
pub use typed::IntoHookResult;

use std::fmt;

/// A plugin's error: its message becomes a guest-reported error (the model
/// sees `error: <message>` for a tool). Any `E: Display` works as a hook's
/// error type; this one converts from the usual suspects so that `?` works.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(String);

impl Error {
    /// An error with the message msg.
    pub fn new(msg: impl Into<String>) -> Error {
        Error(msg.into())
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

macro_rules! error_from {
    ($($t:ty),*) => {$(
        impl From<$t> for Error {
            fn from(e: $t) -> Error {
                Error(e.to_string())
            }
        }
    )*};
}

error_from!(
    String,
    &str,
    fmt::Error,
    std::num::ParseIntError,
    std::num::ParseFloatError,
    std::str::Utf8Error,
    std::string::FromUtf8Error
);
#[cfg(feature = "serde")]
error_from!(serde_json::Error);

/// `Result` with [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Logs a formatted message at debug level: `morph_pdk::debug!("x = {}", x)`.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)*) => { $crate::log($crate::Level::Debug, &::std::format!($($arg)*)) };
}

/// Logs a formatted message at info level.
#[macro_export]
macro_rules! info {
    ($($arg:tt)*) => { $crate::log($crate::Level::Info, &::std::format!($($arg)*)) };
}

/// Logs a formatted message at warn level.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)*) => { $crate::log($crate::Level::Warn, &::std::format!($($arg)*)) };
}

/// Logs a formatted message at error level.
#[macro_export]
macro_rules! error {
    ($($arg:tt)*) => { $crate::log($crate::Level::Error, &::std::format!($($arg)*)) };
}

/// Declares the plugin and generates its exports; see the [crate
/// documentation](crate) for the keys. Use it once, at the crate's root.
///
/// It generates `#[no_mangle] extern "C"` functions named after the ABI's
/// exports (`morph_abi_v1`, `morph_alloc`, `morph_describe`, `morph_<hook>`
/// for each hook given, `morph_call_tool` when there are tools,
/// `morph_destroy` with `destroy`), which native tests can call through
/// [`testing::call`].
#[macro_export]
macro_rules! plugin {
    ($($body:tt)*) => {
        $crate::__plugin!(@munch [] [] ; $($body)* ,);
    };
}

/// The munching behind [`plugin!`]: one `key: value` at a time, collecting
/// the manifest's entries and the tools, generating each hook's export as it
/// goes.
#[doc(hidden)]
#[macro_export]
macro_rules! __plugin {
    // Stray commas (the trailing one plugin! adds, say).
    (@munch [$($meta:tt)*] [$($tools:tt)*] ; , $($rest:tt)*) => {
        $crate::__plugin!(@munch [$($meta)*] [$($tools)*] ; $($rest)*);
    };
    (@munch [$($meta:tt)*] [$($tools:tt)*] ; ) => {
        $crate::__plugin!(@finish [$($meta)*] [$($tools)*]);
    };
    (@munch [$($meta:tt)*] [$($tools:tt)*] ; name : $e:expr , $($rest:tt)*) => {
        $crate::__plugin!(@munch [$($meta)* (name $e)] [$($tools)*] ; $($rest)*);
    };
    (@munch [$($meta:tt)*] [$($tools:tt)*] ; version : $e:expr , $($rest:tt)*) => {
        $crate::__plugin!(@munch [$($meta)* (version $e)] [$($tools)*] ; $($rest)*);
    };
    (@munch [$($meta:tt)*] [$($tools:tt)*] ; history : $e:expr , $($rest:tt)*) => {
        $crate::__plugin!(@munch [$($meta)* (history $e)] [$($tools)*] ; $($rest)*);
    };
    (@munch [$($meta:tt)*] [$($tools:tt)*] ; capabilities : [$($c:expr),* $(,)?] , $($rest:tt)*) => {
        $crate::__plugin!(@munch [$($meta)* (capabilities [$($c),*])] [$($tools)*] ; $($rest)*);
    };
    (@munch [$($meta:tt)*] [$($tools:tt)*] ; requires : [$($c:expr),* $(,)?] , $($rest:tt)*) => {
        $crate::__plugin!(@munch [$($meta)* (requires [$($c),*])] [$($tools)*] ; $($rest)*);
    };
    (@munch [$($meta:tt)*] [$($tools:tt)*] ; tools : [$({ $($tool:tt)* }),* $(,)?] , $($rest:tt)*) => {
        $crate::__plugin!(@munch [$($meta)*] [$($tools)* $({ $($tool)* })*] ; $($rest)*);
    };
    (@munch [$($meta:tt)*] [$($tools:tt)*] ; destroy : $f:expr , $($rest:tt)*) => {
        #[no_mangle]
        pub extern "C" fn morph_destroy(ptr: u32, len: u32) -> u64 {
            $crate::exchange::export("morph_destroy", ptr, len, |_input| $crate::registry::destroy($f))
        }
        $crate::__plugin!(@munch [$($meta)*] [$($tools)*] ; $($rest)*);
    };
    (@munch [$($meta:tt)*] [$($tools:tt)*] ; instance_replaced : $f:expr , $($rest:tt)*) => {
        #[no_mangle]
        pub extern "C" fn morph_instance_replaced(ptr: u32, len: u32) -> u64 {
            $crate::exchange::export("morph_instance_replaced", ptr, len, |input| {
                $crate::registry::instance_replaced(input, $f)
            })
        }
        $crate::__plugin!(@munch [$($meta)*] [$($tools)*] ; $($rest)*);
    };
    (@munch [$($meta:tt)*] [$($tools:tt)*] ; $hook:ident : raw $f:expr , $($rest:tt)*) => {
        $crate::__hook_export!($hook, raw, $f);
        $crate::__plugin!(@munch [$($meta)* (hook $hook)] [$($tools)*] ; $($rest)*);
    };
    (@munch [$($meta:tt)*] [$($tools:tt)*] ; $hook:ident : $f:expr , $($rest:tt)*) => {
        $crate::__hook_export!($hook, typed, $f);
        $crate::__plugin!(@munch [$($meta)* (hook $hook)] [$($tools)*] ; $($rest)*);
    };
    (@munch [$($meta:tt)*] [$($tools:tt)*] ; $($bad:tt)*) => {
        ::std::compile_error!(::std::concat!(
            "morph_pdk::plugin!: expected `key: value,` (keys: name, version, capabilities, history, requires, ",
            "tools, destroy, instance_replaced, and the hooks), at: ", ::std::stringify!($($bad)*)
        ));
    };

    (@finish [$($meta:tt)*] [$($tools:tt)*]) => {
        /// The ABI v1 marker; never called.
        #[no_mangle]
        pub extern "C" fn morph_abi_v1() {}

        /// `morph_alloc(size) -> ptr`: a buffer for the host's next input.
        #[no_mangle]
        pub extern "C" fn morph_alloc(size: u32) -> u32 {
            $crate::exchange::alloc(size)
        }

        /// `morph_describe`: the plugin's manifest.
        #[no_mangle]
        pub extern "C" fn morph_describe(ptr: u32, len: u32) -> u64 {
            $crate::exchange::export("morph_describe", ptr, len, |_input| {
                let mut meta = $crate::registry::Meta::new();
                $( $crate::__plugin!(@meta meta $meta); )*
                $( $crate::__plugin!(@tool_meta meta $tools); )*
                meta.manifest_json()
            })
        }

        $crate::__plugin!(@call_tool [$($tools)*]);
    };

    (@meta $m:ident (name $e:expr)) => { $m.name($e) };
    (@meta $m:ident (version $e:expr)) => { $m.version($e) };
    (@meta $m:ident (history $e:expr)) => { $m.history($e) };
    (@meta $m:ident (capabilities [$($c:expr),*])) => { $m.capabilities(&[$($c),*]) };
    (@meta $m:ident (requires [$($c:expr),*])) => { $m.requires(&[$($c),*]) };
    (@meta $m:ident (hook $h:ident)) => { $m.hook(::std::stringify!($h)) };

    (@tool_meta $m:ident { name : $n:expr , description : $d:expr , schema : $s:expr , run : $($f:tt)* }) => {
        $m.tool($n, $d, $s)
    };
    (@tool_meta $m:ident { $($bad:tt)* }) => {
        ::std::compile_error!(::std::concat!(
            "morph_pdk::plugin!: a tool is `{ name: ..., description: ..., schema: ..., run: f }`, got: { ",
            ::std::stringify!($($bad)*), " }"
        ))
    };

    (@call_tool []) => {};
    (@call_tool [$($tool:tt)+]) => {
        /// `morph_call_tool`: runs one of the plugin's tools.
        #[no_mangle]
        pub extern "C" fn morph_call_tool(ptr: u32, len: u32) -> u64 {
            $crate::exchange::export("morph_call_tool", ptr, len, |input| {
                $crate::registry::call_tool(input, &[$( $crate::__plugin!(@tool_fn $tool) ),+])
            })
        }
    };

    (@tool_fn { name : $n:expr , description : $d:expr , schema : $s:expr , run : raw $f:expr $(,)? }) => {
        $crate::registry::Tool { name: $n, run: &|params: &str| $crate::registry::raw_tool($f, params) }
    };
    (@tool_fn { name : $n:expr , description : $d:expr , schema : $s:expr , run : $f:expr $(,)? }) => {
        $crate::registry::Tool { name: $n, run: &|params: &str| $crate::__typed_tool!($n, $f, params) }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __hook_fn {
    ($export:ident, $hook:ident, raw, $f:expr) => {
        #[doc = ::std::concat!("`", ::std::stringify!($export), "`: the `", ::std::stringify!($hook), "` hook (raw JSON).")]
        #[no_mangle]
        pub extern "C" fn $export(ptr: u32, len: u32) -> u64 {
            $crate::exchange::export(::std::stringify!($export), ptr, len, |input| {
                $crate::registry::raw_hook($f, input)
            })
        }
    };
    ($export:ident, $hook:ident, typed, $f:expr) => {
        #[doc = ::std::concat!("`", ::std::stringify!($export), "`: the `", ::std::stringify!($hook), "` hook.")]
        #[no_mangle]
        pub extern "C" fn $export(ptr: u32, len: u32) -> u64 {
            $crate::exchange::export(::std::stringify!($export), ptr, len, |input| {
                $crate::__typed_hook!($hook, $f, input)
            })
        }
    };
}

#[cfg(feature = "serde")]
#[doc(hidden)]
#[macro_export]
macro_rules! __typed_hook {
    ($hook:ident, $f:expr, $input:expr) => {
        $crate::typed::$hook($f, $input)
    };
}

#[cfg(not(feature = "serde"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __typed_hook {
    ($hook:ident, $f:expr, $input:expr) => {
        ::std::compile_error!(::std::concat!(
            "morph_pdk::plugin!: the typed hook `",
            ::std::stringify!($hook),
            "` needs morph-pdk's `serde` feature; ",
            "without it, give a raw hook: `",
            ::std::stringify!($hook),
            ": raw f` with fn f(&[u8]) -> Result<Vec<u8>, E>"
        ))
    };
}

#[cfg(feature = "serde")]
#[doc(hidden)]
#[macro_export]
macro_rules! __typed_tool {
    ($name:expr, $f:expr, $params:expr) => {
        $crate::typed::tool($name, $f, $params)
    };
}

#[cfg(not(feature = "serde"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __typed_tool {
    ($name:expr, $f:expr, $params:expr) => {
        ::std::compile_error!(
            "morph_pdk::plugin!: typed tools need morph-pdk's `serde` feature; without it, use `run: raw f` with fn f(&str) -> Result<String, E>"
        )
    };
}
