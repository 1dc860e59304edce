//! The live allocations by id, as the first walk of the ledger keeps them.
//!
//! A long run keeps millions of allocations alive at once, and every allocation and
//! release looks one up, so this table decides how fast a replay is. [`LiveSet`] is a
//! bucketed hash table: each id has one home bucket of four slots that fills exactly
//! one 64 B cache line, so an event costs one cache line (which the walk prefetches a
//! few events ahead), a handful of comparisons without a probe loop, and no shifting on
//! removal.
//!
//! An id whose bucket is full goes to a small overflow table ([`Spill`]). One rule keeps
//! the overflow out of the common path: **a bucket with ids in the overflow is full.**
//! So an id whose bucket has a free slot is in that bucket or nowhere, and only a full
//! bucket sends a look-up on to the overflow; when a full bucket loses one, one of its
//! ids in the overflow (if any) moves into the freed slot.

/// A live allocation, as the table keeps it. Its bytes are in the ledger's per-allocation
/// words, so that four slots fill one cache line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Live {
    /// Its ordinal among allocations: its word in `Scan::blocks`.
    pub ordinal: u32,
    /// Where it was made: an index into `Scan::contexts` (below 2^31).
    pub ctx: u32,
}

/// Marks an unused slot. The allocation under this id itself lives in the overflow table.
const EMPTY: u64 = u64::MAX;

/// In a bucket's first slot's `ctx`: the bucket has sent ids to the overflow table since
/// the table last had none of its ids. Contexts are fewer than 2^31 (each needs a marker
/// event of its own), so the bit is free.
const SPILLED: u32 = 1 << 31;

/// Asks the processor to start loading the cache line `value` is on, for an access a
/// little later; only a hint.
#[inline(always)]
pub(super) fn prefetch<T>(value: &T) {
    prefetch_at(value);
}

/// [`prefetch`] by address: any address will do, for a prefetch never faults.
#[inline(always)]
fn prefetch_at<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: a prefetch is a hint with no effect on memory or program state, valid
        // for any address (it never faults), and SSE is part of every x86_64 target.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Multiplies the key's bits together (a multiply-xor hash, not SipHash) and scales the
/// high bits of the result to `0..n`.
#[inline(always)]
fn scaled_hash(key: u64, n: usize) -> usize {
    let h = (key ^ (key >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    ((u128::from(h) * n as u128) >> 64) as usize
}

/// Four slots, their ids first: one cache line.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
struct Bucket {
    ids: [u64; 4],
    lives: [Live; 4],
}

impl Bucket {
    const EMPTY: Bucket = Bucket {
        ids: [EMPTY; 4],
        lives: [Live { ordinal: 0, ctx: 0 }; 4],
    };

    /// The allocation in `slot`.
    #[inline(always)]
    fn live(&self, slot: usize) -> Live {
        let live = self.lives[slot];
        Live {
            ctx: live.ctx & !SPILLED,
            ..live
        }
    }

    /// Puts `id` and `live` in `slot`, keeping the bucket's [`SPILLED`] mark.
    #[inline(always)]
    fn set(&mut self, slot: usize, id: u64, live: Live) {
        let mark = self.lives[0].ctx & SPILLED;
        self.ids[slot] = id;
        self.lives[slot] = live;
        self.lives[0].ctx |= mark;
    }

    /// Whether ids of this bucket may be in the overflow table: when not, none are.
    #[inline(always)]
    fn spilled(&self) -> bool {
        self.lives[0].ctx & SPILLED != 0
    }

    fn mark_spilled(&mut self, spilled: bool) {
        if spilled {
            self.lives[0].ctx |= SPILLED;
        } else {
            self.lives[0].ctx &= !SPILLED;
        }
    }

    /// Which slots hold `id`, as a bit mask: four compares without a loop that may stop
    /// anywhere (two vector compares on x86_64).
    #[inline(always)]
    fn find(&self, id: u64) -> u32 {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{
                __m128i, _mm_and_si128, _mm_castsi128_pd, _mm_cmpeq_epi32, _mm_movemask_pd,
                _mm_set_epi64x, _mm_set1_epi64x, _mm_shuffle_epi32,
            };
            // Two ids a vector; equal 64-bit lanes are those whose two 32-bit halves
            // are both equal (SSE2, which every x86_64 processor has, compares only
            // 32 bits at a time).
            // SAFETY: SSE2 is part of every x86_64 target, and these intrinsics only
            // compute on values (no pointers).
            unsafe {
                let equal = |pair: __m128i| {
                    let halves = _mm_cmpeq_epi32(pair, _mm_set1_epi64x(id as i64));
                    let both = _mm_and_si128(halves, _mm_shuffle_epi32::<0b10_11_00_01>(halves));
                    _mm_movemask_pd(_mm_castsi128_pd(both)) as u32
                };
                let [a, b, c, d] = self.ids.map(|x| x as i64);
                equal(_mm_set_epi64x(b, a)) | equal(_mm_set_epi64x(d, c)) << 2
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let mut mask = 0;
            for (i, &slot) in self.ids.iter().enumerate() {
                mask |= u32::from(slot == id) << i;
            }
            mask
        }
    }
}

/// The live allocations by id: see the module's documentation.
pub(super) struct LiveSet {
    buckets: Vec<Bucket>,
    spill: Spill,
    /// How many ids may be in the overflow table before the set wants more buckets.
    spill_room: usize,
}

impl LiveSet {
    /// The fewest buckets a set has.
    const MIN_BUCKETS: usize = 1 << 10;

    /// A set for at most `live` allocations alive at once: a bucket for every 1.2 of
    /// them, so that the slots are 30% full when all are there and about 3% of the ids
    /// then find their bucket full and go to the overflow table. About 53 B per
    /// allocation alive at once (a bucket for every 1.5 took 43 B and was 5% slower on
    /// the benchmark's long run; a bucket each was no faster than 1.2 and took 64 B).
    /// More than `live` still fit; the overflow table then grows.
    #[cfg(test)]
    pub fn for_live(live: usize) -> LiveSet {
        LiveSet::with_buckets((live * 5 / 6).max(Self::MIN_BUCKETS), 0)
    }

    /// A set that starts small and doubles its buckets as it fills (see
    /// [`LiveSet::needs_room`]), for a walk that does not know beforehand how many
    /// allocations will be alive at once, only that they are at most `most`. It ends
    /// with a bucket for every 0.6 to 1.2 of the most alive at once.
    ///
    /// It reserves address space for the buckets of `most` at once, so that no doubling
    /// moves the table: the memory is taken (and zeroed) by the system only where the
    /// buckets grow into it. Where the reservation is refused, doubling moves the
    /// buckets instead.
    pub fn growing(most: usize) -> LiveSet {
        let mut last = Self::MIN_BUCKETS;
        while last * 6 / 5 < most {
            last *= 2;
        }
        LiveSet::with_buckets(Self::MIN_BUCKETS, last)
    }

    /// A set of `n` buckets, with room reserved for `reserve` in all.
    fn with_buckets(n: usize, reserve: usize) -> LiveSet {
        let mut buckets = Vec::new();
        if buckets.try_reserve_exact(reserve.max(n)).is_err() {
            buckets.reserve_exact(n);
        }
        advise_huge_pages(&mut buckets);
        buckets.resize(n, Bucket::EMPTY);
        LiveSet {
            buckets,
            spill: Spill::new(n),
            spill_room: Self::spill_room(n),
        }
    }

    /// How many ids `n` buckets send to the overflow table when they hold about 1.2 ids
    /// each: for evenly spread ids, a bucket of four slots overflows by 0.0095 ids on
    /// average at 1.2 ids a bucket (0.0066 at 1.1, 0.0134 at 1.3).
    fn spill_room(n: usize) -> usize {
        n / 128
    }

    /// Whether the set is fuller than it is sized for, so that the caller should call
    /// [`LiveSet::grow`] (after which every id has a new home bucket), when
    /// `allocations` were made so far. The overflow table tells: it fills up only as the
    /// buckets do, so the set does not count its ids on every change. It never has more
    /// buckets than allocations were made, so that ids the hash spreads badly cannot
    /// make it grow without bound.
    #[inline(always)]
    pub fn needs_room(&self, allocations: usize) -> bool {
        self.spill.len > self.spill_room && self.buckets.len() < allocations
    }

    /// Doubles the buckets. An id's home bucket `b` becomes `2b` or `2b + 1` (the hash
    /// is scaled to the number of buckets), so each bucket splits into two in one
    /// sequential sweep, from the last to the first, inside the same memory; the ids in
    /// the overflow table then go home again, most of them into a bucket with room.
    #[cold]
    #[inline(never)]
    pub fn grow(&mut self) {
        let n = self.buckets.len();
        self.buckets.reserve_exact(n);
        let base = self.buckets.as_mut_ptr();
        for b in (0..n).rev() {
            // SAFETY: the buffer has room for 2n buckets (reserved above), of which the
            // first n are initialised. Bucket `b` is read before `2b` and `2b + 1` are
            // written, and sweeping downwards, the buckets written so far (`2c`,
            // `2c + 1` for c > b) all lie above `b`: nothing is read after it was
            // overwritten. Every one of the 2n buckets is written once (`Bucket` is
            // `Copy`: nothing is dropped), so all are initialised before `set_len`.
            unsafe {
                let old = base.add(b).read();
                // Each id keeps its slot, in one half or the other (the other half gets
                // an unused slot there); the overflow mark goes (the overflow table is
                // emptied below).
                let mut lives = old.lives;
                lives[0].ctx &= !SPILLED;
                let (mut low, mut high) = ([EMPTY; 4], [EMPTY; 4]);
                for slot in 0..4 {
                    let id = old.ids[slot];
                    debug_assert!(id == EMPTY || scaled_hash(id, 2 * n) / 2 == b);
                    if id != EMPTY && scaled_hash(id, 2 * n) & 1 == 1 {
                        high[slot] = id;
                    } else {
                        low[slot] = id;
                    }
                }
                base.add(2 * b).write(Bucket { ids: low, lives });
                base.add(2 * b + 1).write(Bucket { ids: high, lives });
            }
        }
        // SAFETY: all 2n buckets were written above, within the reserved capacity.
        unsafe { self.buckets.set_len(2 * n) };
        self.spill_room = Self::spill_room(2 * n);
        let spilled = std::mem::replace(&mut self.spill, Spill::new(2 * n));
        for (id, live) in spilled.into_entries() {
            self.insert(id, live);
        }
    }

    /// The bytes the buckets take: what decides whether prefetching pays.
    pub fn bucket_bytes(&self) -> usize {
        std::mem::size_of_val(&self.buckets[..])
    }

    /// `id`'s bucket.
    #[inline(always)]
    pub fn home(&self, id: u64) -> usize {
        scaled_hash(id, self.buckets.len())
    }

    /// Asks the processor to start loading the bucket `home`: the replay calls it a few
    /// events ahead, so that the cache misses of consecutive events overlap instead of
    /// adding up.
    #[inline(always)]
    pub fn prefetch(&self, home: usize) {
        // An address, not a reference: no bounds check (`home` is in range anyway).
        prefetch_at(self.buckets.as_ptr().wrapping_add(home));
    }

    /// Puts `live` under `id`, returning what was there (an allocation whose free was
    /// missed).
    pub fn insert(&mut self, id: u64, live: Live) -> Option<Live> {
        self.insert_in(self.home(id), id, live)
    }

    /// [`LiveSet::insert`], with `id`'s bucket `home` computed already.
    #[inline(always)]
    pub fn insert_in(&mut self, home: usize, id: u64, live: Live) -> Option<Live> {
        debug_assert_eq!(home, self.home(id));
        if id == EMPTY {
            return self.spill.insert(id, live);
        }
        let bucket = &mut self.buckets[home];
        let found = bucket.find(id);
        if found != 0 {
            let slot = found.trailing_zeros() as usize;
            let old = bucket.live(slot);
            bucket.set(slot, id, live);
            return Some(old);
        }
        let free = bucket.find(EMPTY);
        if free != 0 {
            // Not full: `id` is nowhere else either.
            bucket.set(free.trailing_zeros() as usize, id, live);
            return None;
        }
        bucket.mark_spilled(true);
        self.spill.insert(id, live)
    }

    /// Takes the allocation under `id` out, if one is alive.
    pub fn remove(&mut self, id: u64) -> Option<Live> {
        self.remove_from(self.home(id), id)
    }

    /// [`LiveSet::remove`], with `id`'s bucket `home` computed already.
    #[inline(always)]
    pub fn remove_from(&mut self, home: usize, id: u64) -> Option<Live> {
        debug_assert_eq!(home, self.home(id));
        if id == EMPTY {
            return self.spill.remove(id);
        }
        let bucket = &mut self.buckets[home];
        let found = bucket.find(id);
        // Only a full bucket has ids in the overflow, and only if it sent some there.
        let spilled = bucket.spilled() && bucket.find(EMPTY) == 0;
        if found != 0 {
            let slot = found.trailing_zeros() as usize;
            let live = bucket.live(slot);
            bucket.ids[slot] = EMPTY;
            if spilled {
                self.refill(home);
            }
            return Some(live);
        }
        if spilled { self.spill.remove(id) } else { None }
    }

    /// A slot of the full bucket `home` was freed: one of its ids in the overflow, if
    /// any, moves in, so that a bucket with ids in the overflow stays full. When none
    /// is left there, the bucket is no longer marked.
    #[cold]
    #[inline(never)]
    fn refill(&mut self, home: usize) {
        let bucket = &mut self.buckets[home];
        match self.spill.take_from(home) {
            Some((id, live)) => {
                let slot = bucket.find(EMPTY).trailing_zeros() as usize;
                bucket.set(slot, id, live);
            }
            None => bucket.mark_spilled(false),
        }
    }

    /// Every live allocation, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = Live> {
        self.buckets
            .iter()
            .flat_map(|b| (0..4).filter(|&k| b.ids[k] != EMPTY).map(|k| b.live(k)))
            .chain(self.spill.values().copied())
    }

    /// How many allocations are alive.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.values().count()
    }
}

/// The overflow of a [`LiveSet`]: open addressing with linear probing, at most half full,
/// deleting by shifting back (no tombstones); it doubles when it gets half full.
///
/// An id's place here follows from its *bucket* in the set, not from the id itself: all
/// the ids of one bucket share a home here, so they lie together between that home and
/// the next unused slot, and [`Spill::take_from`] finds one of them without a search.
struct Spill {
    slots: Vec<(u64, Live)>,
    len: usize,
    /// How many buckets the set has: what an id's bucket is computed from.
    buckets: usize,
    /// The allocation under [`EMPTY`] itself, which cannot live in `slots`.
    empty_id: Option<Live>,
}

impl Spill {
    /// The fewest slots a table has.
    const MIN_SLOTS: usize = 1 << 6;

    fn new(buckets: usize) -> Spill {
        Spill::with_slots(Spill::MIN_SLOTS, buckets)
    }

    fn with_slots(n: usize, buckets: usize) -> Spill {
        let filler = Live { ordinal: 0, ctx: 0 };
        Spill {
            slots: vec![(EMPTY, filler); n],
            len: 0,
            buckets,
            empty_id: None,
        }
    }

    /// Where the ids of the set's bucket `bucket` start.
    #[inline]
    fn home_of_bucket(&self, bucket: usize) -> usize {
        scaled_hash(bucket as u64, self.slots.len())
    }

    #[inline]
    fn home(&self, id: u64) -> usize {
        self.home_of_bucket(scaled_hash(id, self.buckets))
    }

    /// The slot after `i`, cyclically.
    #[inline]
    fn next(&self, i: usize) -> usize {
        if i + 1 == self.slots.len() { 0 } else { i + 1 }
    }

    /// Where `id` is, if it is there.
    fn position(&self, id: u64) -> Option<usize> {
        let mut i = self.home(id);
        loop {
            let key = self.slots[i].0;
            if key == id {
                return Some(i);
            }
            if key == EMPTY {
                return None;
            }
            i = self.next(i);
        }
    }

    #[cfg(test)]
    fn get(&self, id: u64) -> Option<Live> {
        if id == EMPTY {
            return self.empty_id;
        }
        self.position(id).map(|i| self.slots[i].1)
    }

    /// Puts `live` under `id`, returning what was there.
    #[cold]
    #[inline(never)]
    fn insert(&mut self, id: u64, live: Live) -> Option<Live> {
        if id == EMPTY {
            return self.empty_id.replace(live);
        }
        // One probe finds `id`, or the unused slot where it goes.
        let mut i = self.home(id);
        loop {
            let key = self.slots[i].0;
            if key == id {
                return Some(std::mem::replace(&mut self.slots[i].1, live));
            }
            if key == EMPTY {
                break;
            }
            i = self.next(i);
        }
        if 2 * (self.len + 1) > self.slots.len() {
            self.grow();
            i = self.home(id);
            while self.slots[i].0 != EMPTY {
                i = self.next(i);
            }
        }
        self.slots[i] = (id, live);
        self.len += 1;
        None
    }

    #[cold]
    #[inline(never)]
    fn remove(&mut self, id: u64) -> Option<Live> {
        if id == EMPTY {
            return self.empty_id.take();
        }
        let i = self.position(id)?;
        Some(self.remove_at(i).1)
    }

    /// Takes out one of the ids whose bucket in the set is `bucket`, if any is here.
    fn take_from(&mut self, bucket: usize) -> Option<(u64, Live)> {
        let mut i = self.home_of_bucket(bucket);
        loop {
            let key = self.slots[i].0;
            if key == EMPTY {
                return None;
            }
            if scaled_hash(key, self.buckets) == bucket {
                return Some(self.remove_at(i));
            }
            i = self.next(i);
        }
    }

    fn remove_at(&mut self, i: usize) -> (u64, Live) {
        let found = self.slots[i];
        self.len -= 1;
        // Shift back the entries after it that would not be found past the hole.
        let mut hole = i;
        let mut j = i;
        loop {
            j = self.next(j);
            let key = self.slots[j].0;
            if key == EMPTY {
                break;
            }
            let home = self.home(key);
            // Whether `home` lies cyclically in (hole, j]: then the entry stays.
            let stays = if hole <= j {
                hole < home && home <= j
            } else {
                hole < home || home <= j
            };
            if !stays {
                self.slots[hole] = self.slots[j];
                hole = j;
            }
        }
        self.slots[hole].0 = EMPTY;
        found
    }

    fn grow(&mut self) {
        let mut bigger = Spill::with_slots(self.slots.len() * 2, self.buckets);
        bigger.empty_id = self.empty_id.take();
        for &(id, live) in &self.slots {
            if id != EMPTY {
                bigger.insert(id, live);
            }
        }
        *self = bigger;
    }

    /// Every id and allocation here, the table emptied.
    fn into_entries(self) -> impl Iterator<Item = (u64, Live)> {
        self.slots
            .into_iter()
            .filter(|(id, _)| *id != EMPTY)
            .chain(self.empty_id.map(|live| (EMPTY, live)))
    }

    fn values(&self) -> impl Iterator<Item = &Live> {
        self.slots
            .iter()
            .filter(|(id, _)| *id != EMPTY)
            .map(|(_, live)| live)
            .chain(self.empty_id.as_ref())
    }
}
/// Asks the kernel to back `v`'s unused capacity with huge pages where it can (Linux:
/// `madvise(MADV_HUGEPAGE)`, for systems that grant them only on request). The big
/// arrays of a replay are touched all over; with 4 KiB pages nearly every access to the
/// table also misses the address translation cache, and filling them takes a page fault
/// per 4 KiB. Only a hint: without it nothing changes but the speed.
pub(super) fn advise_huge_pages<T>(v: &mut Vec<T>) {
    let memory = v.spare_capacity_mut();
    #[cfg(target_os = "linux")]
    {
        const MADV_HUGEPAGE: i32 = 14;
        const PAGE: usize = 4096;
        const HUGE: usize = 2 << 20;
        unsafe extern "C" {
            fn madvise(addr: *mut std::ffi::c_void, len: usize, advice: i32) -> i32;
        }
        let bytes = std::mem::size_of_val(memory);
        if bytes < 2 * HUGE {
            return;
        }
        let start = memory.as_mut_ptr() as usize;
        let begin = start.next_multiple_of(PAGE);
        let end = (start + bytes) / PAGE * PAGE;
        // SAFETY: the range lies inside memory the caller owns (rounded inwards to whole
        // pages), and MADV_HUGEPAGE only changes how the kernel backs it, never its
        // contents; a failure is ignored.
        unsafe {
            madvise(begin as *mut std::ffi::c_void, end - begin, MADV_HUGEPAGE);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = memory;
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn live(n: u64) -> Live {
        Live {
            ordinal: n as u32,
            ctx: (n >> 32) as u32,
        }
    }

    /// Ids the way allocators hand them out: small handles, neighbours in one page,
    /// page-aligned blocks, far-apart pages, and the table's own marker value.
    fn id() -> impl Strategy<Value = u64> {
        prop_oneof![
            0u64..64,
            (0u64..256).prop_map(|k| 0x7f00_0000_0000 + 16 * k),
            (0u64..256).prop_map(|k| 0x7f10_0000_0000 + 4096 * k),
            any::<u64>(),
            Just(EMPTY),
        ]
    }

    /// The values a table holds and those the model map holds, each sorted.
    fn sorted(
        values: impl Iterator<Item = Live>,
        model: &HashMap<u64, Live>,
    ) -> (Vec<u64>, Vec<u64>) {
        let key = |l: &Live| u64::from(l.ordinal) << 32 | u64::from(l.ctx);
        let mut left: Vec<_> = values.map(|l| key(&l)).collect();
        let mut right: Vec<_> = model.values().map(key).collect();
        left.sort_unstable();
        right.sort_unstable();
        (left, right)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Few buckets for many ids: most of them go to the overflow table and come
        /// back as their buckets free up, or when the set doubles its buckets (which
        /// here happens at any time, not only when the set is full).
        #[test]
        fn the_live_set_behaves_like_a_map(
            buckets in 1usize..6,
            ops in prop::collection::vec((0u8..17, id()), 0..2000),
        ) {
            let mut set = LiveSet::with_buckets(buckets, 0);
            let mut model: HashMap<u64, Live> = HashMap::new();
            for (n, (op, id)) in ops.into_iter().enumerate() {
                let value = live(n as u64 | (n as u64) << 33);
                match op {
                    0..8 => prop_assert_eq!(set.insert(id, value), model.insert(id, value)),
                    8..16 => prop_assert_eq!(set.remove(id), model.remove(&id)),
                    _ if set.buckets.len() < 64 => set.grow(),
                    _ => {}
                }
                // The rule that keeps the overflow out of the common path.
                for (b, bucket) in set.buckets.iter().enumerate() {
                    if bucket.find(EMPTY) != 0 || !bucket.spilled() {
                        prop_assert!(set.spill.slots.iter().all(|&(key, _)| key == EMPTY
                            || scaled_hash(key, set.buckets.len()) != b));
                    }
                }
            }
            prop_assert_eq!(set.len(), model.len());
            let (left, right) = sorted(set.values(), &model);
            prop_assert_eq!(left, right);
        }

        #[test]
        fn the_overflow_table_behaves_like_a_map(
            buckets in 1usize..100,
            ops in prop::collection::vec((0u8..3, id()), 0..2000),
        ) {
            let mut spill = Spill::with_slots(2, buckets);
            let mut model: HashMap<u64, Live> = HashMap::new();
            for (n, (op, id)) in ops.into_iter().enumerate() {
                let value = live(n as u64);
                match op {
                    0 => prop_assert_eq!(spill.insert(id, value), model.insert(id, value)),
                    1 => prop_assert_eq!(spill.remove(id), model.remove(&id)),
                    _ => {
                        // Take one of the ids of `id`'s bucket, as a freed slot would.
                        let bucket = scaled_hash(id, buckets);
                        let taken = spill.take_from(bucket);
                        let any = model.keys().any(|&k| k != EMPTY && scaled_hash(k, buckets) == bucket);
                        prop_assert_eq!(taken.is_some(), any);
                        if let Some((key, live)) = taken {
                            prop_assert_eq!(scaled_hash(key, buckets), bucket);
                            prop_assert_eq!(model.remove(&key), Some(live));
                        }
                    }
                }
                prop_assert_eq!(spill.get(id), model.get(&id).copied());
                prop_assert!(2 * spill.len <= spill.slots.len());
            }
            let (left, right) = sorted(spill.values().copied(), &model);
            prop_assert_eq!(left, right);
        }
    }

    /// A growing set doubles its buckets as it fills, in the memory it reserved, so that
    /// it ends with about as few ids in the overflow table as a set sized up front.
    #[test]
    fn a_growing_set_doubles_in_place_and_rarely_spills() {
        let n = 100_000u64;
        let mut set = LiveSet::growing(n as usize);
        let reserved = set.buckets.as_ptr();
        let mut address = 0x7f00_0000_0000u64;
        let mut doublings = 0;
        for k in 0..n {
            set.insert(address, live(k));
            address += 16 * (1 + k % 257);
            if set.needs_room(k as usize + 1) {
                let before = set.buckets.len();
                set.grow();
                assert_eq!(set.buckets.len(), 2 * before);
                doublings += 1;
            }
        }
        assert_eq!(set.len(), n as usize);
        // From 1024 buckets to the first size with room for 100 000 at 1.2 a bucket.
        assert_eq!(doublings, 7);
        // It ends with room for them at about 1.2 a bucket (and never less than 0.6).
        let load = n as f64 / set.buckets.len() as f64;
        assert!((0.6..1.3).contains(&load), "{load} ids a bucket");
        assert_eq!(
            set.buckets.as_ptr(),
            reserved,
            "a doubling moved the buckets"
        );
        assert!(
            set.spill.len < n as usize * 2 / 100,
            "{} of {n} ids spilled",
            set.spill.len
        );
        // Every id is found where it is, and leaves.
        let mut address = 0x7f00_0000_0000u64;
        for k in 0..n {
            assert_eq!(set.remove(address), Some(live(k)));
            address += 16 * (1 + k % 257);
        }
        assert_eq!(set.len(), 0);
    }

    /// A set sized for a count keeps nearly all of them in their home buckets (1–2%
    /// go to the overflow table, as for evenly spread ids).
    #[test]
    fn a_set_sized_for_a_count_rarely_spills() {
        let n = 100_000u64;
        let mut set = LiveSet::for_live(n as usize);
        // Addresses of blocks of mixed sizes, as a heap hands them out.
        let mut address = 0x7f00_0000_0000u64;
        for k in 0..n {
            set.insert(address, live(k));
            address += 16 * (1 + k % 257);
        }
        assert_eq!(set.len(), n as usize);
        assert!(
            set.spill.len < n as usize * 2 / 100,
            "{} of {n} ids spilled",
            set.spill.len
        );
    }
}
