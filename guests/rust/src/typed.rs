//! Typed hooks and tools (the `serde` feature): decode the input into a
//! payload of [`crate::types`], run the author's function, encode its output.
//! [`crate::plugin!`] calls these; each one's bounds say which function a
//! hook takes, so a function of the wrong shape is a compile error that
//! names the payload it should take.

use std::fmt::Display;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::exchange::RawResult;
use crate::types::*;

/// What a hook or tool function may return for an output `T`: `T` itself,
/// or `Result<T, E>` with any displayable error `E` (`String`, `&str`,
/// [`crate::Error`], `serde_json::Error`, ...), whose message becomes a
/// guest-reported error. Observing hooks return `()` or `Result<(), E>`;
/// tools return `String` or `Result<String, E>`.
pub trait IntoHookResult<T> {
    /// The output, or the error's message.
    fn into_hook_result(self) -> Result<T, String>;
}

macro_rules! into_hook_result {
    ($($t:ty),*) => {$(
        impl IntoHookResult<$t> for $t {
            fn into_hook_result(self) -> Result<$t, String> {
                Ok(self)
            }
        }
        impl<E: Display> IntoHookResult<$t> for Result<$t, E> {
            fn into_hook_result(self) -> Result<$t, String> {
                self.map_err(|e| e.to_string())
            }
        }
    )*};
}

/// Decodes a hook's input: empty input is the zero payload; unknown fields
/// are ignored.
pub fn decode<T: DeserializeOwned + Default>(hook: &str, input: &[u8]) -> Result<T, String> {
    if input.is_empty() {
        return Ok(T::default());
    }
    serde_json::from_slice(input).map_err(|e| format!("{hook}: invalid input: {e}"))
}

fn mutate<I, O, R, F>(hook: &str, f: F, input: &[u8]) -> RawResult
where
    I: DeserializeOwned + Default,
    O: Serialize,
    R: IntoHookResult<O>,
    F: FnOnce(I) -> R,
{
    let out = f(decode(hook, input)?).into_hook_result()?;
    serde_json::to_vec(&out).map_err(|e| format!("{hook}: encode output: {e}"))
}

fn observe<I, R, F>(hook: &str, f: F, input: &[u8]) -> RawResult
where
    I: DeserializeOwned + Default,
    R: IntoHookResult<()>,
    F: FnOnce(I) -> R,
{
    f(decode(hook, input)?).into_hook_result()?;
    Ok(Vec::new()) // observing hooks answer empty output
}

// A function per hook, generated from abi.Hooks: build_prompt, ...
include!("typed_hooks.rs");

/// Runs a typed tool: its params object decoded into `P` (an
/// [`Object`] for any params, or a struct of your own with serde's
/// `Deserialize`), its observation out.
pub fn tool<P, R, F>(name: &str, f: F, params: &str) -> Result<String, String>
where
    P: DeserializeOwned,
    R: IntoHookResult<String>,
    F: Fn(P) -> R,
{
    let p = serde_json::from_str(params).map_err(|e| format!("{name}: invalid params: {e}"))?;
    f(p).into_hook_result()
}
