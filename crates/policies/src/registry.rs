//! Every policy the CLI knows, by name, with a one-line summary and a builder.
//! Nothing else dispatches on a policy's name.

use std::collections::BTreeMap;
use std::sync::Arc;

use cotenant_core::limits;
use cotenant_core::placement::Placement;
use cotenant_core::{Policy, Span};
use cotenant_perf::throughput::ThroughputTable;

use crate::fifo::Fifo;
use crate::gavel::{Objective, PackedObjective};
use crate::las::Las;
use crate::sjf::Sjf;
use crate::srtf::Srtf;
use crate::tiresias::{DemotionTimer, Tiresias};

/// A policy name or option that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("unknown policy '{name}'; known policies: {known}")]
    Unknown { name: String, known: String },
    #[error("policy '{policy}': option '{key}' is not one it takes (it takes: {takes})")]
    UnknownOption { policy: String, key: String, takes: String },
    #[error("policy '{policy}': option '{key}={value}': {problem}")]
    BadOption { policy: String, key: String, value: String, problem: String },
    #[error("policy '{policy}' needs {what}")]
    Missing { policy: String, what: String },
}

/// Inputs every builder may read. Options are `key=value` strings a policy
/// takes by name; any left unread is an error, so a typo never passes silently.
#[derive(Clone, Debug, Default)]
pub struct PolicyParams {
    pub placement: Placement,
    /// Round or quantum length for round-based policies (their default if `None`).
    pub round: Option<Span>,
    pub options: BTreeMap<String, String>,
    /// Job-type names of the workload (`JobSpec::job_type` indexes them).
    pub job_types: Vec<String>,
    /// Steps/s per job type and GPU type, for heterogeneity-aware policies (Gavel's).
    pub throughputs: Option<Arc<ThroughputTable>>,
    /// Account tree for `fair-share` (tenants are its leaves); `None`: flat, by weight.
    pub accounts: Option<crate::fairshare::AccountTree>,
    /// Per-tenant GPU quotas, cohorts and borrowing limits for `kueue`.
    pub quotas: Option<crate::kueue::QuotaConfig>,
    /// Interference factors per sharing mode, indexed by job type (`sjf-bsbf`, `sjf-ffs`).
    pub interference: Option<Arc<cotenant_core::sharing::InterferenceTable>>,
    /// MIG geometries and speed-versus-slice curves per job type, for the MIG policies (`--mig`).
    pub mig: Option<Arc<crate::miso::MigData>>,
    /// Synergy's throughput matrices (`None`: the bundled, reconstructed ones).
    pub synergy_matrices: Option<Arc<cotenant_perf::synergy::SynergyMatrices>>,
}

/// The options one builder reads, tracking which it used.
#[derive(Debug)]
pub struct Options<'a> {
    policy: &'static str,
    all: &'a BTreeMap<String, String>,
    used: Vec<&'static str>,
}

impl<'a> Options<'a> {
    pub fn span(&mut self, key: &'static str, default: Span) -> Result<Span, PolicyError> {
        self.used.push(key);
        match self.all.get(key) {
            None => Ok(default),
            Some(value) => {
                let span = Span::parse(value).map_err(|problem| self.bad(key, value, problem))?;
                // Periods drive timers: bounded so that neither a 1 µs quantum nor a
                // century-long one can stall a run (core::limits).
                let (min, max) = (limits::MIN_ROUND, limits::MAX_ARRIVAL_SPAN);
                if span < min || span > max {
                    let problem = format!(
                        "must be between {} ms and {} days (core::limits::MIN_ROUND, MAX_ARRIVAL_SPAN)",
                        min.0 / 1_000,
                        max.0 / 86_400_000_000
                    );
                    return Err(self.bad(key, value, problem));
                }
                Ok(span)
            }
        }
    }

    pub fn u32(&mut self, key: &'static str, default: u32) -> Result<u32, PolicyError> {
        self.used.push(key);
        match self.all.get(key) {
            None => Ok(default),
            Some(value) => value.parse().map_err(|_| self.bad(key, value, "expected a whole number".into())),
        }
    }

    /// A finite number in `[min, max]`.
    pub fn f64(&mut self, key: &'static str, default: f64, min: f64, max: f64) -> Result<f64, PolicyError> {
        self.used.push(key);
        let Some(value) = self.all.get(key) else { return Ok(default) };
        match value.parse::<f64>() {
            Ok(x) if x.is_finite() && (min..=max).contains(&x) => Ok(x),
            _ => Err(self.bad(key, value, format!("expected a number from {min} to {max}"))),
        }
    }

    /// One of `allowed` (the first is the default).
    pub fn choice(
        &mut self,
        key: &'static str,
        allowed: &[&'static str],
    ) -> Result<&'static str, PolicyError> {
        self.used.push(key);
        let Some(value) = self.all.get(key) else { return Ok(allowed[0]) };
        match allowed.iter().find(|a| **a == value.as_str()) {
            Some(a) => Ok(a),
            None => Err(self.bad(key, value, format!("expected one of {}", allowed.join(", ")))),
        }
    }

    /// A `:`-separated list of durations, returned in whole seconds.
    pub fn seconds_list(&mut self, key: &'static str, default: &[u64]) -> Result<Vec<u64>, PolicyError> {
        self.used.push(key);
        let Some(value) = self.all.get(key) else { return Ok(default.to_vec()) };
        let mut out = Vec::new();
        for part in value.split(':') {
            let span = Span::parse(part).map_err(|problem| self.bad(key, value, problem))?;
            if span > limits::MAX_ARRIVAL_SPAN {
                return Err(self.bad(
                    key,
                    value,
                    "a threshold is over 10 years (core::limits::MAX_ARRIVAL_SPAN)".into(),
                ));
            }
            out.push(span.0 / cotenant_core::MICROS_PER_SECOND);
        }
        if out.windows(2).any(|w| w[0] >= w[1]) {
            return Err(self.bad(key, value, "thresholds must increase".into()));
        }
        Ok(out)
    }

    /// A free-text option (`None` when not given).
    pub fn text(&mut self, key: &'static str) -> Option<String> {
        self.used.push(key);
        self.all.get(key).cloned()
    }

    fn bad(&self, key: &str, value: &str, problem: String) -> PolicyError {
        PolicyError::BadOption { policy: self.policy.into(), key: key.into(), value: value.into(), problem }
    }

    fn finish(self) -> Result<(), PolicyError> {
        match self.all.keys().find(|k| !self.used.contains(&k.as_str())) {
            None => Ok(()),
            Some(key) => Err(PolicyError::UnknownOption {
                policy: self.policy.into(),
                key: key.clone(),
                takes: if self.used.is_empty() { "none".into() } else { self.used.join(", ") },
            }),
        }
    }
}

type Builder = fn(&PolicyParams, &mut Options<'_>) -> Result<Box<dyn Policy>, PolicyError>;

/// One entry of the policy table.
#[derive(Debug)]
pub struct PolicyInfo {
    pub name: &'static str,
    pub summary: &'static str,
    pub build: Builder,
}

/// Tiresias thresholds when none are given: 1 and 10 GPU-hours (three queues).
pub const TIRESIAS_THRESHOLDS_GPU_SECS: [u64; 2] = [3_600, 36_000];
pub const TIRESIAS_STARVATION_KNOB: u32 = 8;
pub const LAS_QUANTUM: Span = Span(300 * cotenant_core::MICROS_PER_SECOND);

/// All policies, in the order `cotenant policies` lists them.
pub fn policies() -> &'static [PolicyInfo] {
    POLICIES
}

static POLICIES: &[PolicyInfo] = &[
    PolicyInfo {
        name: "fifo",
        summary: "first come first served, non-preemptive; the first job that does not fit blocks the queue",
        build: |p, _| Ok(Box::new(Fifo { placement: p.placement, backfill: false })),
    },
    PolicyInfo {
        name: "fifo-backfill",
        summary: "FIFO with EASY backfill: later jobs start if they do not delay the head's reservation (uses estimates)",
        build: |p, _| Ok(Box::new(Fifo { placement: p.placement, backfill: true })),
    },
    PolicyInfo {
        name: "sjf",
        summary: "shortest job first by (oracle) duration estimate, non-preemptive",
        build: |p, _| Ok(Box::new(Sjf::new(p.placement))),
    },
    PolicyInfo {
        name: "srtf",
        summary: "shortest remaining time first by (oracle) estimate, preemptive",
        build: |p, _| Ok(Box::new(Srtf::new(p.placement))),
    },
    PolicyInfo {
        name: "las",
        summary: "least attained GPU-seconds first, preemptive; re-ranked every quantum (option quantum=300s)",
        build: |p, o| {
            let quantum = o.span("quantum", p.round.unwrap_or(LAS_QUANTUM))?;
            Ok(Box::new(Las::new(p.placement, quantum)))
        },
    },
    PolicyInfo {
        name: "tiresias",
        summary: "Tiresias 2D-LAS as its dlas-gpu: queues by attained GPU-seconds (thresholds=1h:10h), list order within, starvation guard (knob=8), demotion timer=exact|tiresias",
        build: |p, o| {
            let thresholds = o.seconds_list("thresholds", &TIRESIAS_THRESHOLDS_GPU_SECS)?;
            let knob = o.u32("knob", TIRESIAS_STARVATION_KNOB)?;
            let timer = match o.choice("timer", &["exact", "tiresias"])? {
                "tiresias" => DemotionTimer::Tiresias,
                _ => DemotionTimer::Exact,
            };
            Ok(Box::new(Tiresias::new(p.placement, thresholds, knob, timer)))
        },
    },
    PolicyInfo {
        name: "elastic-tiresias",
        summary: "EDL's elastic Tiresias: 2D-LAS order (thresholds=1h:10h), elastic jobs admitted at their minimum, grown into idle GPUs and shrunk to admit waiting jobs (round=60s, regrow=300s)",
        build: |p, o| {
            let thresholds = o.seconds_list("thresholds", &TIRESIAS_THRESHOLDS_GPU_SECS)?;
            let round = o.span("round", p.round.unwrap_or(Span::from_secs(60)))?;
            let regrow = o.span("regrow", Span::from_secs(300))?;
            Ok(Box::new(crate::elastic::ElasticTiresias::new(p.placement, thresholds, round, regrow)))
        },
    },
    PolicyInfo {
        name: "gavel-fifo",
        summary: "Gavel's FIFO in 360 s rounds (allocation as Gavel's base FIFO, types drawn with its random stream); reads --throughputs (options seed=0, reset_interval=1920s)",
        build: |p, o| crate::gavel::build("gavel-fifo", Objective::Fifo { perf: false }, p, o),
    },
    PolicyInfo {
        name: "fifo-perf",
        summary: "Gavel FIFO, heterogeneity-aware: each job in arrival order takes the fastest GPU type with room; 360 s rounds; reads --throughputs (options seed=0, reset_interval=1920s)",
        build: |p, o| crate::gavel::build("fifo-perf", Objective::Fifo { perf: true }, p, o),
    },
    PolicyInfo {
        name: "max-min-fairness",
        summary: "Gavel max-min fairness (LAS), heterogeneity-agnostic: equal time shares weighted by priority and scale factor; reads --throughputs (options seed=0, reset_interval=1920s)",
        build: |p, o| crate::gavel::build("max-min-fairness", Objective::MaxMinFairness { perf: false }, p, o),
    },
    PolicyInfo {
        name: "max-min-fairness-perf",
        summary: "Gavel max-min fairness, heterogeneity-aware: maximize the minimum throughput relative to an equal share; reads --throughputs (options seed=0, reset_interval=1920s)",
        build: |p, o| crate::gavel::build("max-min-fairness-perf", Objective::MaxMinFairness { perf: true }, p, o),
    },
    PolicyInfo {
        name: "finish-time-fairness",
        summary: "Gavel finish-time fairness (Themis), heterogeneity-agnostic: minimize the worst rho; reads --throughputs (options seed=0, reset_interval=1920s)",
        build: |p, o| crate::gavel::build("finish-time-fairness", Objective::FinishTimeFairness { perf: false }, p, o),
    },
    PolicyInfo {
        name: "finish-time-fairness-perf",
        summary: "Gavel finish-time fairness (Themis), heterogeneity-aware: minimize the worst rho; reads --throughputs (options seed=0, reset_interval=1920s)",
        build: |p, o| crate::gavel::build("finish-time-fairness-perf", Objective::FinishTimeFairness { perf: true }, p, o),
    },
    PolicyInfo {
        name: "min-total-duration-perf",
        summary: "Gavel min total duration: smallest makespan at which every active job can finish (heterogeneity-aware); reads --throughputs (options seed=0, reset_interval=1920s)",
        build: |p, o| crate::gavel::build("min-total-duration-perf", Objective::MinTotalDuration, p, o),
    },
    PolicyInfo {
        name: "max-sum-throughput-perf",
        summary: "Gavel max sum throughput: maximize total steps/s over all jobs (heterogeneity-aware); reads --throughputs (options seed=0, reset_interval=1920s)",
        build: |p, o| crate::gavel::build("max-sum-throughput-perf", Objective::MaxSumThroughput, p, o),
    },
    PolicyInfo {
        name: "max-min-fairness-packed",
        summary: "Gavel max-min fairness with space sharing: time for jobs alone and for equal-size pairs sharing GPUs at the table's co-located rates; needs --throughputs (options seed=0, reset_interval=1920s, max_pairs=20000)",
        build: |p, o| crate::gavel::build("max-min-fairness-packed", Objective::Packed(PackedObjective::MaxMinFairness), p, o),
    },
    PolicyInfo {
        name: "finish-time-fairness-packed",
        summary: "Gavel finish-time fairness (Themis, heterogeneity-aware) with space sharing: minimize the worst rho over jobs alone and pairs; needs --throughputs (options seed=0, reset_interval=1920s, max_pairs=20000)",
        build: |p, o| crate::gavel::build("finish-time-fairness-packed", Objective::Packed(PackedObjective::FinishTimeFairness), p, o),
    },
    PolicyInfo {
        name: "min-total-duration-packed",
        summary: "Gavel min total duration with space sharing: smallest makespan over jobs alone and pairs; needs --throughputs (options seed=0, reset_interval=1920s, max_pairs=20000)",
        build: |p, o| crate::gavel::build("min-total-duration-packed", Objective::Packed(PackedObjective::MinTotalDuration), p, o),
    },
    PolicyInfo {
        name: "fifo-packed",
        summary: "Gavel FIFO-perf, then queued jobs join a running job when their pair's normalized throughput exceeds 1.5; needs --throughputs (options seed=0, reset_interval=1920s, max_pairs=20000)",
        build: |p, o| crate::gavel::build("fifo-packed", Objective::Packed(PackedObjective::Fifo), p, o),
    },
    PolicyInfo {
        name: "gandiva",
        summary: "Gandiva as Gavel implements it: equal time slices, and when jobs outnumber GPUs random equal-size pairs sharing GPUs, kept while their co-located rates beat time slicing; needs --throughputs (options seed=0, reset_interval=1920s, max_pairs=20000)",
        build: |p, o| crate::gavel::build("gandiva", Objective::Packed(PackedObjective::Gandiva), p, o),
    },
    PolicyInfo {
        name: "drf",
        summary: "dominant resource fairness over GPUs, CPUs and memory, weighted per tenant; non-preemptive",
        build: |p, _| Ok(Box::new(crate::drf::Drf { placement: p.placement })),
    },
    PolicyInfo {
        name: "fair-share",
        summary: "Slurm classic fair share F = 2^(-U/S) on the account tree (--tenant-config), usage half-life (option half_life=7d)",
        build: |p, o| {
            let half_life = o.span("half_life", crate::fairshare::DEFAULT_HALF_LIFE)?;
            Ok(Box::new(crate::fairshare::FairShare::new(p.placement, half_life, p.accounts.clone())))
        },
    },
    PolicyInfo {
        name: "kueue",
        summary: "Kueue-style quotas per GPU type (--tenant-config): borrowing up to a limit, reclaim of youngest borrowers (options reclaim_grace=60s, check_interval=60s)",
        build: |p, o| {
            let grace = o.span("reclaim_grace", crate::kueue::DEFAULT_RECLAIM_GRACE)?;
            let check = o.span("check_interval", crate::kueue::DEFAULT_CHECK_INTERVAL)?;
            let config = p.quotas.clone().unwrap_or_default();
            Ok(Box::new(crate::kueue::Kueue::new(p.placement, config, grace, check)))
        },
    },
    PolicyInfo {
        name: "miso",
        summary: "MISO on MIG GPUs (--mig): fewest-jobs GPU, 30 s MPS profiling with a noisy predictor, exhaustive partition search for total normalized throughput, re-optimized on completion (option profile=30s)",
        build: |p, o| {
            let profile = o.span("profile", crate::miso::PROFILE_TIME)?;
            Ok(Box::new(crate::miso::Miso::new(mig_data(p, "miso")?, false, profile)))
        },
    },
    PolicyInfo {
        name: "miso-oracle",
        summary: "MISO with the true speed-vs-slice curves and no profiling phase (--mig): the bound MISO's predictor aims at",
        build: |p, _| Ok(Box::new(crate::miso::Miso::new(mig_data(p, "miso-oracle")?, true, Span::ZERO))),
    },
    PolicyInfo {
        name: "mig-unpartitioned",
        summary: "MIG baseline (--mig): every GPU one whole 7g instance, one job per GPU, FIFO",
        build: |p, _| Ok(Box::new(crate::miso::MigStatic::new(mig_data(p, "mig-unpartitioned")?, None).map_err(|e| bad_partition("mig-unpartitioned", "", e))?)),
    },
    PolicyInfo {
        name: "mig-static",
        summary: "MIG baseline (--mig): every GPU one fixed partition (option partition=4g.20gb+2g.10gb+1g.5gb), jobs in arrival order take the largest free slice they fit (one that fits none waits without blocking later ones)",
        build: |p, o| {
            let data = mig_data(p, "mig-static")?;
            let partition = o.text("partition").ok_or_else(|| PolicyError::Missing {
                policy: "mig-static".into(),
                what: "option partition=PROFILE+PROFILE+... (e.g. 3g.20gb+2g.10gb+2g.10gb)".into(),
            })?;
            let policy = crate::miso::MigStatic::new(data, Some(partition.clone()))
                .map_err(|e| bad_partition("mig-static", &partition, e))?;
            Ok(Box::new(policy))
        },
    },
    PolicyInfo {
        name: "sjf-bsbf",
        summary: "SJF-BSBF: SJF, non-preemptive; a job that finds no idle GPUs shares a lone resident's GPUs if the share test says both finish sooner, best benefit first, with gradient accumulation to fit GPU memory; needs --interference (option mode=time-slice|mps)",
        build: |p, o| crate::sjf_bsbf::build(crate::sjf_bsbf::PartnerChoice::BestBenefit, "sjf-bsbf", p, o),
    },
    PolicyInfo {
        name: "sjf-ffs",
        summary: "SJF-FFS: SJF with first-fit sharing: a job that finds no idle GPUs joins the first lone resident it fits beside in GPU memory, no share test; needs --interference (option mode=time-slice|mps)",
        build: |p, o| crate::sjf_bsbf::build(crate::sjf_bsbf::PartnerChoice::FirstFit, "sjf-ffs", p, o),
    },
    PolicyInfo {
        name: "synergy-tune",
        summary: "Synergy TUNE: best-case CPUs/memory per job, else proportional, else shrink co-located jobs to proportional; 300 s rounds (options order=fifo|srtf|las|ftf, round=300s)",
        build: |p, o| crate::synergy::build(crate::synergy::Mechanism::Tune, p, o),
    },
    PolicyInfo {
        name: "synergy-proportional",
        summary: "Synergy's baseline: every job gets GPU-proportional CPUs and memory; 300 s rounds (options order=fifo|srtf|las|ftf, round=300s)",
        build: |p, o| crate::synergy::build(crate::synergy::Mechanism::Proportional, p, o),
    },
    PolicyInfo {
        name: "synergy-greedy",
        summary: "Synergy Greedy: each job its best-case CPUs/memory or it waits (GPUs may idle); 300 s rounds (options order=fifo|srtf|las|ftf, round=300s)",
        build: |p, o| crate::synergy::build(crate::synergy::Mechanism::Greedy, p, o),
    },
    PolicyInfo {
        name: "synergy-opt",
        summary: "Synergy OPT: targets from an LP maximizing total throughput over CPU/memory choices (none below proportional), placed as TUNE; 300 s rounds (options order=fifo|srtf|las|ftf, round=300s)",
        build: |p, o| crate::synergy::build(crate::synergy::Mechanism::Opt, p, o),
    },
    PolicyInfo {
        name: "evalstop",
        summary: "EvalStop wrapper, written evalstop(BASE) around any policy above (plain evalstop: srtf): ends a job after k consecutive declining evaluations, each more than min_drop (options k=2, min_drop=0), keeping its best checkpoint",
        build: |p, o| wrap_evalstop("evalstop", Box::new(Srtf::new(p.placement)), o),
    },
];

/// Wraps `base` in EvalStop with the options `k` and `min_drop`.
fn wrap_evalstop(
    name: &'static str,
    base: Box<dyn Policy>,
    o: &mut Options<'_>,
) -> Result<Box<dyn Policy>, PolicyError> {
    let k = o.u32("k", crate::evalstop::DEFAULT_K)?;
    let max_k = cotenant_core::eval::EVAL_TAIL as u32 - 1;
    if !(1..=max_k).contains(&k) {
        return Err(o.bad(
            "k",
            &k.to_string(),
            format!("must be from 1 to {max_k} (core::eval::EVAL_TAIL - 1)"),
        ));
    }
    let min_drop = o.f64("min_drop", 0.0, 0.0, f64::MAX)?;
    Ok(Box::new(crate::evalstop::EvalStop::new(name, base, k, min_drop)))
}

/// The MIG data a MIG policy needs, or an error saying to pass `--mig`.
fn mig_data(p: &PolicyParams, policy: &str) -> Result<Arc<crate::miso::MigData>, PolicyError> {
    p.mig.clone().ok_or_else(|| PolicyError::Missing {
        policy: policy.into(),
        what: "MIG GPUs and speed-vs-slice curves (run with --mig)".into(),
    })
}

fn bad_partition(policy: &str, value: &str, problem: String) -> PolicyError {
    PolicyError::BadOption { policy: policy.into(), key: "partition".into(), value: value.into(), problem }
}

/// Builds the policy called `name`.
///
/// `evalstop(BASE)` wraps the policy BASE in EvalStop; BASE reads its own
/// options as usual and the wrapper adds its own.
pub fn build(name: &str, params: &PolicyParams) -> Result<Box<dyn Policy>, PolicyError> {
    if let Some(base) = crate::varuna::base_name(name) {
        return build_varuna(name, base, params);
    }
    let wrapped = crate::evalstop::base_name(name);
    let base = wrapped.unwrap_or(name);
    let info = policies()
        .iter()
        .find(|p| p.name == base && !(wrapped.is_some() && p.name == "evalstop"))
        .ok_or_else(|| PolicyError::Unknown {
            name: name.to_string(),
            known: policies().iter().map(|p| p.name).collect::<Vec<_>>().join(", "),
        })?;
    let label = if wrapped.is_some() { crate::evalstop::intern(name) } else { info.name };
    let mut options = Options { policy: label, all: &params.options, used: Vec::new() };
    let mut policy = (info.build)(params, &mut options)?;
    if wrapped.is_some() {
        policy = wrap_evalstop(label, policy, &mut options)?;
    }
    options.finish()?;
    Ok(policy)
}

/// `varuna(BASE)`: BASE wrapped in Varuna morphing and Komet-style migration
/// (crate::varuna; option `lead`, how long before a known departure services move).
fn build_varuna(name: &str, base: &str, params: &PolicyParams) -> Result<Box<dyn Policy>, PolicyError> {
    if !crate::varuna::BASES.contains(&base) {
        return Err(PolicyError::Missing {
            policy: name.into(),
            what: format!(
                "a base policy that reads its running jobs from the view (jobs it morphs hold fewer GPUs than they \
                 asked for, which policies keeping their own running lists do not expect): one of {}",
                crate::varuna::BASES.join(", ")
            ),
        });
    }
    let label = crate::evalstop::intern(name);
    let mut options = Options { policy: label, all: &params.options, used: Vec::new() };
    let lead = options.span("lead", crate::varuna::DEFAULT_LEAD)?;
    let mut inner = params.clone();
    inner.options.remove("lead");
    let base = build(base, &inner)?;
    Ok(Box::new(crate::varuna::Varuna::new(label, base, lead)))
}
