//! The engine's MIG actions: reconfigure a GPU's partition, start a job in an
//! instance (or under MPS), and release a job's instance when it stops. Each is
//! validated against [`crate::mig`]'s geometry; a refused one is a `Violation`.

use super::{Command, Engine, Violation};
use crate::ids::{GpuId, JobId, NodeId};
use crate::mig::{MigLayout, MigRefusal, MigSlot, MigTarget};
use crate::time::Time;

impl Engine {
    /// Replaces the GPU's layout. Allowed only when no job runs in an instance
    /// that the new layout removes (a policy preempts those jobs in the same
    /// decision: stops apply first) and no whole-GPU job holds the GPU.
    pub(super) fn mig_reconfigure(&mut self, gpu: GpuId, layout: MigLayout) {
        let refuse = |refusal| Violation::MigRefused { job: None, gpu, refusal };
        let Some(mig) = self.mig.as_ref() else {
            self.violations.push(refuse(MigRefusal::NotMig));
            return;
        };
        if gpu.index() >= mig.gpu_count() {
            self.violations.push(refuse(MigRefusal::NotMig));
            return;
        }
        if self.cluster.owner(gpu).is_some() {
            self.violations.push(refuse(MigRefusal::HeldWhole));
            return;
        }
        match mig.check_reconfigure(gpu, &layout) {
            Ok(()) => {
                if let Some(mig) = self.mig.as_mut() {
                    mig.set_layout(gpu, layout);
                }
            }
            Err(refusal) => self.violations.push(refuse(refusal)),
        }
    }

    /// Starts a pending single-GPU job in an instance (or under MPS) of `gpu`.
    pub(super) fn mig_start(
        &mut self,
        now: Time,
        job: JobId,
        gpu: GpuId,
        target: MigTarget,
        commands: &mut Vec<Command>,
    ) {
        let refuse = |refusal| Violation::MigRefused { job: Some(job), gpu, refusal };
        if let Some(violation) = self.check_admission(job, 1) {
            self.violations.push(violation);
            return;
        }
        let Some(mig) = self.mig.as_ref().filter(|m| gpu.index() < m.gpu_count()) else {
            self.violations.push(refuse(MigRefusal::NotMig));
            return;
        };
        if !self.cluster.is_up(self.cluster.node_of(gpu)) || self.cluster.owner(gpu).is_some() {
            self.violations.push(refuse(MigRefusal::HeldWhole));
            return;
        }
        let place = match mig.check_start(gpu, target) {
            Ok(place) => place,
            Err(refusal) => {
                self.violations.push(refuse(refusal));
                return;
            }
        };
        // A MIG job holds no whole GPU: its instance is on `JobState::mig`.
        self.start(now, job, &[]);
        if let Some(mig) = self.mig.as_mut() {
            let peers = mig.occupy(gpu, job, place);
            self.set_mps_sharers(gpu, &peers, peers.len() as u32 + 1);
            self.rerate.extend(peers);
        }
        if let Some(state) = self.job_mut(job) {
            state.mig = Some(MigSlot { gpu, place });
        }
        commands.push(Command::Start { job, gpus: Vec::new() });
    }

    /// Frees the job's instance (or MPS seat) if it had one; the MPS jobs left
    /// on the GPU run faster now and are re-rated.
    pub(super) fn leave_mig(&mut self, id: JobId) {
        let Some(slot) = self.job_mut(id).and_then(|s| s.mig.take()) else { return };
        let Some(mig) = self.mig.as_mut() else { return };
        let peers = mig.release(slot.gpu, id);
        self.set_mps_sharers(slot.gpu, &peers, peers.len() as u32);
        self.rerate.extend(peers);
    }

    fn set_mps_sharers(&mut self, gpu: GpuId, jobs: &[JobId], sharers: u32) {
        for &job in jobs {
            if let Some(state) = self.job_mut(job) {
                state.mig = Some(MigSlot { gpu, place: crate::mig::MigPlace::Mps { sharers } });
            }
        }
    }

    /// Whether any of `gpus` is set up for MIG or MPS (no whole-GPU start there).
    pub(super) fn mig_configured(&self, gpus: &[GpuId]) -> bool {
        self.mig.as_ref().is_some_and(|m| gpus.iter().any(|&g| m.is_configured(g)))
    }

    /// MIG and MPS jobs on a node's GPUs.
    pub(super) fn mig_jobs_on(&self, node: NodeId) -> Vec<JobId> {
        let Some(mig) = self.mig.as_ref() else { return Vec::new() };
        let gpus = (0..self.cluster.node(node).gpus).map(|slot| self.cluster.gpu(node, slot));
        let mut jobs = mig.jobs_on(gpus);
        jobs.sort_unstable();
        jobs
    }
}
