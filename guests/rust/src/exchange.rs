//! The memory exchange of ABI v1 (SPEC section 2): `morph_alloc`, the packed
//! `i64` result, and who owns which buffer when.
//!
//! One call, as the host makes it:
//!
//! 1. `morph_alloc(size)` returns the address of `size` writable bytes (0:
//!    cannot allocate). [`alloc`] keeps the buffer in a *pending* list.
//! 2. The host writes the JSON input there and calls the export with
//!    `(ptr, len)`. [`export`] takes the buffer out of the pending list: it is
//!    the guest's again, and is freed when the call returns.
//! 3. The export returns `(out_ptr << 32) | len`, bit 31 set for a
//!    guest-reported error. [`export`] keeps the output buffer alive until
//!    the next export call on the instance, as the ABI requires.
//!
//! The host never frees anything: one `morph_alloc` and one export call are
//! the whole cost of a call.
//!
//! Addresses are the real linear-memory addresses on `wasm32`. Elsewhere
//! (native `cargo test`) pointers do not fit the ABI's `u32`, so buffers get
//! small synthetic addresses instead, and [`crate::testing`] reads and writes
//! them: the protocol, and every rule above, runs unchanged in native tests.

use std::alloc::{alloc_zeroed, Layout};
use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Bit 31 of a packed result: the bytes are a guest-reported error message
/// (UTF-8 text), not the export's JSON output.
pub const ERROR_FLAG: u32 = 1 << 31;

/// The largest length a packed result can carry.
pub const MAX_PAYLOAD: u32 = ERROR_FLAG - 1;

/// The largest input buffer `morph_alloc` hands out; a larger request answers
/// 0, which the host reports as a guest error, rather than the guest dying of
/// an impossible allocation.
pub const MAX_ALLOC: u32 = 1 << 30;

/// Packs an export's result: the address in the high 32 bits, the length in
/// the low 31, and [`ERROR_FLAG`] when `is_err`. `pack(0, 0, false)` is 0:
/// success with empty output.
pub const fn pack(ptr: u32, len: u32, is_err: bool) -> u64 {
    let mut low = len & MAX_PAYLOAD;
    if is_err {
        low |= ERROR_FLAG;
    }
    ((ptr as u64) << 32) | low as u64
}

/// Unpacks a result made by [`pack`]: `(ptr, len, is_err)`.
pub const fn unpack(v: u64) -> (u32, u32, bool) {
    ((v >> 32) as u32, (v as u32) & MAX_PAYLOAD, (v as u32) & ERROR_FLAG != 0)
}

/// What a hook answers: its output bytes (empty: the zero payload, packed as
/// 0) or the message of a guest-reported error.
pub type RawResult = Result<Vec<u8>, String>;

/// The buffers the host holds addresses of.
pub(crate) struct Exchange {
    /// Input buffers from `morph_alloc` that no export has consumed yet.
    pending: Vec<(u32, Vec<u8>)>,
    /// The last output, valid until the next export call.
    last: Option<(u32, Vec<u8>)>,
    /// The next synthetic address (native builds only).
    #[cfg(not(target_arch = "wasm32"))]
    next: u32,
}

impl Exchange {
    pub(crate) const fn new() -> Exchange {
        Exchange {
            pending: Vec::new(),
            last: None,
            #[cfg(not(target_arch = "wasm32"))]
            next: 0,
        }
    }

    /// The address the host sees for buf.
    #[cfg(target_arch = "wasm32")]
    fn addr(&mut self, buf: &[u8]) -> u32 {
        buf.as_ptr() as usize as u32
    }

    /// A fresh synthetic address, never 0, 8-byte steps like an allocator's.
    #[cfg(not(target_arch = "wasm32"))]
    fn addr(&mut self, _buf: &[u8]) -> u32 {
        self.next = self.next.wrapping_add(8);
        if self.next == 0 {
            self.next = 8;
        }
        self.next
    }

    /// `morph_alloc`: the address of `size` zeroed writable bytes, or 0.
    pub(crate) fn alloc(&mut self, size: u32) -> u32 {
        if size > MAX_ALLOC {
            return 0;
        }
        let n = size.max(1) as usize; // a real address even for an empty request
        let buf = match zeroed(n) {
            Some(buf) => buf,
            None => return 0,
        };
        let ptr = self.addr(&buf);
        self.pending.push((ptr, buf));
        ptr
    }

    /// Starts an export call: frees the previous output, and returns the
    /// input the host wrote at `ptr`. Every pending buffer is forgotten: from
    /// now on they belong to this call, or to no one.
    pub(crate) fn begin(&mut self, ptr: u32, len: u32) -> Result<Vec<u8>, String> {
        self.last = None;
        let mut found = None;
        for (p, buf) in self.pending.drain(..) {
            if p == ptr && found.is_none() {
                found = Some(buf);
            }
        }
        if len == 0 {
            return Ok(Vec::new());
        }
        match found {
            Some(mut buf) if len as usize <= buf.len() => {
                buf.truncate(len as usize);
                Ok(buf)
            }
            _ => Err(format!("input [{ptr}, +{len}) is not a buffer from morph_alloc")),
        }
    }

    /// Ends an export call: keeps `out` alive and packs its address.
    pub(crate) fn finish(&mut self, mut out: Vec<u8>, mut is_err: bool) -> u64 {
        if out.len() > MAX_PAYLOAD as usize {
            out = format!("output of {} bytes is over the ABI's limit", out.len()).into_bytes();
            is_err = true;
        }
        if out.is_empty() {
            if !is_err {
                return 0;
            }
            out = b"error".to_vec();
        }
        let ptr = self.addr(&out);
        let len = out.len() as u32;
        self.last = Some((ptr, out));
        pack(ptr, len, is_err)
    }

    /// Unpacks the result of a host function that answers like an export
    /// (`http_request`): the host put its answer in a buffer it got from
    /// [`Exchange::alloc`], called back during the import, which is taken out
    /// of the pending list and returned with the error flag. An empty result
    /// is `(vec![], is_err)`.
    pub(crate) fn claim(&mut self, result: u64) -> Result<(Vec<u8>, bool), String> {
        let (ptr, len, is_err) = unpack(result);
        let mut found = None;
        if let Some(i) = self.pending.iter().position(|(p, _)| *p == ptr) {
            found = Some(self.pending.remove(i).1);
        }
        if len == 0 {
            return Ok((Vec::new(), is_err));
        }
        match found {
            Some(mut buf) if len as usize <= buf.len() => {
                buf.truncate(len as usize);
                Ok((buf, is_err))
            }
            _ => Err(format!("the host answered [{ptr}, +{len}), which is not a buffer from morph_alloc")),
        }
    }

    /// The bytes at [ptr, ptr+len) of the last output (native tests).
    #[cfg(not(target_arch = "wasm32"))]
    pub(crate) fn read(&self, ptr: u32, len: u32) -> Option<Vec<u8>> {
        match &self.last {
            Some((p, buf)) if *p == ptr && len as usize <= buf.len() => Some(buf[..len as usize].to_vec()),
            _ => None,
        }
    }

    /// Writes data into the pending buffer at ptr, as the host does (native tests).
    #[cfg(not(target_arch = "wasm32"))]
    pub(crate) fn write(&mut self, ptr: u32, data: &[u8]) -> bool {
        for (p, buf) in self.pending.iter_mut() {
            if *p == ptr && data.len() <= buf.len() {
                buf[..data.len()].copy_from_slice(data);
                return true;
            }
        }
        false
    }

    /// How many buffers the exchange holds: (pending inputs, outputs kept).
    #[cfg(not(target_arch = "wasm32"))]
    pub(crate) fn held(&self) -> (usize, usize) {
        (self.pending.len(), self.last.is_some() as usize)
    }
}

/// n zeroed bytes, or None when the allocator has none to give (on wasm32:
/// memory.grow failed, say past the host's memory cap).
fn zeroed(n: usize) -> Option<Vec<u8>> {
    let layout = Layout::array::<u8>(n).ok()?;
    // SAFETY: n >= 1, so the layout is not zero-sized; the pointer, when not
    // null, is a fresh allocation of exactly n initialized (zeroed) bytes with
    // u8's layout, which is what Vec::from_raw_parts requires.
    unsafe {
        let p = alloc_zeroed(layout);
        if p.is_null() {
            return None;
        }
        Some(Vec::from_raw_parts(p, n, n))
    }
}

thread_local! {
    // wasm32-unknown-unknown has one thread, where this is a plain static.
    // Native tests run on many threads, each with its own exchange, like
    // separate instances.
    static EXCHANGE: RefCell<Exchange> = RefCell::new(Exchange::new());
    static CURRENT: Cell<&'static str> = Cell::new("");
}

pub(crate) fn with<R>(f: impl FnOnce(&mut Exchange) -> R) -> R {
    EXCHANGE.with(|x| f(&mut x.borrow_mut()))
}

/// The export being called on this instance ("" between calls), for the
/// panic message.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub(crate) fn current() -> &'static str {
    CURRENT.with(|c| c.get())
}

/// `morph_alloc(size) -> ptr`. The generated `morph_alloc` export calls it.
pub fn alloc(size: u32) -> u32 {
    with(|x| x.alloc(size))
}

/// Runs one `(ptr, len) -> i64` export: takes the input buffer, runs the
/// handler on it, and packs the handler's output or error. A handler that
/// panics answers a guest-reported error `"<export>: panic: <message>"` when
/// the panic unwinds (native builds, or a wasm build with panic=unwind); with
/// panic=abort, the usual and default setting of wasm32-unknown-unknown, the
/// panic message goes to the host's log and the call traps, which the host
/// reports as such and answers by discarding the instance.
///
/// The generated exports call it; plugin code does not need to.
pub fn export<F>(export: &'static str, ptr: u32, len: u32, handler: F) -> u64
where
    F: FnOnce(&[u8]) -> RawResult,
{
    crate::host::install_panic_hook();
    CURRENT.with(|c| c.set(export));
    // The exchange is not borrowed while the handler runs.
    let taken = with(|x| x.begin(ptr, len));
    let (out, is_err) = match taken {
        Err(msg) => (format!("{export}: {msg}").into_bytes(), true),
        Ok(input) => match catch_unwind(AssertUnwindSafe(|| handler(&input))) {
            Ok(Ok(out)) => (out, false),
            Ok(Err(msg)) if msg.is_empty() => (format!("{export}: error").into_bytes(), true),
            Ok(Err(msg)) => (msg.into_bytes(), true),
            Err(payload) => (format!("{export}: panic: {}", panic_message(payload.as_ref())).into_bytes(), true),
        },
    };
    CURRENT.with(|c| c.set(""));
    with(|x| x.finish(out, is_err))
}

/// The message of a panic payload (a &str or String, as panic! makes them).
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "(a non-string panic payload)"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_matches_the_spec() {
        assert_eq!(pack(0, 0, false), 0);
        assert_eq!(pack(16, 69, false), (16u64 << 32) | 69); // SPEC section 9
        assert_eq!(pack(128, 29, true), (128u64 << 32) | 0x8000_0000 | 29);
        assert_eq!(unpack(pack(0xFFFF_FFF0, MAX_PAYLOAD, true)), (0xFFFF_FFF0, MAX_PAYLOAD, true));
        assert_eq!(unpack(pack(7, 5, false)), (7, 5, false));
        // A length over 31 bits cannot set the error bit by accident.
        assert_eq!(unpack(pack(1, u32::MAX, false)), (1, MAX_PAYLOAD, false));
    }

    #[test]
    fn one_call() {
        let mut x = Exchange::new();
        let p = x.alloc(5);
        assert_ne!(p, 0);
        assert!(x.write(p, b"hello"));
        assert_eq!(x.held(), (1, 0));
        let input = x.begin(p, 5).unwrap();
        assert_eq!(input, b"hello");
        assert_eq!(x.held(), (0, 0), "the input belongs to the call now");
        let r = x.finish(b"{\"ok\":1}".to_vec(), false);
        let (ptr, len, is_err) = unpack(r);
        assert!(!is_err);
        assert_eq!(x.read(ptr, len).unwrap(), b"{\"ok\":1}");
        // The output stays valid until the next export call...
        let p2 = x.alloc(1);
        assert_eq!(x.read(ptr, len).unwrap(), b"{\"ok\":1}");
        // ...which frees it.
        x.begin(p2, 0).unwrap();
        assert_eq!(x.read(ptr, len), None);
        assert_eq!(x.held(), (0, 0));
    }

    #[test]
    fn input_shorter_than_the_buffer() {
        let mut x = Exchange::new();
        let p = x.alloc(10);
        x.write(p, b"abc");
        assert_eq!(x.begin(p, 3).unwrap(), b"abc");
    }

    #[test]
    fn empty_and_error_results() {
        let mut x = Exchange::new();
        assert_eq!(x.finish(Vec::new(), false), 0, "empty success is 0");
        let (ptr, len, is_err) = unpack(x.finish(Vec::new(), true));
        assert!(is_err);
        assert_eq!(x.read(ptr, len).unwrap(), b"error", "an error always has a message");
        let (ptr, len, is_err) = unpack(x.finish(b"bad input".to_vec(), true));
        assert!(is_err);
        assert_eq!(x.read(ptr, len).unwrap(), b"bad input");
    }

    #[test]
    fn claim_takes_the_answer_buffer() {
        let mut x = Exchange::new();
        let other = x.alloc(4);
        let p = x.alloc(8);
        assert!(x.write(p, b"answer!!"));
        assert_eq!(x.claim(pack(p, 6, false)).unwrap(), (b"answer".to_vec(), false));
        assert_eq!(x.held(), (1, 0), "only the answer's buffer leaves the pending list");
        let q = x.alloc(3);
        x.write(q, b"bad");
        assert_eq!(x.claim(pack(q, 3, true)).unwrap(), (b"bad".to_vec(), true));
        assert_eq!(x.claim(pack(0, 0, true)).unwrap(), (Vec::new(), true), "an error the guest could not receive");
        assert!(x.claim(pack(other + 1000, 2, false)).unwrap_err().contains("not a buffer from morph_alloc"));
        assert!(x.claim(pack(other, 5, false)).is_err(), "longer than the buffer");
    }

    #[test]
    fn alloc_limits() {
        let mut x = Exchange::new();
        assert_eq!(x.alloc(MAX_ALLOC + 1), 0);
        assert_ne!(x.alloc(0), 0, "an empty request still gets an address");
    }

    #[test]
    fn input_not_from_alloc() {
        let mut x = Exchange::new();
        let p = x.alloc(4);
        let err = x.begin(p + 1000, 4).unwrap_err();
        assert!(err.contains("is not a buffer from morph_alloc"), "{err}");
        let p = x.alloc(4);
        assert!(x.begin(p, 5).is_err(), "longer than the buffer");
        // Empty input needs no buffer (ptr is 0), and forgets stale ones.
        x.alloc(4);
        assert_eq!(x.begin(0, 0).unwrap(), b"");
        assert_eq!(x.held(), (0, 0));
    }

    #[test]
    fn export_packs_handler_results() {
        let call = |input: &[u8], h: &dyn Fn(&[u8]) -> RawResult| -> (Vec<u8>, bool) {
            let p = alloc(input.len() as u32);
            with(|x| x.write(p, input));
            let (ptr, len, is_err) = unpack(export("morph_test", p, input.len() as u32, h));
            if ptr == 0 && len == 0 && !is_err {
                return (Vec::new(), false);
            }
            (with(|x| x.read(ptr, len)).unwrap(), is_err)
        };
        assert_eq!(call(b"abc", &|i| Ok(i.to_ascii_uppercase())), (b"ABC".to_vec(), false));
        assert_eq!(call(b"abc", &|_| Ok(Vec::new())), (Vec::new(), false));
        assert_eq!(call(b"abc", &|_| Err("no".into())), (b"no".to_vec(), true));
        assert_eq!(call(b"abc", &|_| Err(String::new())), (b"morph_test: error".to_vec(), true));
        let (msg, is_err) = call(b"abc", &|_| panic!("boom {}", 42));
        assert!(is_err);
        assert_eq!(String::from_utf8(msg).unwrap(), "morph_test: panic: boom 42");
        // After a panic the exchange is still in service.
        assert_eq!(call(b"x", &|i| Ok(i.to_vec())), (b"x".to_vec(), false));
        assert_eq!(current(), "");
        // An input the host did not get from morph_alloc.
        let (ptr, len, is_err) = unpack(export("morph_test", 12345, 3, |_| Ok(b"{}".to_vec())));
        assert!(is_err);
        let msg = String::from_utf8(with(|x| x.read(ptr, len)).unwrap()).unwrap();
        assert!(msg.starts_with("morph_test: input [12345, +3)"), "{msg}");
    }
}
