//! Resizing a running elastic job ([`Action::Resize`]): validation and the state change.

use super::{Engine, Violation};
use crate::cluster::has_repeats;
use crate::ids::{GpuId, JobId};
#[cfg(doc)]
use crate::policy::Action;
use crate::policy::JobChange;
use crate::sharing;
use crate::time::Time;

impl Engine {
    /// Why `gpus` cannot become `id`'s new allocation, if it cannot.
    pub(super) fn check_resize(&self, id: JobId, gpus: &[GpuId]) -> Option<Violation> {
        if !self.is_running(id) {
            return Some(Violation::ResizeNotRunning(id));
        }
        let job = self.job(id)?;
        let count = gpus.len() as u32;
        if job.spec.elastic.is_none() || job.partner.is_some() || !job.spec.accepts_gpus(count) {
            return Some(Violation::ResizeNotAllowed { job: id, gpus: count });
        }
        let added: Vec<GpuId> = gpus.iter().copied().filter(|g| !job.gpus.contains(g)).collect();
        if !self.cluster.can_take(&added) || has_repeats(gpus) {
            return Some(Violation::ResizeGpusUnavailable { job: id, gpus: gpus.to_vec() });
        }
        // Added GPUs may be of a type with less memory than the job's first ones.
        if let Some(refusal) = sharing::check_memory(&self.cluster, &added, job.spec.gpu_memory.need_gib(1)) {
            return Some(Violation::ShareRefused { job: id, refusal });
        }
        // While host resources are modelled, the job's CPUs and memory move with its GPUs.
        if let Some(violation) = self.check_host(id, gpus) {
            return Some(violation);
        }
        let tenant = job.spec.tenant;
        let held = self.tenant_gpus[tenant.index()] - job.gpus.len() as u32;
        if self.tenants[tenant.index()].gpu_limit.is_some_and(|limit| held + count > limit) {
            return Some(Violation::ResizeOverTenantLimit { job: id, tenant });
        }
        None
    }

    /// Gives `id` exactly `gpus` (checked by [`Engine::check_resize`]); returns
    /// how many it held before.
    pub(super) fn resize(&mut self, now: Time, id: JobId, gpus: &[GpuId]) -> u32 {
        let job = self.jobs[id.index()].as_mut().expect("running job exists");
        let before = job.gpus.len() as u32;
        job.attained_before_gpu_us += (now - job.gpus_since).0.saturating_mul(u64::from(before));
        job.gpus_since = now;
        job.resizes += 1;
        let dropped: Vec<GpuId> = job.gpus.iter().copied().filter(|g| !gpus.contains(g)).collect();
        let added: Vec<GpuId> = gpus.iter().copied().filter(|g| !job.gpus.contains(g)).collect();
        job.gpus.clear();
        job.gpus.extend_from_slice(gpus);
        self.changes.push(JobChange::Resized(id));
        let tenant = job.spec.tenant.index();
        self.tenant_gpus[tenant] = self.tenant_gpus[tenant] - before + gpus.len() as u32;
        let alloc = job.host;
        self.cluster.release(id, &dropped);
        self.cluster.take(id, &added);
        if self.cluster.host().enabled() {
            let shares = crate::host::node_shares(&self.cluster, gpus, alloc);
            self.cluster.host_mut().release(id);
            self.cluster.host_mut().take(id, shares);
        }
        before
    }
}
