//! Gavel's round-based mechanism (`scheduler.py`, simulation mode), as a
//! [`Policy`]:
//!
//! - Time advances in rounds. A round starts when the previous one ends, or at
//!   an arrival when nothing runs. Each job scheduled in a round runs
//!   `min(floor(rate * round_length), steps left)` steps, and the round ends when
//!   the last of them is done (so at most one round length later). Jobs that
//!   arrive or GPUs that free up mid-round wait for the next round, as in Gavel.
//! - What is scheduled is a *combination*: one job alone, or (packed
//!   objectives) two jobs of equal scale factor sharing the same GPUs, at the
//!   table's co-located rates. Allocation, time received, deficits and
//!   priorities are kept per combination and GPU type, as Gavel keeps them per
//!   job id and job-id pair.
//! - The allocation X is recomputed only when jobs arrived or left, and then at
//!   most once per `reset_interval` (Gavel's `minimum_time_between_allocation_resets`,
//!   1,920 s), when time received is reset and the difference to what X promised
//!   is carried as a deficit.
//! - Priority of combination c on GPU type j: `X[c][j] / (time of c on j / time
//!   of all combinations on j)` since the last reset (each job starts with half
//!   a round on every type, a pair with none); `X * 1e9` with no time yet; 0
//!   without allocation or throughput.
//! - Per round, combinations are taken greedily per GPU type (fastest type first;
//!   in a random order for heterogeneity-agnostic policies, drawn like Gavel's)
//!   by (priority, deficit, allocation), while they fit and none of their jobs
//!   is taken yet (Gavel's `_schedule_jobs_on_workers_helper`).
//! - A job scheduled again on the GPU type it runs on keeps its GPUs (lease
//!   extension: no stop, no restore), and so does a pair that stays together.
//!   A pair is started as `Start` of its first job and `StartShared` of the
//!   second on the same GPUs, or, if one of its jobs runs on that type now, as
//!   `StartShared` of the other on that job's GPUs. Others are preempted.
//!
//! Steps left are read from the engine's progress (`JobState::work_done`), which
//! the world keeps exact with `Input::Progress` reports on every start and stop
//! (the simulator does); without them a round would be planned as if every job
//! still had all its work left.

use std::cmp::Ordering;
use std::collections::BTreeMap;
#[cfg(test)]
use std::collections::BTreeSet;
use std::sync::Arc;

use cotenant_core::placement::{FreeMap, Placement};
use cotenant_core::{
    Action, ClusterView, Decision, GpuId, GpuTypeId, JobChange, JobId, Policy, PolicyCx, Span, TenantId,
    Time, WaitReason, MICROS_PER_SECOND,
};
use cotenant_perf::throughput::{JobTypeKey, ThroughputTable};

use super::allocation::{AllocJob, Allocator, Objective};
use super::dense::{JobTable, Rows};
use super::packed::PairCandidate;
use super::pyrandom::PyRandom;

/// Gavel's default round length in its simulator (`time_per_iteration`).
pub const DEFAULT_ROUND: Span = Span(360 * MICROS_PER_SECOND);
/// Gavel's `minimum_time_between_allocation_resets`.
pub const DEFAULT_RESET_INTERVAL: Span = Span(1_920 * MICROS_PER_SECOND);
/// Extra time after a round's last predicted finish before the next round, so
/// that a completion rounded up to the next microsecond lands inside the round.
const ROUND_SLACK: Span = Span(1_000);
/// Default limit on pair candidates tracked (STYLE: a limit on everything).
/// Pairs grow as the square of active jobs; past the limit, later arrivals get
/// no new pairs. A limit of 0 runs a packed objective with singles only.
pub const MAX_PAIR_CANDIDATES: u32 = 20_000;

/// How a Gavel policy is set up.
#[derive(Clone, Debug)]
pub struct GavelConfig {
    pub name: &'static str,
    pub objective: Objective,
    pub round: Span,
    pub reset_interval: Span,
    /// Seeds base FIFO's stream (`seed`) and the GPU-type shuffle (`seed + 5`), as Gavel does.
    pub seed: u64,
    pub placement: Placement,
    /// Most pair candidates tracked at once (packed objectives only).
    pub max_pairs: u32,
}

/// Counters for reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GavelStats {
    pub rounds: u64,
    pub allocations: u64,
    /// Combinations that ran in consecutive rounds on the same GPUs.
    pub lease_extensions: u64,
    /// Combinations that ran in a round and had a job still active at the next.
    pub lease_opportunities: u64,
    /// Rounds' pairs: combinations of two jobs sharing GPUs, summed over rounds.
    pub pairs_run: u64,
}

/// One job alone, or two sharing the same GPUs, as one integer that orders as
/// Gavel's insertion order of its per-combination dicts (`Combo::order_key`):
/// the key's first id in the high 32 bits; below it 0 for a single, or the
/// pair's smaller id plus one (below the larger id, so it fits). A comparison,
/// a search step or a sort swap is one integer's (`the_combo_order_is_the_tuple_order`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Combo(u64);

/// What a [`Combo`] is: one job, or two (the smaller id first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Single(JobId),
    Pair(JobId, JobId),
}

impl Combo {
    fn single(a: JobId) -> Combo {
        Combo(u64::from(a.0) << 32)
    }

    /// The pair of two distinct jobs, in either order.
    fn pair(a: JobId, b: JobId) -> Combo {
        debug_assert_ne!(a, b, "a pair is of two jobs");
        let (low, high) = (a.min(b), a.max(b));
        Combo((u64::from(high.0) << 32) | (u64::from(low.0) + 1))
    }

    /// The job or jobs (the smaller id first).
    pub fn kind(self) -> Kind {
        let first = JobId((self.0 >> 32) as u32);
        match self.0 as u32 {
            0 => Kind::Single(first),
            low => Kind::Pair(JobId(low - 1), first),
        }
    }

    /// The job of a single.
    fn as_single(self) -> Option<JobId> {
        match self.kind() {
            Kind::Single(a) => Some(a),
            Kind::Pair(..) => None,
        }
    }

    fn is_pair(self) -> bool {
        self.0 as u32 != 0
    }

    /// The combination's jobs (the smaller id first), without allocating.
    pub fn jobs(self) -> Members {
        let (first, low) = ((self.0 >> 32) as u32, self.0 as u32);
        // No branch: a single's slots both hold its job (the second unread).
        let smaller = if low == 0 { first } else { low - 1 };
        Members { ids: [JobId(smaller), JobId(first)], len: 1 + usize::from(low != 0) }
    }

    fn contains(self, id: JobId) -> bool {
        let (first, low) = ((self.0 >> 32) as u32, self.0 as u32);
        first == id.0 || (low != 0 && low - 1 == id.0)
    }

    /// Gavel's insertion order of its per-combination dicts, which decides
    /// ties: job i, then its pairs with earlier jobs (0, i), (1, i), ...
    #[cfg(test)]
    fn order_key(self) -> (JobId, bool, JobId) {
        match self.kind() {
            Kind::Single(a) => (a, false, a),
            Kind::Pair(a, b) => (b, true, a),
        }
    }
}

/// As the enum it stands for: `Single(JobId(3))`, `Pair(JobId(1), JobId(4))`.
impl std::fmt::Debug for Combo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.kind().fmt(f)
    }
}

/// The one or two jobs of a [`Combo`], as a slice (a fixed array: the round
/// loop asks for them per combination and type, and a `Vec` each time was a
/// large part of a round's cost).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Members {
    ids: [JobId; 2],
    len: usize,
}

impl std::ops::Deref for Members {
    type Target = [JobId];
    fn deref(&self) -> &[JobId] {
        &self.ids[..self.len]
    }
}

impl IntoIterator for Members {
    type Item = JobId;
    type IntoIter = std::iter::Take<std::array::IntoIter<JobId, 2>>;
    fn into_iter(self) -> Self::IntoIter {
        self.ids.into_iter().take(self.len)
    }
}

#[derive(Clone, Debug)]
struct Tracked {
    /// Steps per second on each cluster GPU type.
    rates: Vec<f64>,
    scale_factor: u32,
    weight: f64,
    arrival: Time,
    work: f64,
    /// Steps Gavel has credited the job with: what the rounds it ran planned,
    /// whatever the engine's job did in the gaps between its last step and
    /// each round's end (see [`Gavel::plan_done`]).
    credited: f64,
    /// The engine's job completed (it ran on through the gaps) before Gavel's
    /// accounting did: it still takes part in rounds, as in Gavel, until a
    /// round credits its last steps, but is never placed.
    ghost: bool,
    /// The last round (`Gavel::verdict_stamp`) that ran it or gave it a verdict.
    stamp: u64,
    /// Allocations before its admission (`GavelStats::allocations`): it was
    /// given to every later one.
    admitted: u64,
}

impl Tracked {
    /// The allocator's row of job `id`, its progress fields zero.
    fn alloc_job(&self, id: JobId) -> AllocJob {
        AllocJob {
            id,
            steps_per_s: self.rates.clone(),
            scale_factor: self.scale_factor,
            weight: self.weight,
            steps_remaining: 0.0,
            secs_since_arrival: 0.0,
        }
    }
}

/// A GPU list shared between rounds: a job kept where it runs (a lease
/// extension, most of a round's jobs) takes the last round's list, no copy.
type GpuList = Arc<[GpuId]>;

#[derive(Clone, Debug)]
struct RoundEntry {
    combo: Combo,
    gpu_type: usize,
    gpus: GpuList,
    finish_s: f64,
    /// Work each job of the combination has done once it ran its steps this round.
    /// (In `Combo::jobs` order; a single's second is `None`: no allocation per entry.)
    targets: [Option<(JobId, f64)>; 2],
    /// Where `end_round` last found the combination's row of time received
    /// (`usize::MAX`: not yet): a steady round in place keeps its entries, and
    /// the rows move only when combinations are added or removed, so the row
    /// is most often still there or one below (a departed job's row removed
    /// before it). Only a hint: a row is taken only if its key is the combination.
    row_hint: usize,
}

#[derive(Clone, Debug)]
struct Round {
    /// Gavel's clock when the round before ended (0 before the first): each
    /// job's time this round is charged from there (Gavel's
    /// `current_round_start_time`), also across an idle gap.
    charged_from_s: f64,
    /// Gavel's clock at the round's end: the last planned finish (exact: not
    /// rounded to the engine's microseconds, nor shifted by the slack).
    end_s: f64,
    /// When the engine wakes the policy for the next round.
    end: Time,
    entries: Vec<RoundEntry>,
}

/// The GPU types of the cluster as the mechanism sees them.
#[derive(Clone, Debug)]
struct Types {
    /// Table index of each cluster GPU type.
    table_index: Vec<Option<usize>>,
    names: Vec<String>,
    /// Types in Gavel's fixed order (fastest first), types with no GPUs left out.
    order: Vec<usize>,
}

/// GPUs held now by one running job, or by two sharing them.
#[derive(Clone, Debug)]
struct Holding<'a> {
    gpu_type: usize,
    /// Borrowed from the engine's job: no copy per round.
    gpus: &'a [GpuId],
    jobs: Members,
}

/// [`Gavel::place`]'s buffers, kept from call to call.
#[derive(Debug, Default)]
struct PlaceScratch {
    /// Job id -> its holding + 1 (0: none), during a call; all 0 between calls.
    slot: Vec<usize>,
    claimed: Vec<Option<Combo>>,
    reused: Vec<(Combo, usize)>,
    was_reused: Vec<bool>,
    to_place: Vec<(Combo, usize)>,
}

/// Jobs taken so far in a round's greedy pass, and GPUs per tenant. Kept
/// between passes (`Gavel::picked`), emptied by [`Picked::reset`].
#[derive(Clone, Debug, Default, PartialEq)]
struct Picked {
    /// In the order taken.
    taken: Vec<JobId>,
    /// Whether each job (by id) is taken: a lookup, not a search. All false
    /// between passes (`reset` clears the taken ones).
    flags: Vec<bool>,
    tenant_gpus: Vec<u32>,
}

impl Picked {
    fn is_taken(&self, id: JobId) -> bool {
        self.flags.get(id.index()).copied().unwrap_or(false)
    }

    fn mark(&mut self, members: Members) {
        for id in members {
            if self.flags.len() <= id.index() {
                self.flags.resize(id.index() + 1, false);
            }
            if !std::mem::replace(&mut self.flags[id.index()], true) {
                self.taken.push(id);
            }
        }
    }

    /// Nothing taken, no GPUs for any of `tenants` tenants (buffers kept).
    fn reset(&mut self, tenants: usize) {
        for id in self.taken.drain(..) {
            self.flags[id.index()] = false;
        }
        debug_assert!(!self.flags.contains(&true), "every flag set is a taken job's");
        self.tenant_gpus.clear();
        self.tenant_gpus.resize(tenants, 0);
    }
}

/// Each combination's (priority, deficit, allocation) on every GPU type, in
/// combination order (Gavel's insertion order, which breaks ties): what a
/// round's greedy pass sorts by, computed once per round.
#[derive(Debug, Default)]
struct Ranking {
    types: usize,
    combos: Vec<Combo>,
    /// `keys[k * types + t]`: combination `k` on type `t`.
    keys: Vec<(f64, f64, f64)>,
}

/// Bit for bit (total order on the keys: -0.0 and 0.0 sort apart).
impl PartialEq for Ranking {
    fn eq(&self, other: &Ranking) -> bool {
        let bits = |k: &(f64, f64, f64)| (k.0.to_bits(), k.1.to_bits(), k.2.to_bits());
        self.types == other.types
            && self.combos == other.combos
            && self.keys.len() == other.keys.len()
            && self.keys.iter().zip(&other.keys).all(|(a, b)| bits(a) == bits(b))
    }
}

#[cfg(test)]
impl Ranking {
    /// The combinations with a positive priority on some type, with all their keys.
    fn positive_only(&self) -> Ranking {
        let n = self.types;
        let mut out = Ranking { types: n, ..Ranking::default() };
        for (k, &combo) in self.combos.iter().enumerate() {
            let keys = &self.keys[k * n..(k + 1) * n];
            if keys.iter().any(|key| key.0 > 0.0) {
                out.combos.push(combo);
                out.keys.extend_from_slice(keys);
            }
        }
        out
    }
}

/// A combination chosen for the round and where it runs.
#[derive(Clone, Debug, PartialEq)]
struct Placed {
    combo: Combo,
    gpu_type: usize,
    gpus: GpuList,
}

/// Items that are found by their combination ([`ByCombo`]).
trait HasCombo {
    fn combo(&self) -> Combo;
}

impl HasCombo for RoundEntry {
    fn combo(&self) -> Combo {
        self.combo
    }
}

impl HasCombo for Placed {
    fn combo(&self) -> Combo {
        self.combo
    }
}

/// A round's items found by combination, each combination at most once: in
/// the items themselves when they are in combination order (a kept
/// placement's), else through a sorted index.
struct ByCombo<'a, T> {
    items: &'a [T],
    /// Each item's combination and position, in combination order (searched
    /// without a detour through `items`); empty when they are in order.
    order: Vec<(Combo, usize)>,
    /// Where the next lookup of items in order is likely to hit: after the
    /// last one found (a kept placement asks for its combinations in order, so
    /// most lookups cost one comparison instead of a search).
    next: std::cell::Cell<usize>,
}

impl<'a, T: HasCombo> ByCombo<'a, T> {
    fn new(items: &'a [T]) -> ByCombo<'a, T> {
        let mut order = Vec::new();
        if !items.windows(2).all(|w| w[0].combo() < w[1].combo()) {
            order.extend(items.iter().enumerate().map(|(k, item)| (item.combo(), k)));
            order.sort_unstable_by_key(|&(combo, _)| combo);
        }
        ByCombo { items, order, next: std::cell::Cell::new(0) }
    }

    /// The position of the item of `combo`, if any.
    fn position(&self, combo: Combo) -> Option<usize> {
        if !self.order.is_empty() {
            return Some(self.order[self.order.binary_search_by_key(&combo, |&(c, _)| c).ok()?].1);
        }
        let guess = self.next.get();
        let k = match self.items.get(guess) {
            Some(item) if item.combo() == combo => guess,
            _ => self.items.binary_search_by_key(&combo, |item| item.combo()).ok()?,
        };
        self.next.set(k + 1);
        Some(k)
    }

    fn find(&self, combo: Combo) -> Option<&'a T> {
        self.position(combo).map(|k| &self.items[k])
    }
}

/// The last round's entries, found by combination.
type Previous<'a> = ByCombo<'a, RoundEntry>;

impl Previous<'_> {
    /// `gpus` as a list: the last round's of `combo` if it is the same, else a new one.
    #[inline]
    fn gpus(&self, combo: Combo, gpus: &[GpuId]) -> GpuList {
        self.gpus_kept(combo, gpus).0
    }

    /// [`Previous::gpus`], and whether it is the last round's list (a lease
    /// extension: the combination ran last round on the same GPUs).
    #[inline]
    fn gpus_kept(&self, combo: Combo, gpus: &[GpuId]) -> (GpuList, bool) {
        match self.find(combo) {
            Some(entry) if entry.gpus[..] == *gpus => (entry.gpus.clone(), true),
            _ => (Arc::from(gpus), false),
        }
    }

    /// [`Previous::gpus`] for combinations asked in ascending order (a kept
    /// placement's, most rounds): a cursor over the entries, in combination
    /// order when `order` is empty, steps forward instead of a lookup per
    /// call. `cursor` starts at 0; a combination below the cursor's (asked out
    /// of order) or entries out of order take the lookup. With the list,
    /// whether it is the last round's ([`Previous::gpus_kept`]).
    #[inline]
    fn gpus_from(&self, cursor: &mut usize, combo: Combo, gpus: &[GpuId]) -> (GpuList, bool) {
        if !self.order.is_empty() {
            return self.gpus_kept(combo, gpus);
        }
        let mut k = *cursor;
        while let Some(entry) = self.items.get(k) {
            match entry.combo.cmp(&combo) {
                Ordering::Less => k += 1,
                Ordering::Equal => {
                    *cursor = k + 1;
                    return if entry.gpus[..] == *gpus {
                        (entry.gpus.clone(), true)
                    } else {
                        (Arc::from(gpus), false)
                    };
                }
                Ordering::Greater if k == *cursor && k > 0 => return self.gpus_kept(combo, gpus),
                Ordering::Greater => break,
            }
        }
        // Not among the entries at or after the cursor, which are ascending:
        // unless it sorts before the cursor's start, it is not there at all.
        if *cursor > 0 && self.items[*cursor - 1].combo >= combo {
            return self.gpus_kept(combo, gpus);
        }
        *cursor = k;
        (Arc::from(gpus), false)
    }
}

/// A Gavel policy: an allocation objective plus the round mechanism.
#[derive(Debug)]
pub struct Gavel {
    config: GavelConfig,
    table: Arc<ThroughputTable>,
    job_types: Vec<String>,
    allocator: Allocator,
    shuffler: PyRandom,
    types: Option<Types>,
    /// Tracked jobs by id (dense: O(1) lookups), walked in id order.
    jobs: JobTable<Tracked>,
    /// Co-located rates `(rate of a, rate of b)` per cluster type of each
    /// candidate pair (a < b); empty unless the objective packs.
    pair_rates: BTreeMap<(JobId, JobId), Vec<(f64, f64)>>,
    /// Jobs the engine has submitted and Gavel not yet admitted, ascending
    /// (a sorted vector: they mostly arrive in id order, and there are few).
    arrived: Vec<JobId>,
    /// X per combination and GPU type (rows stored flat, in combination order).
    allocation: Rows<Combo>,
    /// Time each combination received on each type since the last reset.
    combo_time_s: Rows<Combo>,
    worker_time_s: Vec<f64>,
    /// Deficits per combination and type (the combinations of `combo_time_s`).
    deficits_s: Rows<Combo>,
    last_reset_s: f64,
    /// Gavel's clock at the end of the last round.
    last_end_s: f64,
    need_update: bool,
    round: Option<Round>,
    stats: GavelStats,
    /// The ranking's buffers, reused from round to round.
    scratch: Ranking,
    /// Whether the last [`Gavel::choose`] took every combination of positive
    /// priority it ranked, on every GPU type (none turned away).
    took_every_positive: bool,
    /// What the last full round chose, when a steady round may repeat it
    /// without ranking, choosing or placing ([`Gavel::steady_round`]).
    steady: Option<Steady>,
    /// The GPU-type order buffer of a steady round's shuffle.
    order_scratch: Vec<usize>,
    /// Rates per cluster GPU type by (job type, scale factor).
    rate_cache: BTreeMap<(Option<u32>, u32), Vec<f64>>,
    /// The allocation's combinations with a positive share on some type, in
    /// combination order (what [`Gavel::rank_positive`] walks).
    positive: Vec<Combo>,
    /// Counts the rounds [`Gavel::record_round`] recorded (see `Tracked::stamp`).
    verdict_stamp: u64,
    /// An empty entry buffer for the next round (the one before last's).
    spare_entries: Vec<RoundEntry>,
    /// GPUs per type: up, for a steady round's check, or left, in the greedy
    /// pass (one buffer kept between rounds, refilled by `up_gpus_into` before each use).
    up_scratch: Vec<u32>,
    /// The allocator's input, in id order: of the last allocation, kept so
    /// that the next one refills its rows (each job's rates copied into the
    /// row's own buffer) instead of allocating one per job; or, for an
    /// objective that reads no progress, every tracked job's, kept as jobs
    /// are admitted and forgotten.
    alloc_jobs: Vec<AllocJob>,
    /// Whether, since the last round's verdicts, every tracked job that is no
    /// ghost and did not run in it carries `NotThisRound` in the engine (that
    /// round named no other verdict), jobs admitted since aside: then a round
    /// that runs a subset of the last one's jobs (a job that ran and is not
    /// running now has left) names only admitted ones (see [`Gavel::steady_in_place`]).
    settled: bool,
    /// Jobs admitted since the last round's verdicts.
    admitted_since: Vec<JobId>,
    /// The last allocation stored only its nonzero rows (see [`Gavel::allocated`]).
    zero_rows_dropped: bool,
    /// The greedy pass's jobs taken (buffers kept between passes).
    picked: Picked,
    /// The greedy pass's sort keys (buffer kept between passes).
    entries_scratch: Vec<(i64, i64, i64, usize)>,
    place_scratch: PlaceScratch,
    /// The jobs an admission takes (buffer kept between rounds).
    admit_scratch: Vec<JobId>,
    /// Tracked jobs that are ghosts (`Tracked::ghost`).
    ghosts: usize,
    /// The combinations the last such allocation gave a row, zero or not (tests check `allocated` against them).
    #[cfg(test)]
    allocated_plain: BTreeSet<Combo>,
}

/// The outcome of a FIFO round whose greedy pass took every combination of
/// positive priority, all of them single jobs (`chosen`: job and GPU type, in
/// job order), with `up` GPUs of each type. Positive priority is `X > 0` on a
/// type the job runs on (time received never makes it zero: see
/// [`Gavel::steady_round`]), so until the allocation or a reset changes it,
/// every later round chooses the same jobs less those that left (a ghost
/// changes only pairs' priorities, to zero, and none of them was positive).
#[derive(Clone, Debug)]
struct Steady {
    chosen: Vec<(Combo, usize)>,
    up: Vec<u32>,
}

#[cfg(test)]
thread_local! {
    /// Rounds `steady_round` decided (tests check that the fast path runs).
    static STEADY_ROUNDS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// Rounds `place_kept` placed (tests check that the shortcut runs).
    static KEPT_PLACEMENTS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// Rounds `steady_in_place` recorded (tests check that the shortcut runs).
    static IN_PLACE_ROUNDS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

impl Gavel {
    pub fn new(config: GavelConfig, table: Arc<ThroughputTable>, job_types: Vec<String>) -> Gavel {
        Gavel {
            allocator: Allocator::new(config.objective, config.seed),
            shuffler: PyRandom::new(config.seed + 5),
            config,
            table,
            job_types,
            types: None,
            jobs: JobTable::default(),
            pair_rates: BTreeMap::new(),
            arrived: Vec::new(),
            allocation: Rows::default(),
            combo_time_s: Rows::default(),
            worker_time_s: Vec::new(),
            deficits_s: Rows::default(),
            last_reset_s: 0.0,
            last_end_s: 0.0,
            need_update: false,
            round: None,
            stats: GavelStats::default(),
            scratch: Ranking::default(),
            took_every_positive: false,
            steady: None,
            order_scratch: Vec::new(),
            rate_cache: BTreeMap::new(),
            positive: Vec::new(),
            verdict_stamp: 0,
            spare_entries: Vec::new(),
            up_scratch: Vec::new(),
            alloc_jobs: Vec::new(),
            zero_rows_dropped: false,
            picked: Picked::default(),
            entries_scratch: Vec::new(),
            place_scratch: PlaceScratch::default(),
            admit_scratch: Vec::new(),
            ghosts: 0,
            #[cfg(test)]
            allocated_plain: BTreeSet::new(),
            settled: false,
            admitted_since: Vec::new(),
        }
    }

    pub fn stats(&self) -> GavelStats {
        self.stats
    }

    fn half_round_s(&self) -> f64 {
        self.config.round.as_secs_f64() / 2.0
    }

    fn init_types(&mut self, view: &ClusterView<'_>) {
        if self.types.is_some() {
            return;
        }
        let names: Vec<String> =
            view.cluster.spec().gpu_types.iter().map(|n| n.to_ascii_lowercase()).collect();
        let table_index: Vec<Option<usize>> = names
            .iter()
            .map(|n| self.table.gpu_types().iter().position(|t| t.eq_ignore_ascii_case(n)))
            .collect();
        // Gavel orders ["v100", "p100", "k80"]: fastest first. In general: by
        // mean single-GPU rate over the table, then by name.
        let speed = |t: usize| -> f64 {
            let Some(ti) = table_index[t] else { return 0.0 };
            let rates: Vec<f64> = self
                .table
                .job_types()
                .filter(|k| k.scale_factor == 1)
                .filter_map(|k| self.table.consolidated(k, ti))
                .collect();
            rates.iter().sum::<f64>() / rates.len().max(1) as f64
        };
        let mut order: Vec<usize> =
            (0..names.len()).filter(|&t| view.cluster.gpus_of_type(GpuTypeId(t as u32)) > 0).collect();
        let speeds: Vec<f64> = (0..names.len()).map(speed).collect();
        order.sort_by(|&a, &b| speeds[b].total_cmp(&speeds[a]).then(names[a].cmp(&names[b])));
        self.worker_time_s = vec![0.0; names.len()];
        self.types = Some(Types { table_index, names, order });
    }

    fn type_key(&self, view: &ClusterView<'_>, id: JobId) -> Option<JobTypeKey> {
        let spec = &view.job(id).spec;
        spec.job_type
            .and_then(|t| self.job_types.get(t as usize))
            .map(|model| JobTypeKey::new(model.clone(), spec.gpus.max(1)))
    }

    /// [`Gavel::rates_of`], computed once per job type and scale factor (what
    /// it depends on; the table and the cluster's types are fixed).
    fn rates_cached(&mut self, view: &ClusterView<'_>, id: JobId) -> Vec<f64> {
        let spec = &view.job(id).spec;
        let key = (spec.job_type, spec.gpus.max(1));
        if let Some(rates) = self.rate_cache.get(&key) {
            debug_assert_eq!(*rates, self.rates_of(view, id));
            return rates.clone();
        }
        let rates = self.rates_of(view, id);
        self.rate_cache.insert(key, rates.clone());
        rates
    }

    fn rates_of(&self, view: &ClusterView<'_>, id: JobId) -> Vec<f64> {
        let types = self.types.as_ref().expect("types initialized");
        if self.table.is_empty() {
            return vec![1.0; types.names.len()];
        }
        let key = self.type_key(view, id);
        types
            .table_index
            .iter()
            .map(|ti| match (&key, ti) {
                // No job type: the reference rate, as the simulator's ReferenceRate.
                (None, Some(_)) => 1.0,
                (Some(key), Some(ti)) => self.table.consolidated(key, *ti).unwrap_or(0.0),
                (_, None) => 0.0,
            })
            .collect()
    }

    /// Co-located rates of `a` and `b` on each cluster type, if the table
    /// measured them with both positive somewhere (Gavel pairs equal scale
    /// factors only; the key carries the scale factor).
    fn pair_rates_of(&self, view: &ClusterView<'_>, a: JobId, b: JobId) -> Option<Vec<(f64, f64)>> {
        let types = self.types.as_ref().expect("types initialized");
        let (key_a, key_b) = (self.type_key(view, a)?, self.type_key(view, b)?);
        if key_a.scale_factor != key_b.scale_factor {
            return None;
        }
        let rates: Vec<(f64, f64)> = types
            .table_index
            .iter()
            .map(|ti| {
                ti.and_then(|ti| self.table.colocated(&key_a, &key_b, ti))
                    .map_or((0.0, 0.0), |p| (p.own_steps_per_s, p.other_steps_per_s))
            })
            .collect();
        rates.iter().any(|&(x, y)| x > 0.0 && y > 0.0).then_some(rates)
    }

    fn forget(&mut self, id: JobId) {
        if let Some(tracked) = self.jobs.remove(&id) {
            self.ghosts -= usize::from(tracked.ghost);
            self.need_update = true;
            if !self.config.objective.reads_progress() {
                let at = self
                    .alloc_jobs
                    .binary_search_by_key(&id, |job| job.id)
                    .expect("a tracked job has its row");
                self.alloc_jobs.remove(at);
            }
        }
        if let Ok(at) = self.arrived.binary_search(&id) {
            self.arrived.remove(at);
        }
        if self.pair_rates.is_empty() {
            // No pairs (every unpacked objective): only the job's own entry
            // holds it; no walk over every combination.
            self.combo_time_s.remove(&Combo::single(id));
            self.deficits_s.remove(&Combo::single(id));
        } else {
            self.pair_rates.retain(|&(a, b), _| a != id && b != id);
            self.combo_time_s.retain(|c| !c.contains(id));
            self.deficits_s.retain(|c| !c.contains(id));
        }
        #[cfg(test)]
        assert!(
            !self.combo_time_s.keys().iter().chain(self.deficits_s.keys()).any(|c| c.contains(id)),
            "forget leaves no combination of {id}, as the plain retain does"
        );
    }

    /// Admits the jobs that arrived by `up_to_s` on Gavel's clock; later ones
    /// (the engine's clock runs up to ROUND_SLACK per round ahead) wait for
    /// the next round, as they do in Gavel.
    fn admit_arrivals(&mut self, view: &ClusterView<'_>, up_to_s: f64) {
        // Most rounds admit no one: no split and rebuild of the arrived set then.
        if !self.arrived.iter().any(|&id| view.job(id).spec.arrival.as_secs_f64() <= up_to_s) {
            return;
        }
        let n = self.worker_time_s.len();
        // The admitted ones out, in id order; the later ones stay, in order.
        let mut arrived = std::mem::take(&mut self.admit_scratch);
        arrived.clear();
        self.arrived.retain(|&id| {
            let now = view.job(id).spec.arrival.as_secs_f64() <= up_to_s;
            if now {
                arrived.push(id);
            }
            !now
        });
        for &id in &arrived {
            let job = view.job(id);
            let tracked = Tracked {
                rates: self.rates_cached(view, id),
                scale_factor: job.spec.gpus.max(1),
                weight: (job.spec.priority as f64 + 1.0).max(1.0),
                arrival: job.spec.arrival,
                work: job.spec.work,
                credited: 0.0,
                ghost: false,
                stamp: 0,
                admitted: self.stats.allocations,
            };
            if self.config.objective.packs() {
                // Gavel starts a pair's time at zero (a job's at half a round).
                let others: Vec<JobId> = self.jobs.keys().copied().collect();
                for other in others {
                    if self.pair_rates.len() >= self.config.max_pairs as usize {
                        break;
                    }
                    if let Some(rates) = self.pair_rates_of(view, other, id) {
                        let combo = Combo::pair(other, id);
                        let Kind::Pair(a, b) = combo.kind() else { continue };
                        let rates =
                            if a == other { rates } else { rates.iter().map(|&(x, y)| (y, x)).collect() };
                        self.pair_rates.insert((a, b), rates);
                        self.combo_time_s.insert_filled(combo, n, 0.0);
                        self.deficits_s.insert_filled(combo, n, 0.0);
                    }
                }
            }
            if !self.config.objective.reads_progress() {
                // The allocator's row, kept in id order (mostly a push: jobs arrive in id order).
                let at = self.alloc_jobs.partition_point(|job| job.id < id);
                self.alloc_jobs.insert(at, tracked.alloc_job(id));
            }
            self.jobs.insert(id, tracked);
            self.admitted_since.push(id);
            self.combo_time_s.insert_filled(Combo::single(id), n, self.half_round_s());
            self.deficits_s.insert_filled(Combo::single(id), n, 0.0);
            self.need_update = true;
        }
        self.admit_scratch = arrived;
    }

    /// A round ends when its jobs have run their steps (Gavel's rule). The plan
    /// assumed each job runs from the round's start; a job that restarts pays
    /// the world's restore time first (the engine sees it in the job's progress
    /// report), so at the planned end it may not be done yet: the round then
    /// lasts until it is. Without this, with a restore time, rounds planned for
    /// jobs with few steps left end before any restore is over, every job is
    /// preempted again, and no job ever progresses (a livelock).
    fn extend_round(&mut self, view: &ClusterView<'_>) {
        let Some(round) = &mut self.round else { return };
        if view.now < round.end {
            return;
        }
        let mut end = round.end;
        for entry in &mut round.entries {
            // A plain loop over the two slots (a flattening iterator cost
            // more than the check itself).
            for slot in entry.targets {
                let Some((id, target)) = slot else { continue };
                // One lookup of the engine's job. A job that is not tracked
                // is not running (Gavel forgets a job only once the engine is
                // done with it), so the running check covers both.
                let job = view.job(id);
                debug_assert!(!job.is_running() || self.jobs.contains_key(&id), "{id} runs untracked");
                if !job.is_running() {
                    continue;
                }
                let progress = job.progress;
                let short = target - job.work_done(view.now);
                if progress.rate <= 0.0 || !progress.rate.is_finite() || short <= 1e-9 * target.max(1.0) {
                    continue;
                }
                let reach_s = progress.at.as_secs_f64() + (target - progress.done) / progress.rate;
                let reach = Time(((reach_s * MICROS_PER_SECOND as f64).ceil()) as u64) + ROUND_SLACK;
                if reach > view.now {
                    entry.finish_s = entry.finish_s.max(reach_s);
                    round.end_s = round.end_s.max(reach_s);
                    end = end.max(reach);
                }
            }
        }
        round.end = end;
    }

    /// Closes the round: charges each combination the time it ran to its GPU type.
    fn end_round(&mut self) {
        let Some(mut round) = self.round.take() else { return };
        #[cfg(test)]
        let plain = {
            let mut times = self.combo_time_s.to_map();
            for entry in &round.entries {
                if let Some(row) = times.get_mut(&entry.combo) {
                    row[entry.gpu_type] += entry.finish_s - round.charged_from_s;
                }
            }
            times
        };
        // Each combination runs once a round: one addition to its own row, in
        // any order. An entry's row is first looked for where the entry last
        // found it (`RoundEntry::row_hint`) and one below; else, as entries
        // mostly ascend (a kept placement's), a cursor walks the rows forward;
        // an entry below the last one is found by binary search over the keys.
        let (mut from, mut last) = (0, None);
        for entry in &mut round.entries {
            let keys = self.combo_time_s.keys();
            let hinted = [entry.row_hint, entry.row_hint.wrapping_sub(1)]
                .into_iter()
                .find(|&k| keys.get(k) == Some(&entry.combo));
            let found = if let Some(k) = hinted {
                from = k + 1;
                Some(k)
            } else if last.is_none_or(|last| last < entry.combo) {
                let (found, next) = self.combo_time_s.find_from(from, &entry.combo);
                from = next;
                found
            } else {
                let at = self.combo_time_s.position(&entry.combo);
                from = at.map_or_else(|at| at, |k| k + 1);
                at.ok()
            };
            last = Some(entry.combo);
            if let Some(k) = found {
                entry.row_hint = k;
                self.combo_time_s.row_mut(k)[entry.gpu_type] += entry.finish_s - round.charged_from_s;
            }
        }
        #[cfg(test)]
        {
            let bits = |m: &BTreeMap<Combo, Vec<f64>>| -> Vec<(Combo, Vec<u64>)> {
                m.iter().map(|(&c, v)| (c, v.iter().map(|x| x.to_bits()).collect())).collect()
            };
            assert_eq!(bits(&self.combo_time_s.to_map()), bits(&plain), "charged as by lookups");
        }
        // The types' totals in entry order (a sum's bits depend on its order).
        for entry in &round.entries {
            self.worker_time_s[entry.gpu_type] += entry.finish_s - round.charged_from_s;
        }
        self.last_end_s = round.end_s;
        // Gavel removes a job at the end of the round that ran its last steps.
        // Nested loops over each combination's member slice (in the order the
        // flattened iterator took them); no vector unless a job is done.
        // Only a ghost can be: no walk while there is none.
        debug_assert_eq!(self.ghosts, self.jobs.iter().filter(|(_, j)| j.ghost).count(), "ghosts counted");
        let mut done: Vec<JobId> = Vec::new();
        if self.ghosts > 0 {
            for entry in &round.entries {
                for &id in entry.combo.jobs().iter() {
                    if self.jobs.get(&id).is_some_and(|j| j.ghost && j.credited >= j.work) {
                        done.push(id);
                    }
                }
            }
        }
        for id in done {
            self.forget(id);
        }
        self.round = Some(round);
    }

    /// Work done by `id` as Gavel accounts it: each round credits the steps it
    /// planned (`floor(rate * round)` or what is left), and a job idles from its
    /// last step to the round's end. The engine's job, kept on its GPUs into the
    /// next round (lease extension), runs on through that gap instead, up to a
    /// step per round ahead; its work done is used only where it is behind
    /// (restoring, or rolled back to a checkpoint).
    /// Takes the job's tracked state (`tracked`, the caller's lookup).
    fn plan_done(view: &ClusterView<'_>, id: JobId, now: Time, tracked: &Tracked) -> f64 {
        view.job(id).work_done(now).min(tracked.credited)
    }

    /// Gavel's `_reset_time_run_so_far`: one walk over the per-combination rows
    /// side by side (the same order), no lookups.
    fn reset_time(&mut self, now_s: f64) {
        self.steady = None;
        #[cfg(test)]
        let plain = {
            let (mut times, mut deficits, mut workers) =
                (self.combo_time_s.to_map(), self.deficits_s.to_map(), self.worker_time_s.clone());
            self.reset_time_plain(now_s, &mut times, &mut deficits, &mut workers);
            (times, deficits, workers)
        };
        let elapsed = now_s - self.last_reset_s;
        let half = self.half_round_s();
        let types = self.worker_time_s.len();
        self.worker_time_s.iter_mut().for_each(|w| *w = 0.0);
        debug_assert_eq!(self.combo_time_s.keys(), self.deficits_s.keys(), "the same combinations");
        let mut from = 0;
        let workers = &mut self.worker_time_s[..types];
        let allocation = &self.allocation;
        let (keys, time_rows) = self.combo_time_s.rows_mut();
        let (_, deficit_rows) = self.deficits_s.rows_mut();
        for ((combo, times), deficit) in keys.iter().zip(time_rows).zip(deficit_rows) {
            let (x, next) = allocation.seek(from, combo);
            from = next;
            let x = x.map(|j| &allocation.row(j)[..types]);
            let (times, deficit) = (&mut times[..types], &mut deficit[..types]);
            for t in 0..types {
                let received = times[t] - half;
                let promised = x.map_or(0.0, |x| x[t] * elapsed);
                deficit[t] += promised - received;
                times[t] = half;
                // Each type's sum takes `half` once per combination in the same
                // order as the plain loop (types outer), so it is bit-identical.
                workers[t] += half;
            }
        }
        self.last_reset_s = now_s;
        #[cfg(test)]
        {
            let bits = |m: &BTreeMap<Combo, Vec<f64>>| -> Vec<(Combo, Vec<u64>)> {
                m.iter().map(|(&c, v)| (c, v.iter().map(|x| x.to_bits()).collect())).collect()
            };
            let (times, deficits, workers) = plain;
            assert_eq!(bits(&self.combo_time_s.to_map()), bits(&times), "reset: times as the plain loop");
            assert_eq!(bits(&self.deficits_s.to_map()), bits(&deficits), "reset: deficits as the plain loop");
            let w = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<u64>>();
            assert_eq!(w(&self.worker_time_s), w(&workers), "reset: worker time as the plain loop");
        }
    }

    /// The plain `_reset_time_run_so_far` (two map lookups per combination and
    /// type) on copies of the state as maps, for tests.
    #[cfg(test)]
    fn reset_time_plain(
        &self,
        now_s: f64,
        combo_time_s: &mut BTreeMap<Combo, Vec<f64>>,
        deficits_s: &mut BTreeMap<Combo, Vec<f64>>,
        worker_time_s: &mut [f64],
    ) {
        let elapsed = now_s - self.last_reset_s;
        let half = self.half_round_s();
        let allocation = self.allocation.to_map();
        for t in 0..worker_time_s.len() {
            worker_time_s[t] = 0.0;
            for (combo, times) in combo_time_s.iter_mut() {
                let received = times[t] - half;
                let promised = allocation.get(combo).map_or(0.0, |x| x[t] * elapsed);
                if let Some(deficit) = deficits_s.get_mut(combo) {
                    deficit[t] += promised - received;
                }
                times[t] = half;
                worker_time_s[t] += half;
            }
        }
    }

    fn compute_allocation(&mut self, view: &ClusterView<'_>, now: Time, clock_s: f64) {
        self.steady = None;
        let types = self.types.as_ref().expect("types initialized");
        let capacity: Vec<u32> = (0..types.names.len())
            .map(
                |t| if types.order.contains(&t) { view.cluster.gpus_of_type(GpuTypeId(t as u32)) } else { 0 },
            )
            .collect();
        let mut jobs = std::mem::take(&mut self.alloc_jobs);
        // An objective that reads no progress (every field then stays what
        // it was at admission) gets the rows kept as jobs come and go
        // (`admit_arrivals`, `forget`), not rewritten here; one that reads
        // progress gets each row refilled.
        let progress = self.config.objective.reads_progress();
        if progress {
            jobs.truncate(self.jobs.len());
            for (k, (&id, tracked)) in self.jobs.iter().enumerate() {
                let done = Gavel::plan_done(view, id, now, tracked);
                let steps_remaining = (tracked.work - done).max(0.0).ceil();
                let secs_since_arrival = clock_s - tracked.arrival.as_secs_f64();
                let Some(job) = jobs.get_mut(k) else {
                    jobs.push(AllocJob {
                        id,
                        steps_per_s: tracked.rates.clone(),
                        scale_factor: tracked.scale_factor,
                        weight: tracked.weight,
                        steps_remaining,
                        secs_since_arrival,
                    });
                    continue;
                };
                // A job's rates never change: the same job in the same row keeps its copy.
                if job.id != id {
                    job.id = id;
                    job.steps_per_s.clone_from(&tracked.rates);
                }
                #[cfg(test)]
                assert_eq!(job.steps_per_s, tracked.rates, "the row's rates are the job's");
                job.scale_factor = tracked.scale_factor;
                job.weight = tracked.weight;
                job.steps_remaining = steps_remaining;
                job.secs_since_arrival = secs_since_arrival;
            }
        }
        #[cfg(test)]
        if !progress {
            let refilled: Vec<AllocJob> =
                self.jobs.iter().map(|(&id, tracked)| tracked.alloc_job(id)).collect();
            assert_eq!(
                format!("{jobs:?}"),
                format!("{refilled:?}"),
                "the rows kept as jobs come and go = refilled"
            );
        }
        // `jobs` is in id order (the table walks ids ascending): a pair's
        // members by binary search, no index map.
        let index = |id: JobId| jobs.binary_search_by_key(&id, |j| j.id).expect("pairs are of tracked jobs");
        let pairs: Vec<PairCandidate> = self
            .pair_rates
            .iter()
            .map(|(&(a, b), rates)| PairCandidate { pair: (index(a), index(b)), rates: rates.clone() })
            .collect();
        // A solver failure leaves X empty: every priority is zero this round and
        // the next arrival or departure tries again. It is never a panic.
        // Rows copied into the flat table (its buffers reused), in combination
        // order: singles come in id order, pairs (if any) interleave and are sorted in.
        self.allocation.clear();
        #[cfg(test)]
        let before = self.allocator.clone();
        self.zero_rows_dropped = false;
        if let Some(assigned) = self.allocator.fifo_assignment(&jobs, &capacity, &types.names) {
            // Unpacked FIFO: X is 1 on each assigned job's type and 0 elsewhere.
            // Only the assigned jobs' rows are stored (no row per job from the
            // allocator, no row of zeros): a missing row reads as zeros
            // wherever rows are read (the reset, the ranking), and whether a
            // combination has a row at all is `Gavel::allocated`. The assigned
            // jobs come in id order; they are the positive rows.
            let n = capacity.len();
            self.allocation.extend_filled(assigned.keys().map(|&id| Combo::single(id)), n, 0.0);
            self.positive.clear();
            for (k, (&id, &t)) in assigned.iter().enumerate() {
                self.allocation.row_mut(k)[t] = 1.0;
                self.positive.push(Combo::single(id));
            }
            self.zero_rows_dropped = true;
            #[cfg(test)]
            {
                // The rows `allocate_packed` returns, from the same state.
                let mut plain = before;
                let x =
                    plain.allocate_packed(&jobs, &pairs, &capacity, &types.names).expect("FIFO never fails");
                let rows: BTreeMap<Combo, Vec<f64>> =
                    jobs.iter().zip(x.singles).map(|(job, row)| (Combo::single(job.id), row)).collect();
                assert_eq!(format!("{plain:?}"), format!("{:?}", self.allocator), "the same FIFO state");
                let positive: BTreeMap<Combo, Vec<f64>> = rows
                    .iter()
                    .filter(|(_, x)| x.iter().any(|&v| v > 0.0))
                    .map(|(&c, x)| (c, x.clone()))
                    .collect();
                assert_eq!(
                    self.allocation.to_map(),
                    positive,
                    "FIFO's stored rows = the allocator's nonzero ones"
                );
                assert_eq!(
                    self.positive,
                    positive.keys().copied().collect::<Vec<_>>(),
                    "the assigned jobs = the positive rows"
                );
                // `allocated` is then checked against these rows at every call.
                self.allocated_plain = rows.keys().copied().collect();
            }
        } else if let Ok(x) = self.allocator.allocate_packed(&jobs, &pairs, &capacity, &types.names) {
            let singles = jobs.iter().zip(&x.singles).map(|(job, row)| (Combo::single(job.id), row));
            if x.pairs.is_empty() {
                for (combo, row) in singles {
                    self.allocation.push(combo, row);
                }
            } else {
                let pairs =
                    self.pair_rates.keys().zip(&x.pairs).map(|(&(a, b), row)| (Combo::pair(a, b), row));
                let mut rows: Vec<(Combo, &Vec<f64>)> = singles.chain(pairs).collect();
                rows.sort_unstable_by_key(|&(combo, _)| combo);
                for (combo, row) in rows {
                    self.allocation.push(combo, row);
                }
            }
            self.positive.clear();
            self.positive.extend(
                self.allocation.iter().filter(|(_, x)| x.iter().any(|&v| v > 0.0)).map(|(combo, _)| combo),
            );
        } else {
            self.positive.clear();
        }
        self.alloc_jobs = jobs;
        self.stats.allocations += 1;
        #[cfg(test)]
        for combo in self.combo_time_s.keys().iter().copied().chain([Combo::single(JobId(u32::MAX))]) {
            // Every tracked combination (and one of no job) is `allocated` as the rows say.
            self.allocated(combo);
        }
    }

    /// Whether every job of `combo` progresses on `gpu_type` (a pair with a
    /// ghost never runs: its other job runs alone).
    fn runs_on(&self, combo: Combo, gpu_type: usize) -> bool {
        match combo.kind() {
            Kind::Single(a) => self.jobs.get(&a).is_some_and(|j| j.rates[gpu_type] > 0.0),
            Kind::Pair(a, b) => {
                !self.is_ghost(combo)
                    && self
                        .pair_rates
                        .get(&(a, b))
                        .is_some_and(|r| r[gpu_type].0 > 0.0 && r[gpu_type].1 > 0.0)
            }
        }
    }

    /// Whether `combo` has a row in the last allocation, zero or not (Gavel's
    /// `combo in allocation`: a combination without one gets no GPUs). Where
    /// the zero rows were not stored (unpacked FIFO), whether it is a single
    /// whose job was admitted before that allocation (a job forgotten since
    /// has no combination left to ask about).
    fn allocated(&self, combo: Combo) -> bool {
        if !self.zero_rows_dropped {
            return self.allocation.contains_key(&combo);
        }
        let allocations = self.stats.allocations;
        let answer =
            combo.as_single().and_then(|id| self.jobs.get(&id)).is_some_and(|j| j.admitted < allocations);
        #[cfg(test)]
        assert_eq!(
            answer,
            self.allocated_plain.contains(&combo),
            "allocated {combo:?} = a row of zeros or not"
        );
        answer
    }

    fn is_ghost(&self, combo: Combo) -> bool {
        match combo.kind() {
            Kind::Single(a) => self.jobs.get(&a).is_some_and(|j| j.ghost),
            Kind::Pair(a, b) => [a, b].iter().any(|id| self.jobs.get(id).is_some_and(|j| j.ghost)),
        }
    }

    /// Steps/s of each job of `combo` (in `Combo::jobs` order) on `gpu_type`;
    /// a single's second entry is unused (zip it with `Combo::jobs`).
    fn combo_rates(&self, combo: Combo, gpu_type: usize) -> [f64; 2] {
        match combo.kind() {
            Kind::Single(a) => [self.jobs[&a].rates[gpu_type], 0.0],
            Kind::Pair(a, b) => {
                let (x, y) = self.pair_rates[&(a, b)][gpu_type];
                [x, y]
            }
        }
    }

    fn scale_factor(&self, combo: Combo) -> u32 {
        match combo.kind() {
            Kind::Single(a) | Kind::Pair(a, _) => self.jobs[&a].scale_factor,
        }
    }

    /// Whether a round at `now_s` resets time and re-allocates (Gavel's rule):
    /// the jobs changed since the last allocation, and the reset interval is
    /// over or no reset has happened yet.
    fn reset_due(&self, now_s: f64) -> bool {
        let interval_over = now_s - self.last_reset_s >= self.config.reset_interval.as_secs_f64();
        self.need_update && (interval_over || self.last_reset_s == 0.0)
    }

    /// Gavel's `_update_priorities`: maybe reset and re-allocate, then priorities.
    fn priorities(&mut self, view: &ClusterView<'_>, now: Time, now_s: f64, force: bool) -> Ranking {
        if force || self.reset_due(now_s) {
            self.reset_time(now_s);
            self.compute_allocation(view, now, now_s);
            self.need_update = false;
        }
        let mut ranking = std::mem::take(&mut self.scratch);
        // Unpacked FIFO never takes a combination of zero priority (`choose`
        // with `any_priority` false, as every unforced ranking is used): rank
        // only those that can get GPUs.
        let positive_only = !force && self.config.objective.is_fifo() && !self.config.objective.packs();
        if positive_only {
            self.rank_positive(&mut ranking);
            #[cfg(test)]
            assert_eq!(
                ranking,
                self.rank_plain().positive_only(),
                "positive ranking = the full one's positive part"
            );
        } else {
            self.rank_into(&mut ranking);
            #[cfg(test)]
            assert_eq!(ranking, self.rank_plain(), "the merged walk ranks as the lookups do");
        }
        ranking
    }

    /// [`Gavel::rank_into`] for the combinations with a positive priority on
    /// some type only (every other key of theirs kept), in the same order:
    /// `choose` then sorts and takes, per type, exactly the entries it takes
    /// from the full ranking (it filters positive ones first, and its stable
    /// sort keeps their relative order). Walks the allocation's positive
    /// singles (`positive`, a few dozen under FIFO) instead of every
    /// combination (every waiting job).
    fn rank_positive(&self, ranking: &mut Ranking) {
        let types = self.worker_time_s.len();
        ranking.types = types;
        ranking.combos.clear();
        ranking.keys.clear();
        // `positive` and the rows in the same order: walked side by side, no
        // lookups (each walk starts where the first positive one is).
        let Some(first) = self.positive.first() else { return };
        let start_at = |rows: &Rows<Combo>| rows.position(first).unwrap_or_else(|at| at);
        let (mut from_rows, mut from_x) = (start_at(&self.combo_time_s), start_at(&self.allocation));
        for &combo in &self.positive {
            let Some(a) = combo.as_single() else { continue };
            let Some(job) = self.jobs.get(&a) else { continue };
            let (row, next) = self.combo_time_s.seek(from_rows, &combo);
            from_rows = next;
            let (x, next) = self.allocation.seek(from_x, &combo);
            from_x = next;
            let (Some(row), Some(x)) = (row, x) else { continue };
            let (times, deficits, x_row) =
                (self.combo_time_s.row(row), self.deficits_s.row(row), self.allocation.row(x));
            let start = ranking.keys.len();
            let mut any = false;
            for t in 0..types {
                let priority = self.priority(x_row[t], job.rates[t] > 0.0, times[t], t);
                any |= priority > 0.0;
                ranking.keys.push((priority, deficits[t], x_row[t]));
            }
            if any {
                ranking.combos.push(combo);
            } else {
                ranking.keys.truncate(start);
            }
        }
    }

    /// Gavel's priority of a combination with allocation `x` on type `t`
    /// (`runs`: every job of it progresses there) that received `time` on it.
    fn priority(&self, x: f64, runs: bool, time: f64, t: usize) -> f64 {
        if x == 0.0 || !runs {
            return 0.0;
        }
        let fraction = if self.worker_time_s[t] == 0.0 { 0.0 } else { time / self.worker_time_s[t] };
        if fraction > 0.0 {
            x / fraction
        } else {
            x * 1e9
        }
    }

    /// Each combination's (priority, deficit, allocation) on every type, into
    /// `ranking`'s buffers (kept across rounds). One walk over the per-combination
    /// maps side by side (same order; `deficits_s` has the keys of `combo_time_s`,
    /// `allocation` may lack new ones and keep departed ones) and one lookup of
    /// what a combination runs on, instead of three map lookups per type.
    fn rank_into(&self, ranking: &mut Ranking) {
        let types = self.worker_time_s.len();
        ranking.types = types;
        ranking.combos.clear();
        ranking.keys.clear();
        debug_assert_eq!(self.combo_time_s.keys(), self.deficits_s.keys(), "the same combinations");
        let mut from = 0;
        for (k, &combo) in self.combo_time_s.keys().iter().enumerate() {
            let (times, deficits) = (self.combo_time_s.row(k), self.deficits_s.row(k));
            let (x, next) = self.allocation.seek(from, &combo);
            from = next;
            ranking.combos.push(combo);
            let Some(x) = x else {
                ranking.keys.extend(deficits.iter().take(types).map(|&d| (0.0, d, 0.0)));
                continue;
            };
            let x_row = self.allocation.row(x);
            // What `runs_on(combo, t)` reads, looked up once.
            let single = match combo.kind() {
                Kind::Single(a) => self.jobs.get(&a).map(|j| &j.rates),
                Kind::Pair(..) => None,
            };
            let pair = match combo.kind() {
                Kind::Pair(a, b) if !self.is_ghost(combo) => self.pair_rates.get(&(a, b)),
                _ => None,
            };
            for t in 0..types {
                let x = x_row[t];
                let runs = match combo.kind() {
                    Kind::Single(_) => single.is_some_and(|r| r[t] > 0.0),
                    Kind::Pair(..) => pair.is_some_and(|r| r[t].0 > 0.0 && r[t].1 > 0.0),
                };
                let priority = self.priority(x, runs, times[t], t);
                ranking.keys.push((priority, deficits[t], x));
            }
        }
    }

    /// The plain computation `rank_into` replaces: three map lookups per
    /// combination and type (tests check every round's ranking against it).
    #[cfg(test)]
    fn rank_plain(&self) -> Ranking {
        let types = self.worker_time_s.len();
        let mut ranking = Ranking {
            types,
            combos: Vec::with_capacity(self.combo_time_s.len()),
            keys: Vec::with_capacity(self.combo_time_s.len() * types),
        };
        for (combo, times) in self.combo_time_s.iter() {
            let allocation = self.allocation.get(&combo);
            let deficits = self.deficits_s.get(&combo);
            ranking.combos.push(combo);
            for t in 0..types {
                let x = allocation.map_or(0.0, |x| x[t]);
                let priority = if allocation.is_none() || x == 0.0 || !self.runs_on(combo, t) {
                    0.0
                } else {
                    let fraction =
                        if self.worker_time_s[t] == 0.0 { 0.0 } else { times[t] / self.worker_time_s[t] };
                    if fraction > 0.0 {
                        x / fraction
                    } else {
                        x * 1e9
                    }
                };
                ranking.keys.push((priority, deficits.map_or(0.0, |d| d[t]), x));
            }
        }
        ranking
    }

    /// Gavel's `_schedule_jobs_on_workers_helper`: (combination, type) chosen this round.
    /// `any_priority`: also take zero-priority combinations under FIFO (a last
    /// resort when nothing else can run).
    fn choose(
        &mut self,
        ranking: &Ranking,
        view: &ClusterView<'_>,
        any_priority: bool,
    ) -> Vec<(Combo, usize)> {
        let types = self.types.as_ref().expect("types initialized");
        // The pass's buffers, kept from pass to pass.
        let mut order = std::mem::take(&mut self.order_scratch);
        order.clear();
        order.extend_from_slice(&types.order);
        if !self.config.objective.heterogeneity_aware() {
            self.shuffler.shuffle(&mut order);
        }
        let is_fifo = self.config.objective.is_fifo() && !any_priority;
        let mut left = std::mem::take(&mut self.up_scratch);
        up_gpus_into(view, types.names.len(), &mut left);
        #[cfg(test)]
        for (t, &up) in left.iter().enumerate() {
            assert_eq!(up, up_gpus_of_type(view, t), "one pass over the nodes = a scan per type");
        }
        // Each take holds a GPU at least: sized once, no regrowth while taking.
        let most = left.iter().map(|&up| up as usize).sum::<usize>().min(ranking.combos.len());
        let mut picked = std::mem::take(&mut self.picked);
        picked.reset(view.tenants.len());
        let mut chosen = Vec::with_capacity(most);
        let n = ranking.types;
        // Each combination's position in the ranking, under its sort key.
        let mut entries = std::mem::take(&mut self.entries_scratch);
        self.took_every_positive = true;
        for &t in &order {
            // Positive priorities first; zero ones (most pairs) are ordered only
            // if GPUs of the type are left, and never for FIFO. Priorities are
            // never negative, so this is the order of sorting all at once.
            for positive in [true, false] {
                if is_fifo && !positive {
                    break;
                }
                let key = |k: usize| ranking.keys[k * n + t];
                if left[t] == 0 {
                    // Nothing to take: the pass took every positive one only if there is none.
                    self.took_every_positive &=
                        !positive || !(0..ranking.combos.len()).any(|k| key(k).0 > 0.0);
                    break;
                }
                // Descending by (priority, deficit, allocation) in `total_cmp`'s
                // order, equal keys in Gavel's insertion order (as Python's stable
                // sorted(reverse=True)): each key as integers that compare the
                // same way, ties broken by position, in one sort of plain tuples.
                entries.clear();
                entries.extend((0..ranking.combos.len()).filter(|&k| (key(k).0 > 0.0) == positive).map(
                    |k| {
                        let (p, d, x) = key(k);
                        (descending_total(p), descending_total(d), descending_total(x), k)
                    },
                ));
                #[cfg(test)]
                let mut plain: Vec<usize> = entries.iter().map(|&(.., k)| k).collect();
                entries.sort_unstable();
                #[cfg(test)]
                {
                    plain.sort_by(|&a, &b| {
                        let ((pa, da, xa), (pb, db, xb)) = (key(a), key(b));
                        pb.total_cmp(&pa).then(db.total_cmp(&da)).then(xb.total_cmp(&xa))
                    });
                    let sorted: Vec<usize> = entries.iter().map(|&(.., k)| k).collect();
                    assert_eq!(sorted, plain, "the integer keys sort as the stable sort by total_cmp");
                }
                let mut taken = 0;
                for &(.., k) in &entries {
                    if left[t] == 0 {
                        break;
                    }
                    let combo = ranking.combos[k];
                    if self.runs_on(combo, t) && self.take(combo, t, view, &mut left, &mut picked) {
                        chosen.push((combo, t));
                        taken += 1;
                    }
                }
                self.took_every_positive &= !positive || taken == entries.len();
            }
        }
        (self.order_scratch, self.up_scratch, self.picked, self.entries_scratch) =
            (order, left, picked, entries);
        chosen
    }

    /// Takes `combo` on type `t` if none of its jobs is taken, it fits in the
    /// GPUs left, and its tenants stay within their hard limits (the engine
    /// refuses starts past them, a shared GPU counting for each job on it;
    /// Gavel, having no tenants, never checks).
    fn take(
        &self,
        combo: Combo,
        t: usize,
        view: &ClusterView<'_>,
        left: &mut [u32],
        picked: &mut Picked,
    ) -> bool {
        #[cfg(test)]
        let plain = {
            let (mut left, mut picked) = (left.to_vec(), picked.clone());
            (self.take_plain(combo, t, view, &mut left, &mut picked), left, picked)
        };
        let taken = self.take_fast(combo, t, view, left, picked);
        #[cfg(test)]
        assert_eq!((taken, left.to_vec(), picked.clone()), plain, "take = the copy-then-check it replaces");
        taken
    }

    /// `combo`'s jobs and scale factor if none of them is taken yet and it fits
    /// in the GPUs of type `t` left (what both forms of `take` check first).
    fn free_to_take(&self, combo: Combo, t: usize, left: &[u32], picked: &Picked) -> Option<(Members, u32)> {
        let members = combo.jobs();
        let sf = self.scale_factor(combo);
        (!members.iter().any(|&id| picked.is_taken(id)) && sf <= left[t]).then_some((members, sf))
    }

    fn take_fast(
        &self,
        combo: Combo,
        t: usize,
        view: &ClusterView<'_>,
        left: &mut [u32],
        picked: &mut Picked,
    ) -> bool {
        let Some((members, sf)) = self.free_to_take(combo, t, left, picked) else { return false };
        // Each member adds `sf` to its tenant's GPUs (twice for a pair of one
        // tenant); checked before anything is charged, without a copy.
        // Two calls, not `[0, 1].map(..)`: the array map's drain guard is not
        // always inlined, and this runs per take attempt.
        let tenant_of = |k: usize| members.get(k).map(|&id| view.job(id).spec.tenant);
        let tenants: [Option<TenantId>; 2] = [tenant_of(0), tenant_of(1)];
        for (k, tenant) in tenants.iter().enumerate() {
            let Some(tenant) = *tenant else { continue };
            let limit = view.tenant(tenant).gpu_limit.unwrap_or(u32::MAX);
            let mut after = picked.tenant_gpus[tenant.index()];
            for _ in tenants[..=k].iter().filter(|&&other| other == Some(tenant)) {
                after = after.saturating_add(sf);
            }
            if after > limit {
                return false;
            }
        }
        for tenant in tenants.into_iter().flatten() {
            picked.tenant_gpus[tenant.index()] = picked.tenant_gpus[tenant.index()].saturating_add(sf);
        }
        picked.mark(members);
        left[t] -= sf;
        true
    }

    /// The plain `take` (a copy of the tenants' GPUs per attempt), for tests.
    #[cfg(test)]
    fn take_plain(
        &self,
        combo: Combo,
        t: usize,
        view: &ClusterView<'_>,
        left: &mut [u32],
        picked: &mut Picked,
    ) -> bool {
        let Some((members, sf)) = self.free_to_take(combo, t, left, picked) else { return false };
        let mut after = picked.tenant_gpus.clone();
        for &id in members.iter() {
            let tenant = view.job(id).spec.tenant;
            let limit = view.tenant(tenant).gpu_limit.unwrap_or(u32::MAX);
            after[tenant.index()] = after[tenant.index()].saturating_add(sf);
            if after[tenant.index()] > limit {
                return false;
            }
        }
        picked.tenant_gpus = after;
        picked.mark(members);
        left[t] -= sf;
        true
    }

    /// Starts a round at `now`: returns the actions and records the round.
    fn start_round(&mut self, view: &ClusterView<'_>, now: Time) -> Decision {
        // Gavel's clock: a round that follows another starts at the exact end
        // of the last (its last planned finish), not at the engine's wakeup,
        // which is rounded up to a microsecond and comes ROUND_SLACK later
        // (otherwise every round would start about a millisecond late and
        // the drift would move rounds past arrivals and reset times).
        let mut clock_s = match &self.round {
            Some(last) if now <= last.end => last.end_s,
            _ => now.as_secs_f64(),
        };
        let previous: Vec<RoundEntry> = self.round.take().map(|r| r.entries).unwrap_or_default();
        self.admit_arrivals(view, clock_s);
        if self.jobs.is_empty() {
            // Nothing to run before them: Gavel's clock jumps to the next arrival.
            if let Some(first) = self.arrived.iter().map(|&id| view.job(id).spec.arrival).min() {
                clock_s = first.as_secs_f64();
                self.admit_arrivals(view, clock_s);
            }
        }
        #[cfg(test)]
        for &combo in self.combo_time_s.keys() {
            // Jobs admitted since the last allocation included, which it gave no row.
            self.allocated(combo);
        }
        let mut decision = Decision::recycled();
        if self.jobs.is_empty() {
            for &id in view.running {
                decision.actions.push(Action::Preempt { job: id });
            }
            self.settled = false;
            return decision;
        }
        let previous = match self.steady_in_place(view, now, clock_s, previous, &mut decision) {
            Ok(()) => return decision,
            Err(previous) => previous,
        };
        let previous_index = Previous::new(&previous);
        if let Some((placed, extended)) = self.steady_round(view, clock_s, &previous_index) {
            self.count_kept_leases(&previous, &placed, extended);
            self.record_round(view, now, clock_s, placed, &previous, &mut decision);
            self.recycle(previous);
            return decision;
        }
        let mut priorities = self.priorities(view, now, clock_s, false);
        let mut chosen = self.choose(&priorities, view, false);
        let mut steady = self.took_every_positive && self.config.objective.is_fifo();
        if !chosen.iter().any(|&(c, _)| self.allocated(c)) {
            // A forced reset (and maybe zero priorities): never repeated as steady.
            steady = false;
            // Nothing would run (combinations chosen without an allocation get
            // no GPUs, as in Gavel). Gavel then forces a reset; without it no
            // timer would ever fire again.
            self.scratch = priorities;
            priorities = self.priorities(view, now, clock_s, true);
            chosen = self.choose(&priorities, view, false);
            if !chosen.iter().any(|&(c, _)| self.allocated(c)) {
                // Still nothing: the only positive-priority combinations cannot be
                // taken (FIFO-packed's pairs over a tenant's hard GPU limit, which
                // Gavel never checks). Without a start no timer would fire and the
                // jobs would wait forever; consider zero-priority ones too.
                chosen = self.choose(&priorities, view, true);
            }
        }
        self.scratch = priorities;
        self.steady = self.steady_after(view, steady, &chosen);
        let placed = match self.place_kept(view, &chosen, &previous_index) {
            Some((placed, extended)) => {
                self.count_kept_leases(&previous, &placed, extended);
                placed
            }
            None => {
                let placed = self.place(view, &chosen, &previous_index, &mut decision);
                self.count_leases(&previous, &placed);
                placed
            }
        };
        self.record_round(view, now, clock_s, placed, &previous, &mut decision);
        self.recycle(previous);
        decision
    }

    /// Keeps the last round's entry buffer (emptied) for the next round's entries.
    fn recycle(&mut self, mut previous: Vec<RoundEntry>) {
        previous.clear();
        self.spare_entries = previous;
    }

    /// A steady round ([`Gavel::steady_round`]) whose kept placement
    /// ([`Gavel::place_kept`]) is the last round's entries, less those of jobs
    /// that left, in the same order and on the same GPU lists: the entries are
    /// updated in place (finish and targets, by the operations of
    /// [`Gavel::record_round`] in its order) instead of being placed, counted
    /// ([`Gavel::count_kept_leases`]: every entry kept is an extension and an
    /// opportunity, and a dropped one, whose jobs all left, neither) and
    /// recorded anew. Verdicts: when the last round left every other tracked
    /// job with `NotThisRound` (`settled`), only jobs admitted since can need
    /// one (each job that ran then and is not running now left). `Err`: not
    /// such a round, `previous` untouched (the steady set has dropped its
    /// departed jobs, as `steady_round` drops them).
    fn steady_in_place(
        &mut self,
        view: &ClusterView<'_>,
        now: Time,
        clock_s: f64,
        mut previous: Vec<RoundEntry>,
        decision: &mut Decision,
    ) -> Result<(), Vec<RoundEntry>> {
        if self.reset_due(clock_s) {
            return Err(previous);
        }
        let jobs = &self.jobs;
        let Some(steady) = self.steady.as_mut() else { return Err(previous) };
        // `steady_round`'s retain of the tracked jobs, run only if one left.
        let mut ghost = false;
        let mut left = false;
        for (combo, _) in &steady.chosen {
            match jobs.get(&combo.jobs()[0]) {
                Some(job) => ghost |= job.ghost,
                None => left = true,
            }
        }
        if left {
            steady.chosen.retain(|(combo, _)| jobs.contains_key(&combo.jobs()[0]));
        }
        // Without ghosts, `place_kept` places every chosen job: as many as run.
        if ghost || steady.chosen.is_empty() || steady.chosen.len() != view.running.len() {
            return Err(previous);
        }
        up_gpus_into(view, self.worker_time_s.len(), &mut self.up_scratch);
        if self.up_scratch != steady.up {
            return Err(previous);
        }
        let chosen = &steady.chosen;
        let walk = match kept_entries(jobs, view, chosen, &previous) {
            Some(walk) => walk,
            // After a full round that started jobs the entries are out of
            // order (kept ones first): in combination order, as `place_kept`
            // lists them (each combination at most once: any sort is the
            // same; what else reads `previous` does not depend on its order).
            None if !previous.is_sorted_by_key(|entry| entry.combo) => {
                previous.sort_unstable_by_key(|entry| entry.combo);
                match kept_entries(jobs, view, chosen, &previous) {
                    Some(walk) => walk,
                    None => return Err(previous),
                }
            }
            None => return Err(previous),
        };
        let kept = chosen.len() as u64;
        #[cfg(test)]
        let plain = {
            // The plain steady round from the same state, then the state put back.
            let saved = (
                self.jobs.clone(),
                self.stats,
                self.verdict_stamp,
                self.shuffler.clone(),
                self.steady.clone(),
                std::mem::take(&mut self.spare_entries),
                self.settled,
                self.admitted_since.clone(),
            );
            let entries = previous.clone();
            let index = Previous::new(&entries);
            let (placed, extended) =
                self.steady_round(view, clock_s, &index).expect("an in-place round is a steady round");
            self.count_kept_leases(&entries, &placed, extended);
            let mut plain_decision = Decision::recycled();
            self.record_round(view, now, clock_s, placed, &entries, &mut plain_decision);
            let out = (
                self.round.take().expect("a round"),
                format!("{:?}", self.jobs),
                self.stats,
                self.verdict_stamp,
                format!("{:?}", self.shuffler),
                format!("{plain_decision:?}"),
            );
            (
                self.jobs,
                self.stats,
                self.verdict_stamp,
                self.shuffler,
                self.steady,
                self.spare_entries,
                self.settled,
                self.admitted_since,
            ) = saved;
            out
        };
        self.stats.lease_opportunities += kept;
        self.stats.lease_extensions += kept;
        match walk {
            Dropped::None => {}
            Dropped::One(k) => drop(previous.remove(k)),
            Dropped::More => {
                let jobs = &self.jobs;
                previous.retain(|entry| entry.combo.jobs().iter().any(|id| jobs.contains_key(id)));
            }
        }
        // The shuffle `choose` would draw.
        if !self.config.objective.heterogeneity_aware() {
            let types = self.types.as_ref().expect("types initialized");
            self.order_scratch.clear();
            self.order_scratch.extend_from_slice(&types.order);
            self.shuffler.shuffle(&mut self.order_scratch);
        }
        // `record_round` on the kept entries.
        let round_s = self.config.round.as_secs_f64();
        let now_s = clock_s;
        let mut end_s = now_s;
        self.verdict_stamp += 1;
        let stamp = self.verdict_stamp;
        for entry in &mut previous {
            let Some(id) = entry.combo.as_single() else { unreachable!("steady rounds run singles") };
            let real = view.job(id).work_done(now);
            let tracked = self.jobs.get_mut(&id).expect("chosen jobs are tracked");
            let rate = tracked.rates[entry.gpu_type];
            let (target, finish_s) = credit_round(tracked, real, rate, round_s, now_s, stamp);
            let finish_s = now_s.max(finish_s);
            entry.finish_s = finish_s;
            entry.targets = [Some((id, target)), None];
            end_s = end_s.max(finish_s);
        }
        // Every job of the last round runs again or left: only those admitted since.
        self.name_not_this_round(view, stamp, &[], decision);
        self.open_round(now, now_s, end_s, previous);
        #[cfg(test)]
        {
            IN_PLACE_ROUNDS.with(|n| n.set(n.get() + 1));
            let (round, jobs, stats, stamp, shuffler, plain_decision) = plain;
            let bits = |r: &Round| {
                let entries: Vec<_> = r
                    .entries
                    .iter()
                    .map(|e| {
                        let targets = e.targets.map(|t| t.map(|(id, x)| (id, x.to_bits())));
                        (e.combo, e.gpu_type, e.gpus.clone(), e.finish_s.to_bits(), targets)
                    })
                    .collect();
                (r.charged_from_s.to_bits(), r.end_s.to_bits(), r.end, entries)
            };
            let fused = self.round.as_ref().expect("a round");
            assert_eq!(bits(fused), bits(&round), "the round in place = the plain steady round");
            assert_eq!(format!("{:?}", self.jobs), jobs, "jobs credited as by record_round");
            assert_eq!(self.stats, stats, "leases counted as by count_kept_leases");
            assert_eq!(self.verdict_stamp, stamp);
            assert_eq!(format!("{:?}", self.shuffler), shuffler, "the same shuffle draws");
            assert_eq!(format!("{decision:?}"), plain_decision, "the same verdicts");
        }
        Ok(())
    }

    /// What a later round may repeat of a full round that chose `chosen` (see
    /// [`Steady`]): only a FIFO pass that took every positive combination
    /// (`took_all`) on its first try, all single jobs (a ghost among them is
    /// placed on no GPUs, by `place_kept` as by `place`).
    fn steady_after(
        &self,
        view: &ClusterView<'_>,
        took_all: bool,
        chosen: &[(Combo, usize)],
    ) -> Option<Steady> {
        let singles = chosen.iter().all(|&(c, _)| !c.is_pair());
        if !took_all || !singles || chosen.is_empty() {
            return None;
        }
        let mut jobs = chosen.to_vec();
        jobs.sort_unstable_by_key(|&(c, _)| c);
        // A pass takes each combination once (with a repeat `place_kept`
        // would refuse every steady round anyway): ascending strictly, which
        // `kept_entries` relies on.
        if jobs.windows(2).any(|w| w[0].0 >= w[1].0) {
            return None;
        }
        Some(Steady { chosen: jobs, up: up_gpus_by_type(view, self.worker_time_s.len()) })
    }

    /// A round that repeats the last full one: no reset is due, the same GPUs
    /// are up, and exactly the jobs it chose that are still active run, each
    /// alone on the GPUs of the type it was chosen for. Then ranking and the
    /// greedy pass would choose them again (their priority stays positive, and
    /// no other combination's becomes positive: new jobs have no allocation
    /// until the next reset), and placement keeps each on its GPUs (no stop, no
    /// start), in job order. Draws the GPU-type shuffle the pass would draw.
    /// `None`: run the full round.
    fn steady_round(
        &mut self,
        view: &ClusterView<'_>,
        clock_s: f64,
        previous: &Previous<'_>,
    ) -> Option<(Vec<Placed>, u64)> {
        if self.reset_due(clock_s) {
            return None;
        }
        up_gpus_into(view, self.worker_time_s.len(), &mut self.up_scratch);
        let jobs = &self.jobs;
        let steady = self.steady.as_mut()?;
        // The jobs still tracked, and among them the ghosts, in one lookup each.
        let mut ghosts = 0;
        steady.chosen.retain(|(combo, _)| match jobs.get(&combo.jobs()[0]) {
            Some(job) => {
                ghosts += usize::from(job.ghost);
                true
            }
            None => false,
        });
        #[cfg(test)]
        assert_eq!(
            ghosts,
            steady
                .chosen
                .iter()
                .filter(|&&(combo, _)| jobs.get(&combo.jobs()[0]).is_some_and(|j| j.ghost))
                .count(),
            "ghosts counted in the retain = a count of its own"
        );
        if steady.chosen.is_empty() || self.up_scratch != steady.up {
            return None;
        }
        // `place` lists ghosts in the order the pass chose them, which follows
        // this round's priorities, not `chosen`'s job order: with one ghost
        // there is no order to get wrong; with more, run the full round.
        if ghosts > 1 {
            return None;
        }
        let chosen = std::mem::take(&mut steady.chosen);
        let placed = self.place_kept(view, &chosen, previous);
        if let Some(steady) = self.steady.as_mut() {
            steady.chosen = chosen;
        }
        let (placed, extended) = placed?;
        #[cfg(test)]
        let shuffler_before = self.shuffler.clone();
        if !self.config.objective.heterogeneity_aware() {
            let types = self.types.as_ref().expect("types initialized");
            self.order_scratch.clear();
            self.order_scratch.extend_from_slice(&types.order);
            self.shuffler.shuffle(&mut self.order_scratch);
        }
        #[cfg(test)]
        {
            STEADY_ROUNDS.with(|n| n.set(n.get() + 1));
            // The full pass from the same state chooses and places the same.
            let after = std::mem::replace(&mut self.shuffler, shuffler_before);
            let ranking = self.rank_plain();
            let chosen = self.choose(&ranking, view, false);
            assert!(
                chosen.iter().any(|&(c, _)| self.allocated(c)),
                "{chosen:?} {placed:?} {:?} {:?} {:?}",
                ranking,
                self.allocation,
                self.jobs.keys().collect::<Vec<_>>()
            );
            let mut decision = Decision::recycled();
            let plain = self.place(view, &chosen, &Previous::new(&[]), &mut decision);
            assert_eq!(plain, placed, "a steady round places as the full pass");
            assert!(decision.actions.is_empty() && decision.waiting.is_empty(), "{decision:?}");
            assert_eq!(format!("{:?}", self.shuffler), format!("{after:?}"), "the same shuffle draws");
        }
        Some((placed, extended))
    }

    /// [`Gavel::place`] when it keeps every running job where it is and starts
    /// nothing: every chosen combination is a single job that runs now, alone
    /// (no running partner), on GPUs of the type it was chosen for, or a ghost,
    /// and no other job runs. Then each claims its own holding (lease
    /// extension), nothing is preempted or placed anew, and the result is the
    /// running jobs in combination order on the GPUs they hold, then the ghosts
    /// with an allocation, on no GPUs, in the order chosen (as `place` lists
    /// them). With the placement, its lease extensions: the combinations
    /// placed on the same list as last round (see [`Gavel::count_kept_leases`]).
    /// `None`: run `place`.
    fn place_kept(
        &mut self,
        view: &ClusterView<'_>,
        chosen: &[(Combo, usize)],
        previous: &Previous<'_>,
    ) -> Option<(Vec<Placed>, u64)> {
        if chosen.is_empty() {
            return None;
        }
        let mut placed = Vec::with_capacity(chosen.len());
        let mut ghosts = false;
        let mut cursor = 0;
        let mut extended = 0u64;
        for &(combo, t) in chosen {
            let id = combo.as_single()?;
            // `is_ghost` with the one lookup.
            if self.jobs.get(&id).is_some_and(|j| j.ghost) {
                // Its engine job is over: it runs nowhere (see `place`).
                ghosts = true;
                continue;
            }
            let job = view.job(id);
            let alone = job.partner.is_none_or(|p| !view.job(p).is_running());
            let on_type = job.gpus.first().is_some_and(|&g| view.cluster.gpu_type_of(g).index() == t);
            if !alone || !on_type || !job.is_running() {
                return None;
            }
            let (gpus, kept) = previous.gpus_from(&mut cursor, combo, &job.gpus[..]);
            #[cfg(test)]
            {
                let plain = previous.gpus(combo, &job.gpus[..]);
                assert_eq!(gpus, plain, "the cursor's list = the lookup's");
                assert_eq!(Arc::ptr_eq(&gpus, &plain), previous.find(combo).is_some_and(|e| e.gpus == plain));
                assert_eq!(
                    kept,
                    previous.find(combo).is_some_and(|e| e.gpus[..] == job.gpus[..]),
                    "kept list"
                );
            }
            extended += u64::from(kept);
            placed.push(Placed { combo, gpu_type: t, gpus });
        }
        // Distinct running jobs, as many as run: exactly the running set.
        if placed.len() != view.running.len() {
            return None;
        }
        placed.sort_unstable_by_key(|p| p.combo);
        if placed.windows(2).any(|w| w[0].combo == w[1].combo) {
            return None;
        }
        if ghosts {
            for &(combo, t) in chosen {
                if self.is_ghost(combo) && self.allocated(combo) {
                    // On no GPUs again after a round on none: the same (empty) GPUs.
                    extended += u64::from(previous.find(combo).is_some_and(|e| e.gpus.is_empty()));
                    placed.push(Placed { combo, gpu_type: t, gpus: Arc::from([]) });
                }
            }
        }
        #[cfg(test)]
        {
            KEPT_PLACEMENTS.with(|n| n.set(n.get() + 1));
            let mut decision = Decision::recycled();
            let plain = self.place(view, chosen, &Previous::new(&[]), &mut decision);
            assert_eq!(plain, placed, "kept placement = the full placement");
            assert!(decision.actions.is_empty() && decision.waiting.is_empty(), "{decision:?}");
        }
        Some((placed, extended))
    }

    /// Where each chosen combination runs: on GPUs one of its jobs holds on
    /// that type if it can (lease extension), else on free GPUs. Pushes the
    /// preemptions and starts; returns kept combinations first, then new ones.
    fn place(
        &mut self,
        view: &ClusterView<'_>,
        chosen: &[(Combo, usize)],
        previous: &Previous<'_>,
        decision: &mut Decision,
    ) -> Vec<Placed> {
        // The buffers, kept from call to call.
        let PlaceScratch { mut slot, mut claimed, mut reused, mut was_reused, mut to_place } =
            std::mem::take(&mut self.place_scratch);
        let holdings = holdings(view);
        // Job -> holding + 1 in a table by job id (of a job listed twice, the
        // later holding wins, as it did in the map this replaces); emptied again below.
        for (h, held) in holdings.iter().enumerate() {
            for &j in held.jobs.iter() {
                if slot.len() <= j.index() {
                    slot.resize(j.index() + 1, 0);
                }
                slot[j.index()] = h + 1;
            }
        }
        let holding_of =
            |id: JobId| -> Option<usize> { slot.get(id.index()).and_then(|&h| h.checked_sub(1)) };
        #[cfg(test)]
        {
            // The map it replaces: collected in holding order, the last of a job's entries kept.
            let map: BTreeMap<JobId, usize> = holdings
                .iter()
                .enumerate()
                .flat_map(|(h, held)| held.jobs.iter().map(move |&j| (j, h)))
                .collect();
            let asked = view.running.iter().copied().chain(chosen.iter().flat_map(|(c, _)| c.jobs()));
            for id in asked {
                assert_eq!(holding_of(id), map.get(&id).copied(), "holding of {id}");
            }
        }
        // Reuse, in priority order: the holding of exactly this pair, else of a member.
        claimed.clear();
        claimed.resize(holdings.len(), None);
        reused.clear();
        // Whether `chosen[i]` reuses a holding (each combination is chosen at most once).
        was_reused.clear();
        was_reused.resize(chosen.len(), false);
        for (i, &(combo, t)) in chosen.iter().enumerate() {
            let members = combo.jobs();
            let mut candidates = members
                .iter()
                .filter_map(|&j| holding_of(j))
                .filter(|&h| holdings[h].gpu_type == t && claimed[h].is_none());
            let (first, second) = (candidates.next(), candidates.next());
            let exact = [first, second].into_iter().flatten().find(|&h| holdings[h].jobs[..] == members[..]);
            if let Some(h) = exact.or(first) {
                claimed[h] = Some(combo);
                reused.push((combo, h));
                was_reused[i] = true;
            }
        }
        // In combination order (each is chosen at most once), as the map kept them.
        reused.sort_unstable_by_key(|&(c, _)| c);
        #[cfg(test)]
        for (&(combo, _), &was) in chosen.iter().zip(&was_reused) {
            let is_reused = reused.binary_search_by_key(&combo, |&(r, _)| r).is_ok();
            assert_eq!(was, is_reused, "a chosen combination reused = found among the reused");
        }
        // Jobs that stay where they run: members of the combination that claimed their holding.
        let stays = |id: JobId| holding_of(id).is_some_and(|h| claimed[h].is_some_and(|c| c.contains(id)));
        let mut free = FreeMap::new(view.cluster);
        for (h, held) in holdings.iter().enumerate() {
            if claimed[h].is_none() {
                free.give_back(held.gpus);
            }
        }
        for &id in view.running {
            if !stays(id) {
                decision.actions.push(Action::Preempt { job: id });
            }
        }
        // At most one per chosen combination: sized once, no regrowth.
        let mut placed: Vec<Placed> = Vec::with_capacity(chosen.len());
        for &(combo, h) in &reused {
            let held = &holdings[h];
            let anchor =
                combo.jobs().into_iter().find(|&j| held.jobs.contains(&j)).expect("claimed by a member");
            for id in combo.jobs() {
                if id != anchor && !held.jobs.contains(&id) {
                    decision.actions.push(Action::StartShared { job: id, partner: anchor });
                }
            }
            placed.push(Placed { combo, gpu_type: held.gpu_type, gpus: previous.gpus(combo, held.gpus) });
        }
        // A ghost runs its last credited steps on no GPUs: its engine job is done.
        for &(combo, t) in chosen {
            if self.is_ghost(combo) && self.allocated(combo) {
                placed.push(Placed { combo, gpu_type: t, gpus: Arc::from([]) });
            }
        }
        // Larger combinations first, for locality (Gavel sorts by scale factor, descending).
        to_place.clear();
        to_place.extend(
            chosen
                .iter()
                .zip(&was_reused)
                .filter(|&(&(c, _), &reused)| !reused && !self.is_ghost(c) && self.allocated(c))
                .map(|(&chosen, _)| chosen),
        );
        to_place.sort_by_key(|&(c, _)| std::cmp::Reverse(self.scale_factor(c)));
        for &(combo, t) in &to_place {
            let of_type = |node: cotenant_core::NodeId| view.cluster.node(node).gpu_type.index() == t;
            match free.place(self.scale_factor(combo), self.config.placement, of_type) {
                Ok(gpus) => {
                    let members = combo.jobs();
                    let list: GpuList = Arc::from(&gpus[..]);
                    decision.actions.push(Action::Start { job: members[0], gpus });
                    for &id in &members[1..] {
                        decision.actions.push(Action::StartShared { job: id, partner: members[0] });
                    }
                    placed.push(Placed { combo, gpu_type: t, gpus: list });
                }
                Err(reason) => {
                    for id in combo.jobs() {
                        decision.waiting.push((id, reason));
                    }
                }
            }
        }
        for held in &holdings {
            for &j in held.jobs.iter() {
                slot[j.index()] = 0;
            }
        }
        debug_assert!(slot.iter().all(|&h| h == 0), "the table is empty between calls");
        self.place_scratch = PlaceScratch { slot, claimed, reused, was_reused, to_place };
        placed
    }

    /// [`Gavel::count_leases`] after a kept placement, which counted the
    /// extensions as it placed (`extended`, each combination at most once: a
    /// round places it once, and the last round listed it once): only the
    /// opportunities are counted here, with no lookup of `placed`.
    fn count_kept_leases(&mut self, previous: &[RoundEntry], placed: &[Placed], extended: u64) {
        #[cfg(test)]
        let before = self.stats;
        let jobs = &self.jobs;
        let opportunities =
            previous.iter().filter(|entry| entry.combo.jobs().iter().any(|id| jobs.contains_key(id))).count();
        self.stats.lease_opportunities += opportunities as u64;
        self.stats.lease_extensions += extended;
        #[cfg(test)]
        {
            let fused = std::mem::replace(&mut self.stats, before);
            self.count_leases(previous, placed);
            assert_eq!(self.stats, fused, "leases counted while placing = count_leases");
        }
        #[cfg(not(test))]
        let _ = placed;
    }

    /// Gavel's lease counters: a combination of the last round with a job still
    /// active had an opportunity; it was extended if it runs on the same GPUs.
    fn count_leases(&mut self, previous: &[RoundEntry], placed: &[Placed]) {
        let placed_by_combo = ByCombo::new(placed);
        for entry in previous {
            if entry.combo.jobs().iter().any(|id| self.jobs.contains_key(id)) {
                self.stats.lease_opportunities += 1;
                let found = placed_by_combo.find(entry.combo);
                // The same list (a kept job's) is the same GPUs without comparing them.
                let same = found.is_some_and(|p| Arc::ptr_eq(&p.gpus, &entry.gpus) || p.gpus == entry.gpus);
                #[cfg(test)]
                assert_eq!(same, placed.iter().any(|p| p.combo == entry.combo && p.gpus == entry.gpus));
                if same {
                    self.stats.lease_extensions += 1;
                }
            }
        }
    }

    /// Steps this round and when the round ends; verdicts for jobs left out.
    fn record_round(
        &mut self,
        view: &ClusterView<'_>,
        now: Time,
        now_s: f64,
        placed: Vec<Placed>,
        previous: &[RoundEntry],
        decision: &mut Decision,
    ) {
        let round_s = self.config.round.as_secs_f64();
        let mut entries = std::mem::take(&mut self.spare_entries);
        entries.reserve(placed.len());
        let mut end_s = now_s;
        // Jobs that run or already have a verdict this round are stamped (those
        // that run here, with the lookup that credits them), then one walk over
        // the tracked jobs names the others (no list to collect and sort).
        self.verdict_stamp += 1;
        let stamp = self.verdict_stamp;
        for Placed { combo, gpu_type, gpus } in placed {
            let mut finish_s = now_s;
            let mut targets = [None; 2];
            // A pair's co-located rates; a single's is read from its own tracked job below.
            let pair = match combo.kind() {
                Kind::Pair(..) => Some(self.combo_rates(combo, gpu_type)),
                Kind::Single(_) => None,
            };
            for (k, id) in combo.jobs().into_iter().enumerate() {
                let real = view.job(id).work_done(now);
                let tracked = self.jobs.get_mut(&id).expect("chosen jobs are tracked");
                let rate = pair.map_or(tracked.rates[gpu_type], |rates| rates[k]);
                let (target, job_finish_s) = credit_round(tracked, real, rate, round_s, now_s, stamp);
                finish_s = finish_s.max(job_finish_s);
                targets[k] = Some((id, target));
            }
            end_s = end_s.max(finish_s);
            if combo.is_pair() {
                self.stats.pairs_run += 1;
            }
            entries.push(RoundEntry { combo, gpu_type, gpus, finish_s, targets, row_hint: usize::MAX });
        }
        for (id, _) in &decision.waiting {
            if let Some(tracked) = self.jobs.get_mut(id) {
                tracked.stamp = stamp;
            }
        }
        #[cfg(test)]
        let plain: Vec<JobId> = {
            let mut has: Vec<JobId> = entries.iter().flat_map(|e| e.combo.jobs()).collect();
            has.extend(decision.waiting.iter().map(|(id, _)| *id));
            self.jobs.iter().filter(|(id, t)| !t.ghost && !has.contains(id)).map(|(&id, _)| id).collect()
        };
        #[cfg(test)]
        let listed = decision.waiting.len();
        self.name_not_this_round(view, stamp, previous, decision);
        #[cfg(test)]
        {
            let plain: Vec<JobId> =
                plain.into_iter().filter(|&id| !already_not_this_round(view, id)).collect();
            let named: Vec<JobId> = decision.waiting[listed..].iter().map(|&(id, _)| id).collect();
            assert_eq!(named, plain, "stamped verdicts = the sorted list's");
        }
        if !entries.is_empty() {
            self.open_round(now, now_s, end_s, entries);
        }
    }

    /// Names `NotThisRound` for every tracked job that is no ghost, neither
    /// runs this round nor already has a verdict in it (`stamp`), and does not
    /// carry it in the engine already; then records whether the round's
    /// verdicts are all `NotThisRound` (`settled`). When the last round's were
    /// (`settled`), only the jobs admitted since and the jobs of `previous`
    /// (the last round's entries) that are not stamped can lack it: those, in
    /// id order, instead of a walk over every tracked job.
    fn name_not_this_round(
        &mut self,
        view: &ClusterView<'_>,
        stamp: u64,
        previous: &[RoundEntry],
        decision: &mut Decision,
    ) {
        if self.settled {
            // Most of the last round's jobs run again, stamped: only the others are sorted.
            let mut names = std::mem::take(&mut self.admitted_since);
            for entry in previous {
                for id in entry.combo.jobs() {
                    if self.jobs.get(&id).is_some_and(|t| t.stamp != stamp) {
                        names.push(id);
                    }
                }
            }
            names.sort_unstable();
            names.dedup();
            for &id in &names {
                if self.jobs.get(&id).is_some_and(|t| !t.ghost && t.stamp != stamp)
                    && !already_not_this_round(view, id)
                {
                    decision.waiting.push((id, WaitReason::NotThisRound));
                }
            }
            names.clear();
            self.admitted_since = names;
        } else {
            for (&id, tracked) in self.jobs.iter() {
                if !tracked.ghost && tracked.stamp != stamp && !already_not_this_round(view, id) {
                    decision.waiting.push((id, WaitReason::NotThisRound));
                }
            }
            self.admitted_since.clear();
        }
        self.settled = decision.waiting.iter().all(|&(_, reason)| reason == WaitReason::NotThisRound);
    }

    /// Starts the round of `entries`, planned to end at `end_s` on Gavel's clock.
    fn open_round(&mut self, now: Time, now_s: f64, end_s: f64, entries: Vec<RoundEntry>) {
        // The engine started the jobs at `now`, whatever Gavel's clock says.
        let span = Span(((end_s - now_s) * MICROS_PER_SECOND as f64).ceil().max(0.0) as u64);
        let end = now + span + ROUND_SLACK;
        // Gavel charges a round's time from the end of the round before
        // (0 before the first), also when the cluster idled in between.
        let charged_from_s = self.last_end_s;
        self.round = Some(Round { charged_from_s, end_s, end, entries });
        self.stats.rounds += 1;
    }
}

/// One job's part of a round, as Gavel accounts it: from its work done as
/// planned (`Gavel::plan_done`: the engine's, at most what was credited), the
/// round credits `floor(rate * round)` steps or what is left, and the job is
/// stamped as running this round. Returns its target (work done at the
/// round's end) and when it runs its last step on Gavel's clock.
fn credit_round(
    tracked: &mut Tracked,
    real: f64,
    rate: f64,
    round_s: f64,
    now_s: f64,
    stamp: u64,
) -> (f64, f64) {
    tracked.stamp = stamp;
    let done = real.min(tracked.credited);
    let left = (tracked.work - done).max(0.0);
    let steps = floor_positive(rate * round_s).min(left);
    tracked.credited = if steps >= left { tracked.work } else { done + steps };
    (done + steps, now_s + steps / rate)
}

/// The entries of the last round that a steady round in place drops
/// ([`kept_entries`]): those of jobs that left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dropped {
    None,
    /// One, at this position.
    One(usize),
    More,
}

/// Whether `previous` (the last round's entries) is, less entries whose jobs
/// all left, exactly `chosen` (a steady round's single jobs, ascending) in
/// order, each running alone on its entry's GPUs (not none), of the type it
/// was chosen for: then [`Gavel::place_kept`] keeps them all, as they are.
/// With the entries dropped. The type of an entry's GPUs is its `gpu_type`
/// (every placement records the type of the GPUs it lists), so the job's
/// GPUs are of type `t` when they are the entry's and the entry's type is `t`.
fn kept_entries(
    jobs: &JobTable<Tracked>,
    view: &ClusterView<'_>,
    chosen: &[(Combo, usize)],
    previous: &[RoundEntry],
) -> Option<Dropped> {
    let mut next = 0;
    let mut dropped = Dropped::None;
    for (k, entry) in previous.iter().enumerate() {
        match chosen.get(next) {
            Some(&(combo, t)) if combo == entry.combo => {
                let id = combo.as_single()?;
                // `chosen` ascends strictly (see `steady_after`).
                #[cfg(test)]
                assert!(next == 0 || chosen[next - 1].0 < combo, "a steady set ascends strictly");
                if entry.gpu_type != t {
                    return None;
                }
                let job = view.job(id);
                let alone = job.partner.is_none_or(|p| !view.job(p).is_running());
                if !alone || !job.is_running() || job.gpus.is_empty() || entry.gpus[..] != job.gpus[..] {
                    return None;
                }
                #[cfg(test)]
                assert_eq!(
                    view.cluster.gpu_type_of(job.gpus[0]).index(),
                    t,
                    "an entry's GPUs are of its type"
                );
                next += 1;
            }
            _ => {
                if entry.combo.jobs().iter().any(|id| jobs.contains_key(id)) {
                    return None;
                }
                dropped = match dropped {
                    Dropped::None => Dropped::One(k),
                    _ => Dropped::More,
                };
            }
        }
    }
    (next == chosen.len()).then_some(dropped)
}

/// An integer that orders as `x` does under `f64::total_cmp`, reversed: the
/// bits as `total_cmp` transforms them (a negative number's magnitude bits
/// flipped), then complemented (`!a < !b` exactly when `a > b`).
#[inline]
fn descending_total(x: f64) -> i64 {
    let bits = x.to_bits() as i64;
    !(bits ^ (((bits >> 63) as u64) >> 1) as i64)
}

/// `x.floor()`, bit for bit, without a call to the floor routine (the
/// baseline target has no rounding instruction) where `x` is positive and
/// below 2^52: truncation toward zero is the floor there, and exact. Through
/// `i64` (in range there): one instruction each way, where the `u64`
/// conversions take about twenty each on the baseline target.
#[inline]
fn floor_positive(x: f64) -> f64 {
    if x > 0.0 && x < 4_503_599_627_370_496.0 {
        (x as i64) as f64
    } else {
        x.floor()
    }
}

/// Whether the engine already holds `NotThisRound` as `id`'s verdict: then
/// naming it again changes nothing (the engine stores the last verdict a
/// decision names, and clears it when the job starts), and a round names only
/// the jobs whose verdict changes instead of every waiting job.
fn already_not_this_round(view: &ClusterView<'_>, id: JobId) -> bool {
    view.job(id).verdict == Some(WaitReason::NotThisRound)
}

/// The GPU sets running jobs hold now: one per job alone, one per pair.
fn holdings<'a>(view: &ClusterView<'a>) -> Vec<Holding<'a>> {
    // At most one per running job: sized once, no regrowth.
    let mut out = Vec::with_capacity(view.running.len());
    for job in view.running_jobs() {
        let partner = job.partner.filter(|&p| view.job(p).is_running());
        if partner.is_some_and(|p| p < job.id()) {
            continue;
        }
        let Some(&first) = job.gpus.first() else { continue };
        let jobs = match partner {
            Some(p) => Members { ids: [job.id(), p], len: 2 },
            None => Members { ids: [job.id(), job.id()], len: 1 },
        };
        out.push(Holding { gpu_type: view.cluster.gpu_type_of(first).index(), gpus: &job.gpus, jobs });
    }
    out
}

/// GPUs on up nodes, per cluster GPU type (`types` of them), in one pass over the nodes.
fn up_gpus_by_type(view: &ClusterView<'_>, types: usize) -> Vec<u32> {
    let mut up = Vec::new();
    up_gpus_into(view, types, &mut up);
    up
}

/// [`up_gpus_by_type`] into `up` (its buffer reused: a steady round asks every round).
fn up_gpus_into(view: &ClusterView<'_>, types: usize, up: &mut Vec<u32>) {
    up.clear();
    up.resize(types, 0);
    for n in 0..view.cluster.node_count() {
        let node = cotenant_core::NodeId(n as u32);
        if view.cluster.is_up(node) {
            let spec = view.cluster.node(node);
            if let Some(count) = up.get_mut(spec.gpu_type.index()) {
                *count += spec.gpus;
            }
        }
    }
}

/// The plain per-type scan `up_gpus_by_type` replaces (checked against it in tests).
#[cfg(test)]
fn up_gpus_of_type(view: &ClusterView<'_>, t: usize) -> u32 {
    (0..view.cluster.node_count())
        .map(|n| cotenant_core::NodeId(n as u32))
        .filter(|&n| view.cluster.is_up(n) && view.cluster.node(n).gpu_type.index() == t)
        .map(|n| view.cluster.node(n).gpus)
        .sum()
}

impl Policy for Gavel {
    fn name(&self) -> &'static str {
        self.config.name
    }

    fn schedule(&mut self, _cx: &mut PolicyCx<'_>, view: &ClusterView<'_>) -> Decision {
        self.init_types(view);
        for change in view.changes {
            match *change {
                JobChange::Submitted(id) => {
                    if self.arrived.last().is_none_or(|&last| last < id) {
                        self.arrived.push(id);
                    } else if let Err(at) = self.arrived.binary_search(&id) {
                        self.arrived.insert(at, id);
                    }
                }
                JobChange::Completed(id) => match self.jobs.get_mut(&id) {
                    // Done before Gavel's accounting: a ghost until a round
                    // credits its last steps (`end_round` forgets it then).
                    // A steady round keeps it: its priority stays what it was
                    // (a ghost changes only pairs', and a steady round has
                    // none), and `place_kept` places it on no GPUs as `place` does.
                    Some(tracked) if tracked.credited < tracked.work => {
                        self.ghosts += usize::from(!tracked.ghost);
                        tracked.ghost = true;
                    }
                    _ => self.forget(id),
                },
                JobChange::Ended(id) => self.forget(id),
                JobChange::Started(_) | JobChange::Stopped(_) | JobChange::Resized(_) => {}
            }
        }
        self.extend_round(view);
        if let Some(round) = &self.round {
            if view.now < round.end {
                let mut decision = Decision::recycled();
                for &id in &self.arrived {
                    if !already_not_this_round(view, id) {
                        decision.waiting.push((id, WaitReason::NotThisRound));
                    }
                }
                return decision;
            }
        }
        self.end_round();
        self.start_round(view, view.now)
    }

    fn next_round(&self, _now: Time) -> Option<Time> {
        self.round.as_ref().map(|r| r.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cotenant_core::{Cluster, ClusterSpec, Command, Engine, Input, JobSpec, TenantSpec};
    use cotenant_perf::throughput::PairRates;
    use proptest::prelude::*;

    fn table() -> Arc<ThroughputTable> {
        let mut t = ThroughputTable::new();
        for (model, v100, k80) in [("fast", 10.0, 1.0), ("even", 2.0, 1.5)] {
            t.set_consolidated(&JobTypeKey::new(model, 1), "v100", v100);
            t.set_consolidated(&JobTypeKey::new(model, 1), "k80", k80);
        }
        Arc::new(t)
    }

    fn engine(objective: Objective) -> Engine {
        let mut spec = ClusterSpec { gpu_types: vec!["v100".into(), "k80".into()], ..Default::default() };
        spec.add_nodes(GpuTypeId(0), 1, 1, 8, 64);
        spec.add_nodes(GpuTypeId(1), 1, 1, 8, 64);
        let config = GavelConfig {
            name: "test",
            objective,
            round: DEFAULT_ROUND,
            reset_interval: DEFAULT_RESET_INTERVAL,
            seed: 0,
            placement: Placement::Consolidated,
            max_pairs: MAX_PAIR_CANDIDATES,
        };
        let policy = Gavel::new(config, table(), vec!["fast".into(), "even".into()]);
        Engine::new(Cluster::new(spec).unwrap(), vec![TenantSpec::new("t")], Box::new(policy), 0)
    }

    fn job(id: u32, job_type: u32, steps: f64) -> JobSpec {
        let mut j = JobSpec::new(id, 0, Time::ZERO, 1, steps);
        j.job_type = Some(job_type);
        j
    }

    fn starts(commands: &[Command]) -> Vec<(u32, u32)> {
        commands
            .iter()
            .filter_map(|c| match c {
                Command::Start { job, gpus } => Some((job.0, gpus[0].0)),
                _ => None,
            })
            .collect()
    }

    /// A job that restarts pays the world's restore time (here 30 s, reported the
    /// way the simulator reports it: progress `-rate * 30` at its start). The round
    /// planned for its 3,600 steps at 10 steps/s would end at 360 s; then it has
    /// done 3,300, so the round lasts until 390 s instead of ending and handing its
    /// GPU to the third job (which, with restores on every switch, livelocked).
    #[test]
    fn a_round_lasts_until_a_restoring_job_has_run_its_steps() {
        let mut e = engine(Objective::MaxMinFairness { perf: true });
        let batch = Input::Batch((0..3).map(|i| Input::JobSubmitted(job(i, 0, 100_000.0).into())).collect());
        let first = e.step(Time::ZERO, batch);
        let on_v100 = starts(&first).iter().find(|(_, gpu)| *gpu == 0).map(|(job, _)| JobId(*job)).unwrap();
        e.step(Time::ZERO, Input::Progress { job: on_v100, work_done: -300.0, rate: 10.0 });
        let planned = e.next_wakeup().expect("round end");
        assert_eq!(planned, Time::from_secs(360) + ROUND_SLACK);
        let at_planned_end = e.step(planned, Input::Wakeup);
        assert!(at_planned_end.is_empty(), "the round must go on: {at_planned_end:?}");
        assert_eq!(e.next_wakeup(), Some(Time::from_secs(390) + ROUND_SLACK));
        let at_real_end = e.step(Time::from_secs(390) + ROUND_SLACK, Input::Wakeup);
        assert!(!at_real_end.is_empty(), "the next round switches jobs");
    }

    #[test]
    fn rounds_place_jobs_by_allocation_and_extend_leases() {
        let mut e = engine(Objective::MaxMinFairness { perf: true });
        let batch = Input::Batch(vec![
            Input::JobSubmitted(job(0, 0, 100_000.0).into()),
            Input::JobSubmitted(job(1, 1, 100_000.0).into()),
            Input::JobSubmitted(job(2, 1, 100_000.0).into()),
        ]);
        let first = e.step(Time::ZERO, batch);
        // The fast job gains most on the V100 (GPU 0); one "even" job takes the K80.
        assert_eq!(starts(&first), vec![(0, 0), (1, 1)]);
        let end = e.next_wakeup().expect("round end");
        // The round ends when the last job's floor(rate * 360) steps are done.
        assert!(end <= Time::from_secs(360) + ROUND_SLACK && end > Time::from_secs(359), "{end}");
        let second = e.step(end, Input::Wakeup);
        assert!(e.violations().is_empty(), "{:?}", e.violations());
        // Job 2, which has had no time yet, runs; both GPUs stay busy; a job
        // that stays on its GPU is not stopped and restarted.
        assert!(e.running().contains(&JobId(2)));
        assert_eq!(e.cluster().free_gpus(), 0);
        for (job, gpu) in starts(&second) {
            assert!(
                !starts(&first).contains(&(job, gpu))
                    || second.iter().any(|c| matches!(c, Command::Stop { job: j, .. } if j.0 == job))
            );
        }
        let third = e.step(e.next_wakeup().unwrap(), Input::Wakeup);
        let kept: Vec<&JobId> = e
            .running()
            .iter()
            .filter(|j| !third.iter().any(|c| matches!(c, Command::Start { job, .. } if job == *j)))
            .collect();
        assert!(!kept.is_empty() || starts(&third).len() == 2);
    }

    fn packed_table() -> Arc<ThroughputTable> {
        let mut t = (*table()).clone();
        let (fast, even) = (JobTypeKey::new("fast", 1), JobTypeKey::new("even", 1));
        for (a, b, own, other) in
            [(&fast, &even, 7.0, 1.2), (&even, &fast, 1.2, 7.0), (&even, &even, 1.1, 1.1)]
        {
            for (gpu, scale) in [("v100", 1.0), ("k80", 0.5)] {
                let rates = PairRates { own_steps_per_s: own * scale, other_steps_per_s: other * scale };
                t.set_colocated(a, b, gpu, rates);
            }
        }
        Arc::new(t)
    }

    fn objectives() -> [Objective; 6] {
        [
            Objective::Fifo { perf: true },
            Objective::Fifo { perf: false },
            Objective::MaxMinFairness { perf: true },
            Objective::FinishTimeFairness { perf: true },
            Objective::Packed(super::super::PackedObjective::MaxMinFairness),
            Objective::Packed(super::super::PackedObjective::Fifo),
        ]
    }

    fn combo_of(kind: bool, a: u32, b: u32) -> Combo {
        if kind && a != b {
            Combo::pair(JobId(a), JobId(b))
        } else {
            Combo::single(JobId(a))
        }
    }

    proptest! {
        /// `floor_positive` is `floor` bit for bit: around integers, tiny and
        /// huge values, negatives, zeros, infinities and NaN. (Checked to
        /// catch a seeded bug: rounding instead of truncating.)
        #[test]
        fn floor_positive_is_floor(bits in any::<u64>(), whole in 0u64..1 << 54, nudge in -2i32..3) {
            let near = f64::from_bits((whole as f64).to_bits().wrapping_add_signed(i64::from(nudge)));
            let specials = [0.0, -0.0, 0.5, -0.5, 1.0 - f64::EPSILON, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, f64::MIN_POSITIVE, 4_503_599_627_370_495.5];
            for x in specials.into_iter().chain([f64::from_bits(bits), near, -near]) {
                prop_assert_eq!(floor_positive(x).to_bits(), x.floor().to_bits(), "{}", x);
            }
        }

        /// `descending_total` orders as `total_cmp` reversed, for any bits
        /// (both signs, zeros, subnormals, infinities, NaNs) and for near
        /// neighbours. (Checked to catch a seeded bug: the mask taking the
        /// sign bit too, so that negative numbers changed sign.)
        #[test]
        fn descending_total_is_total_cmp_reversed(a in any::<u64>(), b in any::<u64>(), step in -2i64..3) {
            let near = a.wrapping_add_signed(step);
            let specials = [0.0, -0.0, 1.0, -1.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, -f64::NAN, f64::MIN_POSITIVE, -5e-324];
            let values: Vec<f64> = specials.into_iter().chain([a, b, near].map(f64::from_bits)).collect();
            for &x in &values {
                for &y in &values {
                    prop_assert_eq!(descending_total(x).cmp(&descending_total(y)), y.total_cmp(&x), "{} {}", x, y);
                }
            }
        }

        /// A combination unpacks to the jobs it was made of, and orders (and
        /// equals) exactly as Gavel's tuple key, ids up to `u32::MAX`
        /// included. (Checked to catch seeded bugs: singles of ids above 3
        /// compared the other way round; a pair's smaller id stored without
        /// the one added, so that a pair with job 0 read as a single.)
        #[test]
        fn the_combo_order_is_the_tuple_order(
            x in (any::<bool>(), any::<u32>(), any::<u32>()),
            y in (any::<bool>(), any::<u32>(), any::<u32>()),
            small in (any::<bool>(), 0u32..4, 0u32..4, any::<bool>(), 0u32..4, 0u32..4),
        ) {
            let (s0, s1, s2, s3, s4, s5) = small;
            let kind = |pair: bool, a: u32, b: u32| {
                if pair && a != b {
                    Kind::Pair(JobId(a.min(b)), JobId(a.max(b)))
                } else {
                    Kind::Single(JobId(a))
                }
            };
            for ((c, d), (kc, kd)) in [
                ((combo_of(x.0, x.1, x.2), combo_of(y.0, y.1, y.2)), (kind(x.0, x.1, x.2), kind(y.0, y.1, y.2))),
                ((combo_of(s0, s1, s2), combo_of(s3, s4, s5)), (kind(s0, s1, s2), kind(s3, s4, s5))),
            ] {
                // Each packs and unpacks to the jobs it was made of.
                prop_assert_eq!((c.kind(), d.kind()), (kc, kd));
                let members = |k: Kind| match k {
                    Kind::Single(a) => vec![a],
                    Kind::Pair(a, b) => vec![a, b],
                };
                prop_assert_eq!(c.jobs().to_vec(), members(kc));
                for id in [x.1, x.2, y.1, y.2, 0, u32::MAX].map(JobId) {
                    prop_assert_eq!(c.contains(id), members(kc).contains(&id), "{:?} has {}", c, id);
                }
                prop_assert_eq!(c.cmp(&d), c.order_key().cmp(&d.order_key()), "{:?} {:?}", c, d);
                prop_assert_eq!(c.cmp(&d) == Ordering::Equal, c == d);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// Random arrivals, sizes, tenants (one with a hard GPU limit) and early
        /// finishes under six objectives on 3 V100 + 2 K80 GPUs: every round,
        /// inside the policy, the merged ranking walk equals the three-lookup
        /// ranking, the one-pass up-GPU count equals the per-type scan, and each
        /// `take` equals the copy-then-check one (`rank_plain`, `up_gpus_of_type`,
        /// `take_plain`; a mismatch panics here).
        #[test]
        fn fast_round_paths_match_the_plain_ones(
            objective in 0usize..6,
            jobs in proptest::collection::vec((0u64..3_000, 0u32..2, 1u32..3, 1u32..40, 0u32..2), 1..14),
            finishes in proptest::collection::vec(any::<bool>(), 64),
        ) {
            let mut spec = ClusterSpec { gpu_types: vec!["v100".into(), "k80".into()], ..Default::default() };
            spec.add_nodes(GpuTypeId(0), 1, 3, 8, 64);
            spec.add_nodes(GpuTypeId(1), 1, 2, 8, 64);
            let config = GavelConfig {
                name: "test",
                objective: objectives()[objective],
                round: DEFAULT_ROUND,
                reset_interval: DEFAULT_RESET_INTERVAL,
                seed: 1,
                placement: Placement::Consolidated,
                max_pairs: MAX_PAIR_CANDIDATES,
            };
            let policy = Gavel::new(config, packed_table(), vec!["fast".into(), "even".into()]);
            let mut limited = TenantSpec::new("limited");
            limited.gpu_limit = Some(2);
            let tenants = vec![TenantSpec::new("t"), limited];
            let mut e = Engine::new(Cluster::new(spec).unwrap(), tenants, Box::new(policy), 0);
            let mut specs: Vec<JobSpec> = jobs
                .iter()
                .map(|&(at, job_type, gpus, steps, tenant)| {
                    let mut j = JobSpec::new(0, tenant, Time::from_secs(at), gpus, f64::from(steps) * 1_000.0);
                    j.job_type = Some(job_type);
                    j
                })
                .collect();
            specs.sort_by_key(|j| j.arrival);
            for (i, j) in specs.iter_mut().enumerate() {
                j.id = JobId(i as u32);
            }
            let (mut next, mut step) = (0, 0);
            while step < 400 {
                let arrival = specs.get(next).map(|j| j.arrival);
                let wake = e.next_wakeup();
                let Some(now) = [arrival, wake].into_iter().flatten().min() else { break };
                let mut inputs = Vec::new();
                while specs.get(next).is_some_and(|j| j.arrival == now) {
                    inputs.push(Input::JobSubmitted(specs[next].clone().into()));
                    next += 1;
                }
                if wake == Some(now) {
                    // Now and then the lowest running job finishes just before the round ends.
                    if finishes[step % finishes.len()] {
                        if let Some(&id) = e.running().iter().next() {
                            inputs.push(Input::JobFinished { job: id });
                        }
                    }
                    inputs.push(Input::Wakeup);
                }
                e.step(now, Input::Batch(inputs));
                prop_assert!(e.violations().is_empty(), "{:?}", e.violations());
                step += 1;
            }
        }
    }

    /// FIFO (not heterogeneity-aware) with three 100,000-step jobs on one V100 and
    /// one K80: the first round allocates to jobs 0 and 1 (FIFO order), job 2
    /// waits; nothing arrives or leaves, so no reset is due and the next nine
    /// rounds are steady: each repeats the full pass (checked inside
    /// `steady_round` against `rank_plain`, `choose` and `place`, shuffle draws
    /// included), stops and starts nothing, and lasts 360 s (floor(2 x 360) = 720
    /// steps at 2 steps/s on the V100, floor(1.5 x 360) = 540 at 1.5 on the K80,
    /// both exactly 360 s), so round k+1 starts at 360 k s + k ms of slack.
    #[test]
    fn steady_fifo_rounds_repeat_the_full_pass() {
        STEADY_ROUNDS.with(|n| n.set(0));
        let mut e = engine(Objective::Fifo { perf: false });
        let batch = Input::Batch((0..3).map(|i| Input::JobSubmitted(job(i, 1, 100_000.0).into())).collect());
        let first = e.step(Time::ZERO, batch);
        assert_eq!(starts(&first).len(), 2);
        for k in 1..=9u64 {
            let at = e.next_wakeup().expect("a round end");
            assert_eq!(at, Time::from_secs(360 * k) + Span(ROUND_SLACK.0 * k));
            let commands = e.step(at, Input::Wakeup);
            assert!(commands.is_empty(), "round {k}: {commands:?}");
        }
        assert_eq!(STEADY_ROUNDS.with(|n| n.get()), 9);
        assert_eq!(IN_PLACE_ROUNDS.with(|n| n.get()), 9, "each steady round runs in place");
        assert!(KEPT_PLACEMENTS.with(|n| n.get()) >= 9, "each steady round keeps its placement");
        assert!(e.running().contains(&JobId(0)) && e.running().contains(&JobId(1)));
    }

    /// Steady rounds in place name the jobs admitted since the last round
    /// (and only those). Three 100,000-step jobs arrive at 1 s (the first
    /// reset then is not at 0, so an admission alone forces no reset), two
    /// run; a fourth is submitted exactly when the third round ends, after
    /// Gavel's clock (no mid-round pass names it; it waits for the next
    /// round). The fourth round admits it and is still steady (no reset is
    /// due before 1,921 s): it runs in place (checked inside against the plain
    /// steady round, verdicts included) and names job 3 `NotThisRound`.
    #[test]
    fn steady_rounds_in_place_name_admitted_jobs() {
        STEADY_ROUNDS.with(|n| n.set(0));
        IN_PLACE_ROUNDS.with(|n| n.set(0));
        let mut e = engine(Objective::Fifo { perf: false });
        let first = |i| {
            let mut j = job(i, 1, 100_000.0);
            j.arrival = Time::from_secs(1);
            Input::JobSubmitted(j.into())
        };
        e.step(Time::from_secs(1), Input::Batch((0..3).map(first).collect()));
        for k in 1..=5u64 {
            let at = e.next_wakeup().expect("a round end");
            let mut inputs = vec![Input::Wakeup];
            if k == 3 {
                let mut late = job(3, 1, 100_000.0);
                late.arrival = at;
                inputs.insert(0, Input::JobSubmitted(late.into()));
            }
            let commands = e.step(at, Input::Batch(inputs));
            assert!(commands.is_empty(), "round {k}: {commands:?}");
            let verdict = e.job(JobId(3)).and_then(|j| j.verdict);
            assert_eq!(verdict, (k >= 4).then_some(WaitReason::NotThisRound), "round {k}");
        }
        assert_eq!(STEADY_ROUNDS.with(|n| n.get()), 5);
        assert_eq!(IN_PLACE_ROUNDS.with(|n| n.get()), 5);
    }

    /// The FIFO ranking walks the allocation's positive singles side by side
    /// with the maps, across gaps: jobs 0-5 tracked, X positive for jobs 1 and 4
    /// (on the V100) and for job 7, which left (in the allocation, not
    /// tracked). Ranked: 1 and 4 only, with every key of the full ranking. Job
    /// 1 on the V100: X = 1, time 181 s of the type's 720 s, priority
    /// 1 / (181 / 720) (about 3.98), deficit 1, X 1; on the K80 X = 0: (0, 0, 0).
    #[test]
    fn the_positive_ranking_walks_across_gaps() {
        let config = GavelConfig {
            name: "test",
            objective: Objective::Fifo { perf: false },
            round: DEFAULT_ROUND,
            reset_interval: DEFAULT_RESET_INTERVAL,
            seed: 0,
            placement: Placement::Consolidated,
            max_pairs: 0,
        };
        let mut g = Gavel::new(config, table(), vec!["fast".into(), "even".into()]);
        g.worker_time_s = vec![720.0, 360.0];
        for id in 0..6u32 {
            let tracked = Tracked {
                rates: vec![2.0, 1.5],
                scale_factor: 1,
                weight: 1.0,
                arrival: Time::ZERO,
                work: 1e5,
                credited: 0.0,
                ghost: false,
                stamp: 0,
                admitted: 0,
            };
            g.jobs.insert(JobId(id), tracked);
            g.combo_time_s.insert(Combo::single(JobId(id)), &[180.0 + f64::from(id), 180.0]);
            g.deficits_s.insert(Combo::single(JobId(id)), &[f64::from(id), 0.0]);
            let x = if id == 1 || id == 4 { [1.0, 0.0] } else { [0.0, 0.0] };
            g.allocation.insert(Combo::single(JobId(id)), &x);
        }
        g.allocation.insert(Combo::single(JobId(7)), &[0.0, 1.0]);
        g.positive = [1, 4, 7].map(|id| Combo::single(JobId(id))).to_vec();
        let mut ranking = Ranking::default();
        g.rank_positive(&mut ranking);
        assert_eq!(ranking.combos, vec![Combo::single(JobId(1)), Combo::single(JobId(4))]);
        assert_eq!(ranking.keys[0], (1.0 / (181.0 / 720.0), 1.0, 1.0));
        assert_eq!(ranking.keys[1], (0.0, 0.0, 0.0));
        assert_eq!(ranking, g.rank_plain().positive_only());
    }

    #[test]
    fn mid_round_arrivals_wait_for_the_round_end() {
        let mut e = engine(Objective::Fifo { perf: true });
        let first = e.step(Time::ZERO, Input::JobSubmitted(job(0, 0, 100_000.0).into()));
        assert_eq!(starts(&first), vec![(0, 0)]);
        let mid = e.step(Time::from_secs(100), Input::JobSubmitted(job(1, 0, 100_000.0).into()));
        assert!(starts(&mid).is_empty());
        let end = e.next_wakeup().unwrap();
        let next = e.step(end, Input::Wakeup);
        assert_eq!(starts(&next), vec![(1, 1)], "FIFO-perf: the newcomer takes the K80");
    }

    #[test]
    fn an_idle_cluster_starts_a_round_on_arrival() {
        let mut e = engine(Objective::MaxMinFairness { perf: false });
        let first = e.step(Time::from_secs(50), Input::JobSubmitted(job(0, 1, 10.0).into()));
        assert_eq!(starts(&first).len(), 1);
        let end = e.next_wakeup().unwrap();
        assert!(end < Time::from_secs(57), "a short job ends its round early: {end}");
        e.step(Time(end.0 - 500), Input::JobFinished { job: JobId(0) });
        e.step(end, Input::Wakeup);
        assert_eq!(e.next_wakeup(), None, "nothing left: no more rounds");
    }
}
