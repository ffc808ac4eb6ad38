//! Dominant Resource Fairness (Ghodsi et al., NSDI'11) over GPUs, CPU cores and
//! host memory, weighted per tenant.
//!
//! A tenant's dominant share is the largest of its shares of the cluster's
//! GPUs, CPUs and memory, divided by its weight. Progressive filling: the
//! tenant with the lowest dominant share starts its oldest waiting job that
//! fits (GPUs placed by the placement stage; CPU and memory checked against what
//! the cluster has left), its share grows, and the next lowest goes; a job that
//! does not fit is skipped for this pass. Non-preemptive.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

use cotenant_core::placement::{FreeMap, Placement};
use cotenant_core::{Action, ClusterView, Decision, JobId, Policy, PolicyCx, WaitReason};

/// Cluster totals and per-tenant usage of the three resources.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Resources {
    pub gpus: f64,
    pub cpus: f64,
    pub memory_gib: f64,
}

impl Resources {
    /// Largest share of `total` this usage takes; resources the cluster lacks are ignored.
    pub fn dominant_share(&self, total: &Resources) -> f64 {
        let share = |used: f64, total: f64| if total > 0.0 { used / total } else { 0.0 };
        share(self.gpus, total.gpus)
            .max(share(self.cpus, total.cpus))
            .max(share(self.memory_gib, total.memory_gib))
    }
}

/// The DRF policy.
#[derive(Debug, Default)]
pub struct Drf {
    pub placement: Placement,
}

/// Orders f64 shares for the heap (they are finite and >= 0).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Share(f64);
impl Eq for Share {}
impl PartialOrd for Share {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Share {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl Policy for Drf {
    fn name(&self) -> &'static str {
        "drf"
    }

    fn schedule(&mut self, _cx: &mut PolicyCx<'_>, view: &ClusterView<'_>) -> Decision {
        let mut total = Resources::default();
        for n in 0..view.cluster.node_count() {
            let node_id = cotenant_core::NodeId(n as u32);
            if view.cluster.is_up(node_id) {
                let node = view.cluster.node(node_id);
                total.gpus += node.gpus as f64;
                total.cpus += node.cpus as f64;
                total.memory_gib += node.memory_gib as f64;
            }
        }
        let mut used = vec![Resources::default(); view.tenants.len()];
        let mut left = total;
        for job in view.running_jobs() {
            let u = &mut used[job.spec.tenant.index()];
            u.gpus += job.spec.gpus as f64;
            u.cpus += job.spec.cpus as f64;
            u.memory_gib += job.spec.memory_gib as f64;
            left.gpus -= job.spec.gpus as f64;
            left.cpus -= job.spec.cpus as f64;
            left.memory_gib -= job.spec.memory_gib as f64;
        }
        let mut queues: BTreeMap<usize, VecDeque<JobId>> = BTreeMap::new();
        for &id in view.pending {
            queues.entry(view.job(id).spec.tenant.index()).or_default().push_back(id);
        }
        let weight = |t: usize| view.tenants[t].weight.max(f64::MIN_POSITIVE);
        let mut heap: BinaryHeap<Reverse<(Share, usize)>> =
            queues.keys().map(|&t| Reverse((Share(used[t].dominant_share(&total) / weight(t)), t))).collect();
        let mut decision = Decision::default();
        let mut free = FreeMap::new(view.cluster);
        while let Some(Reverse((_, t))) = heap.pop() {
            let Some(queue) = queues.get_mut(&t) else { continue };
            let Some(id) = queue.pop_front() else { continue };
            let spec = &view.job(id).spec;
            let (cpus, memory) = (spec.cpus as f64, spec.memory_gib as f64);
            let limit = view.tenants[t].gpu_limit;
            let held = used[t].gpus as u32;
            if limit.is_some_and(|l| held + spec.gpus > l) {
                decision.waiting.push((
                    id,
                    WaitReason::TenantAtLimit { tenant: spec.tenant, held, limit: limit.unwrap_or(0) },
                ));
            } else if (total.cpus > 0.0 && cpus > left.cpus)
                || (total.memory_gib > 0.0 && memory > left.memory_gib)
            {
                decision.waiting.push((id, WaitReason::LowerPriority));
            } else {
                match free.place(spec.gpus, self.placement, |_| true) {
                    Ok(gpus) => {
                        decision.actions.push(Action::Start { job: id, gpus });
                        used[t].gpus += spec.gpus as f64;
                        used[t].cpus += cpus;
                        used[t].memory_gib += memory;
                        left.cpus -= cpus;
                        left.memory_gib -= memory;
                    }
                    Err(reason) => decision.waiting.push((id, reason)),
                }
            }
            if !queue.is_empty() {
                heap.push(Reverse((Share(used[t].dominant_share(&total) / weight(t)), t)));
            }
        }
        decision
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cotenant_core::{Cluster, ClusterSpec, Command, Engine, GpuTypeId, Input, JobSpec, TenantSpec, Time};

    /// The DRF paper's example, in GPUs and CPUs: 9 GPUs and 18 CPUs; tenant A's
    /// jobs need <1 GPU, 4 CPU>, B's <3 GPU, 1 CPU>. DRF gives A 3 jobs and B 2
    /// (dominant shares 2/3 each).
    #[test]
    fn paper_example() {
        let mut spec = ClusterSpec { gpu_types: vec!["g".into()], ..Default::default() };
        spec.add_nodes(GpuTypeId(0), 1, 9, 18, 1000);
        let tenants = vec![TenantSpec::new("A"), TenantSpec::new("B")];
        let mut e = Engine::new(Cluster::new(spec).unwrap(), tenants, Box::new(Drf::default()), 0);
        let mut inputs = Vec::new();
        for i in 0..10u32 {
            let tenant = i % 2;
            let mut j = JobSpec::new(i, tenant, Time::ZERO, if tenant == 0 { 1 } else { 3 }, 100.0);
            j.cpus = if tenant == 0 { 4 } else { 1 };
            inputs.push(Input::JobSubmitted(j.into()));
        }
        let commands = e.step(Time::ZERO, Input::Batch(inputs));
        let started: Vec<u32> = commands
            .iter()
            .filter_map(|c| if let Command::Start { job, .. } = c { Some(job.0 % 2) } else { None })
            .collect();
        assert_eq!(started.iter().filter(|&&t| t == 0).count(), 3);
        assert_eq!(started.iter().filter(|&&t| t == 1).count(), 2);
        assert!(e.violations().is_empty());
    }

    #[test]
    fn weights_scale_dominant_shares() {
        let r = Resources { gpus: 2.0, cpus: 1.0, memory_gib: 0.0 };
        let total = Resources { gpus: 8.0, cpus: 8.0, memory_gib: 0.0 };
        assert_eq!(r.dominant_share(&total), 0.25);
    }
}
