//! How fast `ledger::profile` replays a stream, and how much memory it needs per
//! allocation. Run with `cargo bench -p vramtest-model --bench replay`.
//!
//! Synthetic streams: 3 iterations × 4 phases (inputs, forward, backward,
//! optimizer_step); each phase allocates blocks of 16 B to 4 KiB and frees every other
//! one before it ends; the survivors are freed when the iteration ends, except the
//! optimizer state made in iteration 0 (up to 2 million allocations alive at once). Ids
//! are the addresses a simple allocator would hand out (freed addresses are reused, last
//! freed first), as a real heap's are. `VRAMTEST_BENCH_EVENTS` sets the length (default
//! 20 000 000). The same number of events is also replayed as 3000 iterations (a long
//! run of a small step: a few thousand allocations alive at once).
//!
//! Real streams: the fixtures' steps as the heap probe recorded them, in
//! `benches/data/` (see its README for how to record them again), each replayed many
//! times.
//!
//! Memory is what the replay makes resident besides the stream (Linux: the peak resident
//! set, reset before each replay).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;
use vramtest_model::{Category, Event, Phase, profile};

/// Counts the bench's own heap: the address space the ledger asks for.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to `System` unchanged; only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            let now = LIVE.fetch_add(new_size, Ordering::Relaxed) + new_size;
            PEAK.fetch_max(now, Ordering::Relaxed);
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// A toy allocator for ids: size classes of 16 B with a last-in-first-out free list each.
struct Addresses {
    next: u64,
    free: Vec<Vec<u64>>,
}

impl Addresses {
    fn alloc(&mut self, bytes: u64) -> u64 {
        let class = bytes.div_ceil(16) as usize;
        if let Some(a) = self.free[class].pop() {
            return a;
        }
        let a = self.next;
        self.next += 16 * class as u64;
        a
    }
    fn free(&mut self, addr: u64, bytes: u64) {
        self.free[bytes.div_ceil(16) as usize].push(addr);
    }
}

fn stream(target: usize, iterations: u32) -> Vec<Event> {
    let phases = [
        Phase::Inputs,
        Phase::Forward,
        Phase::Backward,
        Phase::OptimizerStep,
    ];
    // Per phase: n allocations and n frees (half inside, half at the iteration's end).
    let per_phase = target / (iterations as usize * phases.len() * 2);
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut size = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        16 + rng % 4081
    };
    let mut addresses = Addresses {
        next: 0x1000,
        free: vec![Vec::new(); 4096 / 16 + 2],
    };
    let mut events = Vec::with_capacity(target + 64);
    for i in 0..iterations {
        events.push(Event::IterationStart(i));
        let mut survivors = Vec::new();
        for &phase in &phases {
            events.push(Event::PhaseStart(phase));
            let mut pending = None;
            for k in 0..per_phase {
                let bytes = size();
                let id = addresses.alloc(bytes);
                events.push(Event::Alloc { id, bytes });
                if k % 2 == 0 {
                    if let Some((id, bytes)) = pending.replace((id, bytes)) {
                        events.push(Event::Free { id });
                        addresses.free(id, bytes);
                    }
                } else if !(i == 0 && phase == Phase::OptimizerStep) {
                    survivors.push((id, bytes));
                }
            }
            if let Some((id, bytes)) = pending {
                events.push(Event::Free { id });
                addresses.free(id, bytes);
            }
            events.push(Event::PhaseEnd);
        }
        for (id, bytes) in survivors {
            events.push(Event::Free { id });
            addresses.free(id, bytes);
        }
        events.push(Event::IterationEnd);
    }
    events
}

/// This process's resident memory in bytes, now and at most since the peak was last
/// reset (Linux), where the system says.
fn resident() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        let kib: u64 = line[name.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kib * 1024)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// Resets the peak of [`resident`] to the memory resident now (Linux), if allowed.
fn reset_resident_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// CPU seconds this process has run so far (user + system), where the system says:
/// on a shared machine, wall time also counts other programs' turns.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// The fixtures' recorded streams (`benches/data/`).
const REAL: [(&str, &str); 3] = [
    (
        "vec-model linear_adam",
        include_str!("data/vec-model-linear-adam.events"),
    ),
    (
        "candle-mlp mlp_adamw",
        include_str!("data/candle-mlp-adamw.events"),
    ),
    (
        "candle-mlp mlp_sgd",
        include_str!("data/candle-mlp-sgd.events"),
    ),
];

fn main() {
    let target = std::env::var("VRAMTEST_BENCH_EVENTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000_000);
    let shapes: Vec<u32> = match std::env::var("VRAMTEST_BENCH_ITERATIONS") {
        Ok(n) => vec![n.parse().expect("VRAMTEST_BENCH_ITERATIONS is a number")],
        Err(_) => vec![3, 3000],
    };
    for (name, text) in REAL {
        replay_real(name, &parse(text));
    }
    for iterations in shapes {
        let events = stream(target, iterations);
        println!("synthetic, {iterations} iterations:");
        measure(&events);
    }
}

/// Reads the text form of `benches/data/`: one event a line, `a ID BYTES`, `f ID`,
/// `r FROM TO BYTES` (ids in hex), `ps PHASE`, `pe`, `is N`, `ie`, `tp CATEGORY`, `tt`.
fn parse(text: &str) -> Vec<Event> {
    let id = |s: Option<&str>| u64::from_str_radix(s.expect("an id"), 16).expect("a hex id");
    let n = |s: Option<&str>| s.expect("a number").parse::<u64>().expect("a number");
    text.lines()
        .map(|line| {
            let mut w = line.split(' ');
            match w.next() {
                Some("a") => Event::Alloc {
                    id: id(w.next()),
                    bytes: n(w.next()),
                },
                Some("f") => Event::Free { id: id(w.next()) },
                Some("r") => Event::Realloc {
                    from: id(w.next()),
                    to: id(w.next()),
                    bytes: n(w.next()),
                },
                Some("ps") => Event::PhaseStart(
                    w.next()
                        .and_then(|p| p.parse::<Phase>().ok())
                        .expect("a phase"),
                ),
                Some("pe") => Event::PhaseEnd,
                Some("is") => Event::IterationStart(n(w.next()) as u32),
                Some("ie") => Event::IterationEnd,
                Some("tp") => Event::TagPush(
                    w.next()
                        .and_then(|c| c.parse::<Category>().ok())
                        .expect("a category"),
                ),
                Some("tt") => Event::TagPop,
                _ => panic!("not an event: {line:?}"),
            }
        })
        .collect()
}

/// Replays a short stream over and over, in rounds; the best round.
fn replay_real(name: &str, events: &[Event]) {
    let repeats = (2_000_000 / events.len().max(1)).max(1);
    let mut best = f64::INFINITY;
    for _ in 0..15 {
        let t = Instant::now();
        for _ in 0..repeats {
            std::hint::black_box(profile(std::hint::black_box(events)));
        }
        best = best.min(t.elapsed().as_secs_f64() / repeats as f64);
    }
    println!(
        "{name}: {} events, {:.1} µs a replay, {:.1} M events/s",
        events.len(),
        best * 1e6,
        events.len() as f64 / best / 1e6
    );
}

/// Best of 3 replays of a long stream.
fn measure(events: &[Event]) {
    let allocations = events
        .iter()
        .filter(|e| matches!(e, Event::Alloc { .. }))
        .count();
    let mut best = f64::INFINITY;
    let mut best_cpu = f64::INFINITY;
    let mut extra = 0;
    let mut resident_extra = None;
    for _ in 0..3 {
        let before = LIVE.load(Ordering::Relaxed);
        PEAK.store(before, Ordering::Relaxed);
        let resident_before = reset_resident_peak().then(resident).flatten();
        let t = Instant::now();
        let cpu = cpu_seconds();
        std::hint::black_box(profile(events));
        best = best.min(t.elapsed().as_secs_f64());
        if let (Some(a), Some(b)) = (cpu, cpu_seconds()) {
            best_cpu = best_cpu.min(b - a);
        }
        extra = PEAK.load(Ordering::Relaxed) - before;
        if let (Some((now, _)), Some((_, peak))) = (resident_before, resident()) {
            resident_extra = Some(peak.saturating_sub(now));
        }
    }
    println!(
        "  {} events ({} allocations) in {:.3} s: {:.1} M events/s (CPU time: {:.3} s)",
        events.len(),
        allocations,
        best,
        events.len() as f64 / best / 1e6,
        best_cpu,
    );
    let mib = |bytes: usize| bytes as f64 / (1 << 20) as f64;
    match resident_extra {
        Some(bytes) => println!(
            "    memory: {:.1} MiB resident besides the stream, {:.1} B per allocation (heap asked for: {:.1} MiB)",
            mib(bytes as usize),
            bytes as f64 / allocations as f64,
            mib(extra),
        ),
        None => println!(
            "    memory: {:.1} MiB of heap besides the stream, {:.1} B per allocation",
            mib(extra),
            extra as f64 / allocations as f64,
        ),
    }
}
