//! The CPU heap probe: a counting global allocator and the process-global event buffer.
//!
//! Every thread's allocations go through [`Counting`], so rayon workers are seen too;
//! the current phase is therefore process-global (a marker in the one stream), never
//! thread-local. The buffer lives in memory obtained from `System` directly, so the
//! recorder's own bookkeeping never re-enters the global allocator and is never counted.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use vramtest_model::{Category, Event, Phase};

/// The heap probe as a `Backend` (in the harness's child): every heap allocation of the test's
/// process (the child measures with it in `harness::child::measure`).
pub(crate) struct Heap;

/// A global allocator that reports every allocation to the recorder, around `A`
/// (`System` unless the user names their own with `vramtest::main!(allocator = ..)`).
pub struct Counting<A> {
    inner: A,
}

impl<A> Counting<A> {
    /// Wraps `inner`.
    pub const fn new(inner: A) -> Self {
        Counting { inner }
    }
}

// SAFETY: every method forwards to `inner` with the caller's arguments unchanged and
// returns its result unchanged; recording only reads the pointer and size.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Counting<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { self.inner.alloc(layout) };
        if !p.is_null() {
            on_alloc(p, layout.size(), is_cpu_only(&layout));
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { self.inner.alloc_zeroed(layout) };
        if !p.is_null() {
            on_alloc(p, layout.size(), is_cpu_only(&layout));
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // Record before releasing: once released, another thread may get (and record)
        // the same address.
        on_free(ptr, layout.size());
        unsafe { self.inner.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !RECORDING.load(Ordering::Relaxed) {
            let p = unsafe { self.inner.realloc(ptr, layout, new_size) };
            if !p.is_null() {
                LIVE.fetch_add(new_size as u64, Ordering::Relaxed);
                LIVE.fetch_sub(layout.size() as u64, Ordering::Relaxed);
            }
            return p;
        }
        // Hold the buffer while the inner allocator moves the block, so no other thread
        // can be handed the old address and record it before we record its release.
        let mut buf = lock();
        let p = unsafe { self.inner.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(new_size as u64, Ordering::Relaxed);
            LIVE.fetch_sub(layout.size() as u64, Ordering::Relaxed);
            // One resize of one block (see `Event::Realloc`): it keeps the phase it was
            // first allocated in, and a move counts both copies for a moment.
            buf.events.push(RawEvent::realloc_from(ptr as u64));
            buf.events.push(RawEvent::alloc(p as u64, new_size as u64));
            buf.on_call(new_size as u64);
        }
        p
    }
}

/// Whether the recorder appends events (only while a test is measured).
static RECORDING: AtomicBool = AtomicBool::new(false);
/// Bytes alive on the heap right now, recorded or not: the baseline at start.
static LIVE: AtomicU64 = AtomicU64::new(0);
/// Set once a `Counting` allocator has seen an allocation: the probe is installed.
static INSTALLED: AtomicBool = AtomicBool::new(false);
static BUFFER: Mutex<Recorder> = Mutex::new(Recorder::EMPTY);

/// The recorder's state: the event stream and, when call sites are asked for, the
/// stack traces of chosen allocator calls. All of it in memory from `System`.
struct Recorder {
    events: RawBuffer<RawEvent>,
    /// Allocator calls (allocations and resizes) recorded since `start`.
    calls: u32,
    /// Markers recorded since `start`: the stretch of the stream new calls are in.
    stretch: u32,
    /// Capture a trace of every call.
    capture_all: bool,
    /// The (stretch, size) of the calls to capture a trace of, sorted; and the index of
    /// the first entry of the current stretch or a later one.
    wanted: RawBuffer<(u32, u64)>,
    next_wanted: usize,
    traces: RawBuffer<Trace>,
}

impl Recorder {
    const EMPTY: Recorder = Recorder {
        events: RawBuffer::EMPTY,
        calls: 0,
        stretch: 0,
        capture_all: false,
        wanted: RawBuffer::EMPTY,
        next_wanted: 0,
        traces: RawBuffer::EMPTY,
    };

    /// One more allocator call of `size` bytes was recorded: capture its trace if it
    /// is wanted.
    #[inline]
    fn on_call(&mut self, size: u64) {
        let call = self.calls;
        self.calls += 1;
        if self.capture_all || self.is_wanted(size) {
            self.traces.push(Trace::capture(call));
        }
    }

    fn is_wanted(&mut self, size: u64) -> bool {
        let wanted = self.wanted.as_slice();
        if wanted.is_empty() {
            return false;
        }
        let stretch = self.stretch;
        while wanted
            .get(self.next_wanted)
            .is_some_and(|&(s, _)| s < stretch)
        {
            self.next_wanted += 1;
        }
        let here = &wanted[self.next_wanted..];
        let end = here.partition_point(|&(s, _)| s == stretch);
        here[..end].binary_search_by_key(&size, |&(_, b)| b).is_ok()
    }

    /// A marker was recorded: a new stretch begins.
    #[inline]
    fn on_marker(&mut self) {
        self.stretch += 1;
    }
}

/// The most frames a trace keeps (from the allocator up).
const TRACE_DEPTH: usize = 64;

/// The return addresses of one allocator call's stack, innermost first.
#[derive(Clone, Copy)]
struct Trace {
    call: u32,
    depth: u32,
    ips: [usize; TRACE_DEPTH],
}

impl Trace {
    #[inline(never)]
    fn capture(call: u32) -> Trace {
        let mut t = Trace {
            call,
            depth: 0,
            ips: [0; TRACE_DEPTH],
        };
        // SAFETY: `trace_unsynchronized` is unsafe only because unwinders may not be
        // reentrant; the recorder's mutex is held, so no other capture runs at once.
        // Walking the stack allocates nothing through Rust's global allocator (the
        // unwinder's own bookkeeping uses libc's), so it never re-enters the recorder.
        unsafe {
            backtrace::trace_unsynchronized(|frame| {
                t.ips[t.depth as usize] = frame.ip() as usize;
                t.depth += 1;
                (t.depth as usize) < TRACE_DEPTH
            });
        }
        t
    }
}

/// The alignment from which a heap block is CPU-only memory: what a CPU needs to run
/// the step and a GPU never holds. gemm (candle's and burn's CPU matmul) allocates its
/// per-thread L2 packing slab and its per-call packing buffers aligned to a cache-line
/// pair (`CACHELINE_ALIGN`, 128 B on x86_64 and aarch64), and so does crossbeam's
/// `CachePadded` (rayon's thread-pool queues); tensors are aligned to their element
/// type (4 B for f32), so a tensor the exact size of a slab is still a tensor. The
/// ledger keeps these blocks apart (`Event::CpuOnlyAlloc`): never in a category, the
/// gated peak or the CUDA prediction.
pub const CPU_ONLY_ALIGN: usize = 128;

/// Whether a block of `layout` is CPU-only memory (see [`CPU_ONLY_ALIGN`]).
#[inline]
pub fn is_cpu_only(layout: &Layout) -> bool {
    layout.align() >= CPU_ONLY_ALIGN
}

#[inline]
fn on_alloc(p: *mut u8, size: usize, cpu_only: bool) {
    INSTALLED.store(true, Ordering::Relaxed);
    LIVE.fetch_add(size as u64, Ordering::Relaxed);
    if RECORDING.load(Ordering::Relaxed) {
        let mut r = lock();
        r.events.push(if cpu_only {
            RawEvent::cpu_only(p as u64, size as u64)
        } else {
            RawEvent::alloc(p as u64, size as u64)
        });
        r.on_call(size as u64);
    }
}

#[inline]
fn on_free(p: *mut u8, size: usize) {
    LIVE.fetch_sub(size as u64, Ordering::Relaxed);
    if RECORDING.load(Ordering::Relaxed) {
        lock().events.push(RawEvent::free(p as u64));
    }
}

fn lock() -> std::sync::MutexGuard<'static, Recorder> {
    // A poisoned buffer is still a valid buffer: pushes never leave it half-written.
    BUFFER.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether a `Counting` allocator is the process's global allocator.
pub fn installed() -> bool {
    // Make sure at least one allocation has happened before asking.
    drop(std::hint::black_box(Box::new(0u8)));
    INSTALLED.load(Ordering::Relaxed)
}

/// Records a boundary marker (phase, iteration, tag) in the stream.
pub fn mark(event: Event) {
    if RECORDING.load(Ordering::Relaxed) {
        let mut r = lock();
        r.events.push(RawEvent::marker(event));
        r.on_marker();
    }
}

/// Starts recording with an empty stream; returns the baseline (bytes alive now).
pub fn start() -> u64 {
    let mut buf = lock();
    buf.events.release();
    buf.events.reserve_initial();
    buf.traces.release();
    buf.calls = 0;
    buf.stretch = 0;
    buf.next_wanted = 0;
    let baseline = LIVE.load(Ordering::Relaxed);
    RECORDING.store(true, Ordering::SeqCst);
    baseline
}

/// Stops recording and decodes the stream.
pub fn stop() -> Vec<Event> {
    RECORDING.store(false, Ordering::SeqCst);
    let buf = lock();
    // Decoding allocates through the global allocator: recording is off by now.
    let events = decode(buf.events.as_slice());
    drop(buf);
    events
}

/// Which allocator calls of the next recording get a stack trace: those of the given
/// sizes in the given stretches (see `vramtest_model::sites::Plan`), or every one.
pub fn capture(calls: CaptureRequest<'_>) {
    let mut buf = lock();
    buf.wanted.release();
    buf.capture_all = matches!(calls, CaptureRequest::Everything);
    if let CaptureRequest::Sizes(wanted) = calls {
        debug_assert!(wanted.is_sorted());
        for &w in wanted {
            buf.wanted.push(w);
        }
    }
}

/// What [`capture`] asks for.
pub enum CaptureRequest<'a> {
    /// `(stretch, size)` pairs, sorted.
    Sizes(&'a [(u32, u64)]),
    Everything,
}

/// The stack traces the last recording captured: per call, its return addresses,
/// innermost first.
pub fn traces() -> Vec<(u32, Vec<usize>)> {
    let buf = lock();
    let copied: Vec<(u32, Vec<usize>)> = buf
        .traces
        .as_slice()
        .iter()
        .map(|t| (t.call, t.ips[..t.depth as usize].to_vec()))
        .collect();
    drop(buf);
    copied
}

/// Bytes the recorder's buffer holds right now (capacity, growth slack included).
pub fn recorder_capacity_bytes() -> usize {
    lock().events.cap * BYTES_PER_EVENT
}

/// Bytes the recorder holds per recorded event.
pub const BYTES_PER_EVENT: usize = std::mem::size_of::<RawEvent>();
const _: () = assert!(
    BYTES_PER_EVENT <= 32,
    "the recorder's budget is 32 B per event"
);

/// Turns the raw stream into events: a `realloc_from` and the `alloc` after it are one
/// `Event::Realloc`.
fn decode(raw: &[RawEvent]) -> Vec<Event> {
    let mut events = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let e = &raw[i];
        i += 1;
        if e.a != 0 && e.b == REALLOC_FROM {
            if let Some(next) = raw.get(i) {
                i += 1;
                events.push(Event::Realloc {
                    from: e.a,
                    to: next.a,
                    bytes: next.b & !CPU_ONLY_BIT,
                });
            }
            continue;
        }
        events.push(e.decode());
    }
    events
}

/// One event in 16 bytes. `a` is an address, or 0 for markers (no allocation lives at
/// address 0); `b` is a size (with `CPU_ONLY_BIT` set for CPU-only memory), `FREE`,
/// `REALLOC_FROM` or a marker code. A resize takes two: `realloc_from(old)` then
/// `alloc(new, size)`, pushed under one lock.
#[derive(Clone, Copy)]
#[repr(C)]
struct RawEvent {
    a: u64,
    b: u64,
}

const FREE: u64 = u64::MAX;
const REALLOC_FROM: u64 = u64::MAX - 1;
/// Set in `b` for an allocation of CPU-only memory. Sizes stay below 2^63 (a `Layout`
/// is at most `isize::MAX` bytes), and `FREE` and `REALLOC_FROM` are matched first.
const CPU_ONLY_BIT: u64 = 1 << 63;

impl RawEvent {
    fn alloc(addr: u64, size: u64) -> Self {
        RawEvent { a: addr, b: size }
    }
    fn cpu_only(addr: u64, size: u64) -> Self {
        RawEvent {
            a: addr,
            b: size | CPU_ONLY_BIT,
        }
    }
    fn free(addr: u64) -> Self {
        RawEvent { a: addr, b: FREE }
    }
    fn realloc_from(addr: u64) -> Self {
        RawEvent {
            a: addr,
            b: REALLOC_FROM,
        }
    }
    fn marker(e: Event) -> Self {
        let (kind, arg): (u64, u64) = match e {
            Event::PhaseStart(p) => (1, Phase::ALL.iter().position(|&x| x == p).unwrap() as u64),
            Event::PhaseEnd => (2, 0),
            Event::IterationStart(n) => (3, n as u64),
            Event::IterationEnd => (4, 0),
            Event::TagPush(c) => (5, c.index() as u64),
            Event::TagPop => (6, 0),
            Event::Alloc { .. }
            | Event::CpuOnlyAlloc { .. }
            | Event::Free { .. }
            | Event::Realloc { .. } => {
                unreachable!("not a marker")
            }
        };
        RawEvent {
            a: 0,
            b: kind << 32 | arg,
        }
    }
    fn decode(&self) -> Event {
        if self.a != 0 {
            return if self.b == FREE {
                Event::Free { id: self.a }
            } else if self.b & CPU_ONLY_BIT != 0 {
                Event::CpuOnlyAlloc {
                    id: self.a,
                    bytes: self.b & !CPU_ONLY_BIT,
                }
            } else {
                Event::Alloc {
                    id: self.a,
                    bytes: self.b,
                }
            };
        }
        let arg = self.b & 0xffff_ffff;
        match self.b >> 32 {
            1 => Event::PhaseStart(Phase::ALL[arg as usize]),
            2 => Event::PhaseEnd,
            3 => Event::IterationStart(arg as u32),
            4 => Event::IterationEnd,
            5 => Event::TagPush(Category::ALL[arg as usize]),
            _ => Event::TagPop,
        }
    }
}

/// A growable array of `T` in memory from `System`, outside the counted heap.
struct RawBuffer<T> {
    ptr: *mut T,
    len: usize,
    cap: usize,
}

// SAFETY: a buffer is only reached through the `BUFFER` mutex.
unsafe impl<T: Send> Send for RawBuffer<T> {}

impl<T: Copy> RawBuffer<T> {
    const EMPTY: RawBuffer<T> = RawBuffer {
        ptr: std::ptr::null_mut(),
        len: 0,
        cap: 0,
    };
    const INITIAL: usize = 1 << 12;

    fn layout(cap: usize) -> Layout {
        Layout::array::<T>(cap).expect("recorder buffer size overflows")
    }

    fn reserve_initial(&mut self) {
        if self.cap == 0 {
            self.grow_to(Self::INITIAL);
        }
    }

    fn grow_to(&mut self, cap: usize) {
        // SAFETY: layouts are non-zero-sized; `ptr` was allocated by `System` with the
        // layout of `self.cap`.
        let p = unsafe {
            if self.ptr.is_null() {
                System.alloc(Self::layout(cap))
            } else {
                System.realloc(
                    self.ptr as *mut u8,
                    Self::layout(self.cap),
                    Self::layout(cap).size(),
                )
            }
        };
        if p.is_null() {
            std::alloc::handle_alloc_error(Self::layout(cap));
        }
        self.ptr = p as *mut T;
        self.cap = cap;
    }

    #[inline]
    fn push(&mut self, e: T) {
        if self.len == self.cap {
            self.grow_to((self.cap * 2).max(Self::INITIAL));
        }
        // SAFETY: len < cap after growing.
        unsafe { self.ptr.add(self.len).write(e) };
        self.len += 1;
    }

    fn as_slice(&self) -> &[T] {
        if self.ptr.is_null() {
            return &[];
        }
        // SAFETY: the first `len` elements were written by `push`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    fn release(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: allocated by `System` with this layout.
            unsafe { System.dealloc(self.ptr as *mut u8, Self::layout(self.cap)) };
        }
        *self = RawBuffer::EMPTY;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_events_round_trip() {
        let events = [
            Event::Alloc {
                id: 0x1000,
                bytes: 64,
            },
            Event::Free { id: 0x1000 },
            Event::CpuOnlyAlloc {
                id: 0x2000,
                bytes: 1 << 20,
            },
            Event::PhaseStart(Phase::OptimizerStep),
            Event::PhaseEnd,
            Event::IterationStart(7),
            Event::IterationEnd,
            Event::TagPush(Category::Workspace),
            Event::TagPop,
        ];
        for e in events {
            let raw = match e {
                Event::Alloc { id, bytes } => RawEvent::alloc(id, bytes),
                Event::CpuOnlyAlloc { id, bytes } => RawEvent::cpu_only(id, bytes),
                Event::Free { id } => RawEvent::free(id),
                m => RawEvent::marker(m),
            };
            assert_eq!(raw.decode(), e);
        }
    }

    #[test]
    fn a_resize_is_two_raw_entries_and_one_event() {
        let raw = [
            RawEvent::alloc(0x1000, 16),
            RawEvent::realloc_from(0x1000),
            RawEvent::alloc(0x2000, 64),
            RawEvent::realloc_from(0x2000),
            RawEvent::alloc(0x2000, 128),
            RawEvent::free(0x2000),
        ];
        assert_eq!(
            decode(&raw),
            [
                Event::Alloc {
                    id: 0x1000,
                    bytes: 16
                },
                Event::Realloc {
                    from: 0x1000,
                    to: 0x2000,
                    bytes: 64
                },
                Event::Realloc {
                    from: 0x2000,
                    to: 0x2000,
                    bytes: 128
                },
                Event::Free { id: 0x2000 },
            ]
        );
    }
}
