//! Faults and spot capacity (docs/faults.md): a seeded plan of timed inputs that
//! take nodes down and bring them back, and what a job loses when its node goes.
//!
//! Three sources, each optional:
//! - node failures: every node fails after an exponential up-time with mean
//!   `mtbf` (per node), and is repaired `repair` later;
//! - spot reclaims: the spot nodes (a fraction or a count, the last nodes of the
//!   cluster) are reclaimed after an exponential time with mean `reclaim`, with
//!   `notice` ahead, and come back `away` later;
//! - availability windows (`ClusterSpec::departures`, from `--availability`):
//!   nodes leave and return on a schedule known from the start.
//!
//! What a stopped job keeps:
//! - a failure gives no warning: the job keeps the work of its last periodic
//!   checkpoint (its own `JobProfile::checkpoint_interval`, else the run's), so it
//!   loses the productive time since then, less than one interval;
//! - a reclaim with notice: the job saves a checkpoint, taking `save`; if the
//!   notice covers the save, it saves at `leave - save` and keeps everything done
//!   by then (the save's GPU-time is lost, no work is); if not, as a failure;
//! - a known departure (window) is a notice as long as the schedule: the job keeps
//!   everything done by `leave - save`.
//!
//! The plan is drawn lazily, one stream per node and source (SplitMix64 seeded from
//! the source's seed and the node index), so it does not depend on the policy,
//! and the same seed gives the same failures under every policy.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::sync::Arc;

use crate::world::{Overheads, WorldJob};
use cotenant_core::{Cluster, ClusterSpec, Departure, Input, JobId, JobKind, JobSpec, NodeId, Span, Time};

/// Node failures: exponential up-times with mean `mtbf` per node, fixed repair time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Failures {
    pub mtbf: Span,
    pub repair: Span,
    pub seed: u64,
}

/// Which nodes are spot VMs: a fraction of the cluster's nodes or a count (the last nodes).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SpotNodes {
    Fraction(f64),
    Count(u32),
}

/// Spot reclaims of the spot nodes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spot {
    pub nodes: SpotNodes,
    /// Mean time between reclaims of one spot node while it is held (exponential).
    pub reclaim: Span,
    /// How long a reclaimed node stays away before capacity returns.
    pub away: Span,
    /// Warning before the node goes.
    pub notice: Span,
    pub seed: u64,
}

/// $/GPU-hour. Defaults: on-demand $3.06, AWS p3.2xlarge (1 x V100) on-demand in
/// us-east-1; spot a fifth of it, Varuna's "spot VMs are ~5x cheaper" (EuroSys'22).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prices {
    pub on_demand: f64,
    pub spot: f64,
}

impl Default for Prices {
    fn default() -> Self {
        Prices { on_demand: ON_DEMAND_PRICE, spot: ON_DEMAND_PRICE / 5.0 }
    }
}

/// AWS p3.2xlarge on-demand, us-east-1, $/GPU-hour.
pub const ON_DEMAND_PRICE: f64 = 3.06;
/// Time a job takes to write a checkpoint when warned (notice or known departure).
pub const DEFAULT_SAVE: Span = Span(30_000_000);

/// The fault model of a run (`SimConfig::faults`). Windows come from `ClusterSpec::departures`.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultConfig {
    pub failures: Option<Failures>,
    pub spot: Option<Spot>,
    /// Time to write a checkpoint when warned.
    pub save: Span,
    pub prices: Prices,
    /// Outages at fixed times (tests, what-if plans): the node goes down for the
    /// cause at the time and comes back after the span. A scripted reclaim is
    /// warned `Spot::notice` ahead (none without `spot`); a scripted window, ahead
    /// of time as a departure is.
    pub scripted: Vec<Outage>,
}

/// A scripted outage (`FaultConfig::scripted`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outage {
    pub node: NodeId,
    pub at: Time,
    pub down_for: Span,
    pub cause: Cause,
}

impl Default for FaultConfig {
    fn default() -> Self {
        FaultConfig {
            failures: None,
            spot: None,
            save: DEFAULT_SAVE,
            prices: Prices::default(),
            scripted: Vec::new(),
        }
    }
}

/// Why a node went down.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Cause {
    Failure,
    Reclaim,
    Window,
}

impl Cause {
    fn bit(self) -> u8 {
        match self {
            Cause::Failure => 1,
            Cause::Reclaim => 2,
            Cause::Window => 4,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Cause::Failure => "failure",
            Cause::Reclaim => "reclaim",
            Cause::Window => "window",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// A scripted outage starts (the cause's bit) and ends.
    Down(u8),
    Up(u8),
    Fail,
    Repair,
    Reclaim,
    Return,
    Leave,
    Back,
}

/// A job stopped by a node going down, and what it lost.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interruption {
    pub job: JobId,
    pub at: Time,
    pub cause: Cause,
    pub gpus: u32,
    /// Work done when it stopped, and kept.
    pub done: f64,
    pub kept: f64,
    /// Its checkpoint interval (zero: continuous).
    pub interval: Span,
    /// Its rate when it stopped (work units per second).
    pub rate: f64,
    /// GPU-time from its last save to the stop, GPU-microseconds.
    pub lost_gpu_us: u64,
}

impl Interruption {
    pub fn lost_work(&self) -> f64 {
        (self.done - self.kept).max(0.0)
    }
}

/// What the faults did in a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FaultSummary {
    pub failures: u64,
    pub reclaims: u64,
    pub departures: u64,
    pub interruptions: Vec<Interruption>,
    /// Distinct jobs interrupted.
    pub jobs_interrupted: usize,
    /// Inference services interrupted (a Komet-style policy moves them away first).
    pub services_interrupted: usize,
    pub lost_gpu_hours: f64,
    /// GPU-hours rented (nodes up, or failed and awaiting repair) from the first
    /// arrival to the end of the last job, at spot and on-demand prices.
    pub spot_gpu_hours: f64,
    pub on_demand_gpu_hours: f64,
    pub cost_usd: f64,
    /// The same span with every node on-demand and always there.
    pub all_on_demand_cost_usd: f64,
}

/// How a job stopped by a node going down keeps its work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Keep {
    /// Warned: saved at this time.
    SavedAt(Time, Cause),
    /// No warning: its last periodic checkpoint.
    LastCheckpoint(Cause),
}

/// The faults' state during a run (driver.rs feeds its inputs to the engine).
#[derive(Debug)]
pub struct FaultRun {
    config: Arc<FaultConfig>,
    queue: BinaryHeap<Reverse<(Time, u64, u32, Kind)>>,
    sequence: u64,
    down: Vec<u8>,
    /// Outages in progress per node and cause (failure, reclaim, window).
    holds: Vec<[u32; 3]>,
    spot: Vec<bool>,
    gpus: Vec<u32>,
    fail_rng: Vec<SplitMix64>,
    spot_rng: Vec<SplitMix64>,
    /// Nodes not paid for since (reclaimed or away), and the unpaid time so far.
    unpaid_since: Vec<Option<Time>>,
    unpaid_us: Vec<u64>,
    origin: Time,
    keep: BTreeMap<JobId, Keep>,
    summary: FaultSummary,
}

/// Salts of the per-node streams.
const FAIL_STREAM: u64 = 0xFA11_0000_0000_0000;
const SPOT_STREAM: u64 = 0x5B07_0000_0000_0000;

/// SplitMix64 (Steele, Lea and Flood, OOPSLA'14): a small seeded stream per node
/// and source, so that the sim crate needs no random-number dependency.
#[derive(Clone, Debug)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1), 53 bits.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn node_rng(seed: u64, salt: u64, node: usize) -> SplitMix64 {
    let mut rng = SplitMix64(seed ^ salt ^ (node as u64).wrapping_mul(0xD1B5_4A32_D192_ED03));
    rng.next_u64();
    rng
}

/// An exponential draw with mean `mean`, at least 1 µs.
fn exponential(rng: &mut SplitMix64, mean: Span) -> Span {
    let u = rng.unit();
    Span::from_secs_f64_ceil(-mean.as_secs_f64() * (1.0 - u).ln()).max(Span(1))
}

impl FaultRun {
    /// The plan for `spec` from `origin` (the first arrival) on.
    pub fn new(config: Arc<FaultConfig>, spec: &ClusterSpec, origin: Time) -> FaultRun {
        let n = spec.nodes.len();
        let spot_count = config.spot.map_or(0, |s| spot_count(s.nodes, n));
        let mut run = FaultRun {
            queue: BinaryHeap::new(),
            sequence: 0,
            down: vec![0; n],
            holds: vec![[0; 3]; n],
            spot: (0..n).map(|i| i >= n - spot_count).collect(),
            gpus: spec.nodes.iter().map(|node| node.gpus).collect(),
            fail_rng: match config.failures {
                Some(f) => (0..n).map(|i| node_rng(f.seed, FAIL_STREAM, i)).collect(),
                None => Vec::new(),
            },
            spot_rng: match config.spot {
                Some(s) => (0..n).map(|i| node_rng(s.seed, SPOT_STREAM, i)).collect(),
                None => Vec::new(),
            },
            unpaid_since: vec![None; n],
            unpaid_us: vec![0; n],
            origin,
            keep: BTreeMap::new(),
            summary: FaultSummary::default(),
            config,
        };
        for node in 0..n as u32 {
            run.draw_failure(origin, node);
            if run.spot[node as usize] {
                run.draw_reclaim(origin, node);
            }
        }
        for o in run.config.scripted.clone() {
            if o.node.index() < n {
                run.push(o.at.max(origin), o.node.0, Kind::Down(o.cause.bit()));
                run.push(o.at.max(origin) + o.down_for, o.node.0, Kind::Up(o.cause.bit()));
            }
        }
        for d in &spec.departures {
            if d.node.index() < n {
                run.push(d.leaves.max(origin), d.node.0, Kind::Leave);
                if let Some(back) = d.returns {
                    run.push(back.max(d.leaves).max(origin), d.node.0, Kind::Back);
                }
            }
        }
        run
    }

    fn push(&mut self, at: Time, node: u32, kind: Kind) {
        self.sequence += 1;
        self.queue.push(Reverse((at, self.sequence, node, kind)));
    }

    fn draw_failure(&mut self, from: Time, node: u32) {
        if let Some(f) = self.config.failures {
            let gap = exponential(&mut self.fail_rng[node as usize], f.mtbf);
            self.push(from + gap, node, Kind::Fail);
        }
    }

    fn draw_reclaim(&mut self, from: Time, node: u32) {
        if let Some(s) = self.config.spot {
            let gap = exponential(&mut self.spot_rng[node as usize], s.reclaim);
            self.push(from + gap, node, Kind::Reclaim);
        }
    }

    /// When the next node changes, if ever.
    pub fn next_time(&self) -> Option<Time> {
        self.queue.peek().map(|Reverse((t, ..))| *t)
    }

    /// The inputs due at `now` (nodes going down or up), after noting how each job
    /// on a node going down keeps its work.
    pub fn due(&mut self, now: Time, cluster: &Cluster, inputs: &mut Vec<Input>) {
        self.keep.clear();
        let mut changed: BTreeMap<u32, (bool, u8)> = BTreeMap::new();
        while let Some(&Reverse((t, _, node, kind))) = self.queue.peek() {
            if t > now {
                break;
            }
            self.queue.pop();
            let i = node as usize;
            let before = self.down[i];
            changed.entry(node).or_insert((before == 0, 0));
            let (set, clear) = match kind {
                Kind::Down(bit) => {
                    self.count(bit);
                    (bit, 0)
                }
                Kind::Up(bit) => (0, bit),
                Kind::Fail => {
                    self.summary.failures += 1;
                    let repair = self.config.failures.map_or(Span::ZERO, |f| f.repair);
                    self.push(now + repair, node, Kind::Repair);
                    (Cause::Failure.bit(), 0)
                }
                Kind::Repair => {
                    self.draw_failure(now, node);
                    (0, Cause::Failure.bit())
                }
                Kind::Reclaim => {
                    self.summary.reclaims += 1;
                    let away = self.config.spot.map_or(Span::ZERO, |s| s.away);
                    self.push(now + away, node, Kind::Return);
                    (Cause::Reclaim.bit(), 0)
                }
                Kind::Return => {
                    self.draw_reclaim(now, node);
                    (0, Cause::Reclaim.bit())
                }
                Kind::Leave => {
                    self.summary.departures += 1;
                    (Cause::Window.bit(), 0)
                }
                Kind::Back => (0, Cause::Window.bit()),
            };
            // Outages of one cause may overlap (two windows, scripted outages): a cause
            // holds the node down while any of its outages lasts.
            let slot = |bit: u8| bit.trailing_zeros() as usize;
            if set != 0 {
                self.holds[i][slot(set)] += 1;
            }
            if clear != 0 {
                self.holds[i][slot(clear)] = self.holds[i][slot(clear)].saturating_sub(1);
            }
            let mut mask = 0;
            for (k, &count) in self.holds[i].iter().enumerate() {
                if count > 0 {
                    mask |= 1 << k;
                }
            }
            self.down[i] = mask;
            if let Some(entry) = changed.get_mut(&node) {
                entry.1 |= set & !before;
            }
            self.track_payment(now, i);
        }
        for (node, (was_up, newly)) in changed {
            let up = self.down[node as usize] == 0;
            let id = NodeId(node);
            if was_up && !up {
                let keep = self.keep_rule(now, newly, self.down[node as usize]);
                for job in cluster.jobs_on(id) {
                    let entry = self.keep.entry(job).or_insert(keep);
                    *entry = (*entry).max(keep);
                }
                inputs.push(Input::NodeDown(id));
            } else if !was_up && up {
                inputs.push(Input::NodeUp(id));
            }
        }
    }

    fn count(&mut self, bit: u8) {
        if bit == Cause::Failure.bit() {
            self.summary.failures += 1;
        } else if bit == Cause::Reclaim.bit() {
            self.summary.reclaims += 1;
        } else {
            self.summary.departures += 1;
        }
    }

    /// How jobs keep their work when a node goes down for the causes `newly` set now.
    fn keep_rule(&self, now: Time, newly: u8, all: u8) -> Keep {
        let causes = if newly == 0 { all } else { newly };
        let save = self.config.save;
        if causes & Cause::Failure.bit() != 0 {
            return Keep::LastCheckpoint(Cause::Failure);
        }
        if causes & Cause::Reclaim.bit() != 0 {
            let notice = self.config.spot.map_or(Span::ZERO, |s| s.notice);
            if notice < save {
                return Keep::LastCheckpoint(Cause::Reclaim);
            }
            return Keep::SavedAt(Time(now.0.saturating_sub(save.0)), Cause::Reclaim);
        }
        Keep::SavedAt(Time(now.0.saturating_sub(save.0)), Cause::Window)
    }

    /// A node that is away (reclaimed or outside its window) is not paid for.
    fn track_payment(&mut self, now: Time, node: usize) {
        let away = self.down[node] & (Cause::Reclaim.bit() | Cause::Window.bit()) != 0;
        match (away, self.unpaid_since[node]) {
            (true, None) => self.unpaid_since[node] = Some(now),
            (false, Some(since)) => {
                self.unpaid_us[node] += (now - since).0;
                self.unpaid_since[node] = None;
            }
            _ => {}
        }
    }

    /// `job` was stopped at `now` by a node going down: stops its run in `world`,
    /// keeping what it saved, records the interruption, and returns the work kept.
    pub fn stop(&mut self, now: Time, job: &JobSpec, world: &mut WorldJob, overheads: &Overheads) -> f64 {
        let interval = overheads.checkpoint_interval;
        let keep = self.keep.get(&job.id).copied().unwrap_or(Keep::LastCheckpoint(Cause::Failure));
        let (kept_until, cause, warned) = match keep {
            Keep::SavedAt(at, cause) => (at, cause, true),
            Keep::LastCheckpoint(cause) => (world.last_checkpoint(now, interval), cause, false),
        };
        let done = world.saved_or_done(now).min(job.work);
        let (rate, gpus) = (world.rate, world.gpus);
        let kept_from = kept_until.min(now).max(world.productive_from.min(now));
        let kept = world.stop_kept_until(now, kept_until, job.work);
        // A warned job spent the time after its save point writing the checkpoint, not training.
        let done = if warned { kept } else { done };
        let lost_gpu_us = (now - kept_from).0.saturating_mul(u64::from(gpus));
        let summary = &mut self.summary;
        summary.lost_gpu_hours += lost_gpu_us as f64 / 3.6e9;
        if job.kind == JobKind::Inference {
            summary.services_interrupted += 1;
        }
        summary.interruptions.push(Interruption {
            job: job.id,
            at: now,
            cause,
            gpus,
            done: done.max(kept),
            kept,
            interval,
            rate,
            lost_gpu_us,
        });
        kept
    }

    /// The run's fault summary; costs over `[origin, end]`.
    pub fn summary(mut self, end: Time) -> FaultSummary {
        let end = end.max(self.origin);
        let span_us = (end - self.origin).0;
        let prices = self.config.prices;
        let (mut spot_h, mut on_demand_h, mut all_h) = (0.0, 0.0, 0.0);
        for node in 0..self.gpus.len() {
            let mut unpaid = self.unpaid_us[node];
            if let Some(since) = self.unpaid_since[node] {
                unpaid += (end - since.max(self.origin).min(end)).0;
            }
            let gpus = f64::from(self.gpus[node]);
            let paid_h = span_us.saturating_sub(unpaid) as f64 / 3.6e9 * gpus;
            all_h += span_us as f64 / 3.6e9 * gpus;
            if self.spot[node] {
                spot_h += paid_h;
            } else {
                on_demand_h += paid_h;
            }
        }
        let s = &mut self.summary;
        s.spot_gpu_hours = spot_h;
        s.on_demand_gpu_hours = on_demand_h;
        s.cost_usd = spot_h * prices.spot + on_demand_h * prices.on_demand;
        s.all_on_demand_cost_usd = all_h * prices.on_demand;
        s.jobs_interrupted = s.interruptions.iter().map(|i| i.job).collect::<BTreeSet<_>>().len();
        self.summary
    }
}

fn spot_count(nodes: SpotNodes, n: usize) -> usize {
    match nodes {
        SpotNodes::Fraction(f) => ((f * n as f64).round() as usize).min(n),
        SpotNodes::Count(c) => (c as usize).min(n),
    }
}

/// `KEY=VALUE,...` pairs; an error names the flag and the key.
fn pairs<'a>(flag: &str, text: &'a str, keys: &[&str]) -> Result<Vec<(&'a str, &'a str)>, String> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) =
            part.split_once('=').ok_or_else(|| format!("{flag}: '{part}' is not KEY=VALUE"))?;
        let key = key.trim();
        if !keys.contains(&key) {
            return Err(format!("{flag}: unknown key '{key}' (keys: {})", keys.join(", ")));
        }
        if out.iter().any(|(k, _)| *k == key) {
            return Err(format!("{flag}: key '{key}' given twice"));
        }
        out.push((key, value.trim()));
    }
    Ok(out)
}

/// A span for `flag`'s `key`, positive (if `positive`) and at most 100 years.
fn span(flag: &str, key: &str, value: &str, positive: bool) -> Result<Span, String> {
    // Span::parse's message quotes the value.
    let span = Span::parse(value).map_err(|e| format!("{flag}: {key}: {e}"))?;
    if positive && span == Span::ZERO {
        return Err(format!("{flag}: {key}={value}: must be more than zero"));
    }
    if span > cotenant_core::limits::MAX_RUN_SPAN {
        return Err(format!("{flag}: {key}={value}: must be at most 100 years"));
    }
    Ok(span)
}

fn number(flag: &str, key: &str, value: &str, min: f64, max: f64) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(x) if x.is_finite() && (min..=max).contains(&x) => Ok(x),
        _ => Err(format!("{flag}: {key}={value}: expected a number from {min} to {max}")),
    }
}

fn seed(flag: &str, value: &str) -> Result<u64, String> {
    value.parse().map_err(|_| format!("{flag}: seed={value}: expected a whole number"))
}

/// `--failures mtbf=DUR,repair=DUR[,seed=S]`; `seed` defaults to `default_seed`.
pub fn parse_failures(text: &str, default_seed: u64) -> Result<Failures, String> {
    const FLAG: &str = "--failures";
    let (mut mtbf, mut repair, mut s) = (None, None, default_seed);
    for (key, value) in pairs(FLAG, text, &["mtbf", "repair", "seed"])? {
        match key {
            "mtbf" => mtbf = Some(span(FLAG, key, value, true)?),
            "repair" => repair = Some(span(FLAG, key, value, true)?),
            _ => s = seed(FLAG, value)?,
        }
    }
    let mtbf = mtbf.ok_or(format!(
        "{FLAG}: missing key 'mtbf' (mean time between failures per node, e.g. mtbf=1000h)"
    ))?;
    let repair = repair.ok_or(format!("{FLAG}: missing key 'repair' (repair time, e.g. repair=4h)"))?;
    Ok(Failures { mtbf, repair, seed: s })
}

/// `--spot fraction=F|nodes=N,reclaim=DUR,notice=DUR[,away=DUR][,save=DUR][,price=$][,on-demand=$][,seed=S]`:
/// the spot model, the save time and the prices.
pub fn parse_spot(text: &str, default_seed: u64) -> Result<(Spot, Span, Prices), String> {
    const FLAG: &str = "--spot";
    const KEYS: [&str; 9] =
        ["fraction", "nodes", "reclaim", "notice", "away", "save", "price", "on-demand", "seed"];
    let mut nodes = None;
    let (mut reclaim, mut notice, mut away, mut save) = (None, None, Span::from_secs(1800), DEFAULT_SAVE);
    let mut prices = Prices::default();
    let mut spot_price = None;
    let mut s = default_seed;
    for (key, value) in pairs(FLAG, text, &KEYS)? {
        match key {
            "fraction" | "nodes" if nodes.is_some() => {
                return Err(format!("{FLAG}: give one of 'fraction' and 'nodes'"));
            }
            "fraction" => nodes = Some(SpotNodes::Fraction(number(FLAG, key, value, 0.0, 1.0)?)),
            "nodes" => {
                nodes = Some(SpotNodes::Count(
                    value.parse().map_err(|_| format!("{FLAG}: nodes={value}: expected a whole number"))?,
                ))
            }
            "reclaim" => reclaim = Some(span(FLAG, key, value, true)?),
            "notice" => notice = Some(span(FLAG, key, value, false)?),
            "away" => away = span(FLAG, key, value, true)?,
            "save" => save = span(FLAG, key, value, false)?,
            "price" => spot_price = Some(number(FLAG, key, value, 0.0, 1e6)?),
            "on-demand" => prices.on_demand = number(FLAG, key, value, 0.0, 1e6)?,
            _ => s = seed(FLAG, value)?,
        }
    }
    prices.spot = spot_price.unwrap_or(prices.on_demand / 5.0);
    let nodes =
        nodes.ok_or(format!("{FLAG}: missing key 'fraction' or 'nodes' (which nodes are spot VMs)"))?;
    let reclaim = reclaim.ok_or(format!(
        "{FLAG}: missing key 'reclaim' (mean time between reclaims of a spot node, e.g. reclaim=6h)"
    ))?;
    let notice =
        notice.ok_or(format!("{FLAG}: missing key 'notice' (warning before a reclaim, e.g. notice=30s)"))?;
    Ok((Spot { nodes, reclaim, away, notice, seed: s }, save, prices))
}

/// An availability file (`--availability FILE`): one window per line,
/// `NODE LEAVES [RETURNS]`, NODE a node name or index, times from the start of the
/// run (`6h`, `90m`); `#` starts a comment. Errors name the file, line and field.
pub fn parse_availability(file: &str, text: &str, spec: &ClusterSpec) -> Result<Vec<Departure>, String> {
    let mut out = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let at = |field: &str, problem: String| format!("{file}:{}: {field}: {problem}", n + 1);
        let fields: Vec<&str> = line.split_whitespace().collect();
        if !(2..=3).contains(&fields.len()) {
            return Err(at("line", format!("expected NODE LEAVES [RETURNS], got '{line}'")));
        }
        let node = match spec.nodes.iter().position(|node| node.name == fields[0]) {
            Some(i) => i,
            None => match fields[0].parse::<usize>() {
                Ok(i) if i < spec.nodes.len() => i,
                _ => {
                    return Err(at(
                        "NODE",
                        format!(
                            "'{}' is neither a node name nor an index below {}",
                            fields[0],
                            spec.nodes.len()
                        ),
                    ))
                }
            },
        };
        let time = |field: &str, value: &str| {
            let span = Span::parse(value).map_err(|e| at(field, e))?;
            if span > cotenant_core::limits::MAX_RUN_SPAN {
                return Err(at(
                    field,
                    format!("'{value}': more than 100 years (core::limits::MAX_RUN_SPAN)"),
                ));
            }
            Ok(Time(span.0))
        };
        let leaves = time("LEAVES", fields[1])?;
        let returns = fields.get(2).map(|v| time("RETURNS", v)).transpose()?;
        if returns.is_some_and(|r| r <= leaves) {
            return Err(at("RETURNS", "must be after LEAVES".into()));
        }
        out.push(Departure { node: NodeId(node as u32), leaves, returns });
    }
    Ok(out)
}
