//! SJF-BSBF (2024): shortest job first with "best sharing benefit first" GPU
//! sharing and gradient accumulation; and its baseline SJF-FFS (first-fit sharing).
//!
//! Non-preemptive. Every pass walks the waiting jobs by duration estimate (SJF).
//! A job that fits on idle GPUs runs there alone. Otherwise it may share the GPUs
//! of a running job that holds them alone (at most two jobs per GPU) and asked for
//! as many GPUs (core::sharing explains that restriction), if both fit in the GPUs'
//! memory, with the job's gradient accumulation `k` (1, 2, 4, ...) the smallest
//! that makes them fit. SJF-BSBF shares only when the share test says the pair
//! finishes sooner together than in sequence, and takes the partner with the
//! smallest `t_con`; SJF-FFS takes the first partner that fits (by job id).
//!
//! The share test (PAPERS.md), for a new job `a` and a resident `b`, with
//! `etc = remaining time alone` and `e = xi x etc` (xi from the interference table):
//! `t_con = e_a >= e_b ? 0.5 etc_a + (1 - 1/(2 xi_a)) e_b : 0.5 etc_b + (1 - 1/(2 xi_b)) e_a`,
//! `t_seq = etc_b + 0.5 etc_a`; share iff `t_con < t_seq`. `etc_a` includes the
//! accumulation overhead of the `k` the share needs.

use std::sync::Arc;

use cotenant_core::placement::Placement;
use cotenant_core::sharing::{self, InterferenceTable, MAX_ACCUMULATION};
use cotenant_core::{ClusterView, Decision, JobState, Policy, PolicyCx, Share, SharingMode};

use crate::greedy::{Attempt, StartPass, SCAN_LIMIT};
use crate::queue::WaitQueue;

/// How a waiting job chooses among the residents it could share with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartnerChoice {
    /// SJF-BSBF: only beneficial shares (`t_con < t_seq`), smallest `t_con` first.
    BestBenefit,
    /// SJF-FFS: the first resident that fits in memory, without the share test.
    FirstFit,
}

/// SJF with GPU sharing: SJF-BSBF or SJF-FFS by `choice`.
#[derive(Clone, Debug)]
pub struct SharingSjf {
    pub placement: Placement,
    pub table: Arc<InterferenceTable>,
    pub mode: SharingMode,
    pub choice: PartnerChoice,
    queue: WaitQueue<u64>,
}

impl SharingSjf {
    pub fn new(
        placement: Placement,
        table: Arc<InterferenceTable>,
        mode: SharingMode,
        choice: PartnerChoice,
    ) -> SharingSjf {
        SharingSjf { placement, table, mode, choice, queue: WaitQueue::default() }
    }
}

impl Policy for SharingSjf {
    fn name(&self) -> &'static str {
        match self.choice {
            PartnerChoice::BestBenefit => "sjf-bsbf",
            PartnerChoice::FirstFit => "sjf-ffs",
        }
    }

    fn schedule(&mut self, _cx: &mut PolicyCx<'_>, view: &ClusterView<'_>) -> Decision {
        self.queue.sync(view, |job| job.spec.duration_estimate.map_or(u64::MAX, |d| d.0));
        let mut pass = StartPass::new(view, self.placement);
        // Residents that hold their GPUs alone, in id order; each takes one partner.
        let mut residents: Vec<&JobState> =
            view.running_jobs().filter(|j| j.partner.is_none() && !j.gpus.is_empty()).collect();
        for (_, id) in self.queue.iter().take(SCAN_LIMIT) {
            if pass.try_start(id) != Attempt::Misfit {
                continue;
            }
            let job = view.job(id);
            if let Some((i, accumulation)) = self.choose_partner(view, job, &residents) {
                let partner = residents.remove(i).id();
                pass.push_share(Share { job: id, partner, mode: self.mode, accumulation });
            }
        }
        pass.decision
    }
}

impl SharingSjf {
    /// The resident `job` should share with (index into `residents`) and the
    /// accumulation factor it needs, if any.
    fn choose_partner(
        &self,
        view: &ClusterView<'_>,
        job: &JobState,
        residents: &[&JobState],
    ) -> Option<(usize, u32)> {
        let candidates = residents.iter().enumerate().filter(|(_, r)| r.spec.gpus == job.spec.gpus);
        let mut best: Option<(f64, usize, u32)> = None;
        for (i, resident) in candidates {
            let Some(k) = fitting_accumulation(view, job, resident) else { continue };
            match self.choice {
                PartnerChoice::FirstFit => return Some((i, k)),
                PartnerChoice::BestBenefit => {
                    let Some(test) = self.share_test(view, job, resident, k) else { continue };
                    if test.t_con < test.t_seq && best.is_none_or(|(t, _, _)| test.t_con < t) {
                        best = Some((test.t_con, i, k));
                    }
                }
            }
        }
        best.map(|(_, i, k)| (i, k))
    }

    /// The share test's inputs and outcome for `job` joining `resident` with
    /// accumulation `k`; `None` without estimates or models.
    fn share_test(
        &self,
        view: &ClusterView<'_>,
        job: &JobState,
        resident: &JobState,
        k: u32,
    ) -> Option<ShareTest> {
        let (a, b) = (job.spec.job_type? as usize, resident.spec.job_type? as usize);
        let etc_a = job.remaining_estimate(view.now)?.as_secs_f64() * self.table.accumulation_factor(k);
        let etc_b = resident.remaining_estimate(view.now)?.as_secs_f64()
            * self.table.accumulation_factor(resident.sharing.accumulation);
        let xi_a = self.table.xi(self.mode, a, b)?;
        let xi_b = self.table.xi(self.mode, b, a)?;
        Some(share_test(etc_a, etc_b, xi_a, xi_b))
    }
}

/// The smallest accumulation factor (1, 2, 4, ... up to MAX_ACCUMULATION) with
/// which `job` fits beside `resident` in the memory of the resident's GPUs.
fn fitting_accumulation(view: &ClusterView<'_>, job: &JobState, resident: &JobState) -> Option<u32> {
    let resident_gib = resident.spec.gpu_memory.need_gib(resident.sharing.accumulation);
    let mut k = 1;
    while k <= MAX_ACCUMULATION {
        if sharing::check_share(view.cluster, &resident.gpus, k, job.spec.gpu_memory, resident_gib).is_none()
        {
            return Some(k);
        }
        k *= 2;
    }
    None
}

/// The share test for a new job `a` beside a resident `b` (seconds).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShareTest {
    pub t_con: f64,
    pub t_seq: f64,
}

/// `etc_a`, `etc_b`: remaining times alone; `xi_a = xi(a|b)`, `xi_b = xi(b|a)`.
pub fn share_test(etc_a: f64, etc_b: f64, xi_a: f64, xi_b: f64) -> ShareTest {
    let (e_a, e_b) = (xi_a * etc_a, xi_b * etc_b);
    let t_con = if e_a >= e_b {
        0.5 * etc_a + (1.0 - 1.0 / (2.0 * xi_a)) * e_b
    } else {
        0.5 * etc_b + (1.0 - 1.0 / (2.0 * xi_b)) * e_a
    };
    ShareTest { t_con, t_seq: etc_b + 0.5 * etc_a }
}

/// Options shared by both registry entries.
pub(crate) fn build(
    choice: PartnerChoice,
    policy: &'static str,
    params: &crate::PolicyParams,
    options: &mut crate::registry::Options<'_>,
) -> Result<Box<dyn Policy>, crate::PolicyError> {
    let mode = match options.choice("mode", &["time-slice", "mps"])? {
        "mps" => SharingMode::Mps,
        _ => SharingMode::TimeSlice,
    };
    let Some(table) = params.interference.clone() else {
        return Err(crate::PolicyError::Missing {
            policy: policy.into(),
            what: "an interference table (--interference FILE)".into(),
        });
    };
    Ok(Box::new(SharingSjf::new(params.placement, table, mode, choice)))
}
