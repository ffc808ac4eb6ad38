//! Speed of jobs on MIG GPUs: a job's speed-versus-slice curve read at the
//! instance it runs in (`JobState::mig`, reached through `Placed::state`), or
//! at its MPS share while its GPU is profiling. Work units are seconds on a
//! whole GPU (7g), so a job alone on 7g runs at 1.
//!
//! The reconfiguration cost (MISO's ~30 s checkpoint and restart) is the
//! world's restore overhead (`Overheads::restore_overhead`, `--restore-overhead`,
//! 30 s by default), which every restart into MPS or a new instance pays.

use cotenant_core::mig::MigPlace;
use cotenant_core::JobSpec;
use cotenant_perf::slice_speed::SliceCurve;

use crate::rates::{Placed, RateModel};

/// Rates from speed-versus-slice curves, one per job type.
#[derive(Clone, Debug)]
pub struct MigRates {
    curves: Vec<SliceCurve>,
    linear: SliceCurve,
}

impl MigRates {
    /// `curves[t]` is job type `t`'s curve; a job without one scales linearly with slices.
    pub fn new(curves: Vec<SliceCurve>) -> MigRates {
        MigRates { curves, linear: SliceCurve::linear() }
    }

    fn curve(&self, job: &JobSpec) -> &SliceCurve {
        job.job_type.and_then(|t| self.curves.get(t as usize)).unwrap_or(&self.linear)
    }
}

impl RateModel for MigRates {
    fn rate(&self, job: &JobSpec, placed: &Placed<'_>) -> f64 {
        match placed.state.and_then(|s| s.mig).map(|slot| slot.place) {
            Some(MigPlace::Instance { compute_slices, .. }) => self.curve(job).speed(compute_slices),
            Some(MigPlace::Mps { sharers }) => self.curve(job).mps_speed(sharers),
            // A whole GPU without MIG: 7g speed.
            None => 1.0,
        }
    }
}
