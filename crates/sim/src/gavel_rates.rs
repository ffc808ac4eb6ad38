//! Heterogeneity-aware rates from a Gavel-style throughput table.
//!
//! A job's rate (work units = training steps, per second) is looked up by its
//! job type (`JobSpec::job_type` names a model and batch size), its scale factor
//! (GPU count) and the GPU type it runs on, the way Gavel's simulator does:
//! - alone: the isolated (`"null"`) rate. With [`Consolidation::ByPlacement`] a
//!   job spread over several servers gets the table's `<type>_unconsolidated`
//!   rate (when present). Gavel's simulator (commit c4fa400) always uses the
//!   consolidated rate, whatever the placement: [`Consolidation::Always`].
//! - co-located with a partner on the same GPUs: the own half of the measured
//!   pair `[own, other]`. A pair the table lacks is time-sliced: each job gets
//!   the isolated rate divided by the number of jobs sharing.

use std::sync::Arc;

use cotenant_core::JobSpec;
use cotenant_perf::throughput::{JobTypeKey, ThroughputTable};

use crate::rates::{Placed, RateModel};

/// Which isolated rate a multi-server job gets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Consolidation {
    /// The consolidated rate whatever the placement (Gavel's simulator).
    #[default]
    Always,
    /// The unconsolidated rate when the job's GPUs span more than one node.
    ByPlacement,
}

/// A workload the table cannot give rates for.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum GavelRatesError {
    #[error("job {job} has no job type; a throughput table needs one")]
    NoJobType { job: u32 },
    #[error("job {job} names job type #{index}, but the workload lists {known}")]
    UnknownJobType { job: u32, index: u32, known: usize },
    #[error("cluster GPU type '{gpu_type}' is not in the throughput table (it has: {known})")]
    UnknownGpuType { gpu_type: String, known: String },
    #[error("throughput table has no rate for {key} on {gpu_type} (job {job})")]
    MissingRate { key: String, gpu_type: String, job: u32 },
}

/// One job type's isolated rates: (scale factor, per table GPU type
/// `[consolidated, unconsolidated]`) for each scale factor the table has.
type AloneRates = Vec<(u32, Vec<[Option<f64>; 2]>)>;

/// Rates from a throughput table for one workload on one cluster.
#[derive(Clone, Debug)]
pub struct GavelRates {
    /// Shared with the policies (one copy of the table per run).
    table: Arc<ThroughputTable>,
    job_types: Vec<String>,
    /// Table GPU type index of each cluster GPU type (by `GpuTypeId`).
    table_type_of: Vec<Option<usize>>,
    consolidation: Consolidation,
    /// Each workload job type's isolated rates, by scale factor: (scale factor,
    /// per table GPU type `[consolidated, unconsolidated]` as the table's
    /// getters give them), read once here so that a rate costs no key (a
    /// `String` copy) and no tree search of the table.
    alone: Vec<AloneRates>,
}

impl GavelRates {
    /// `job_types` are the workload's job-type names; `cluster_gpu_types` the
    /// cluster's GPU type names (matched to the table's ignoring ASCII case).
    pub fn new(
        table: impl Into<Arc<ThroughputTable>>,
        job_types: Vec<String>,
        cluster_gpu_types: &[String],
        consolidation: Consolidation,
    ) -> Result<GavelRates, GavelRatesError> {
        let table = table.into();
        let mut table_type_of = Vec::with_capacity(cluster_gpu_types.len());
        for name in cluster_gpu_types {
            let index = table.gpu_types().iter().position(|t| t.eq_ignore_ascii_case(name));
            if index.is_none() {
                return Err(GavelRatesError::UnknownGpuType {
                    gpu_type: name.clone(),
                    known: table.gpu_types().join(", "),
                });
            }
            table_type_of.push(index);
        }
        let alone = job_types
            .iter()
            .map(|model| {
                table
                    .job_types()
                    .filter(|key| key.model == *model)
                    .map(|key| {
                        let rates = (0..table.gpu_types().len())
                            .map(|t| [table.consolidated(key, t), table.unconsolidated(key, t)])
                            .collect();
                        (key.scale_factor, rates)
                    })
                    .collect()
            })
            .collect();
        Ok(GavelRates { table, job_types, table_type_of, consolidation, alone })
    }

    /// Checks that every job has an isolated rate on every cluster GPU type,
    /// so that [`RateModel::rate`] never has to guess.
    pub fn check_jobs<'a>(&self, jobs: impl IntoIterator<Item = &'a JobSpec>) -> Result<(), GavelRatesError> {
        for job in jobs {
            let key = self.key(job)?;
            for (cluster_type, table_type) in self.table_type_of.iter().enumerate() {
                let Some(t) = *table_type else { continue };
                if self.table.consolidated(&key, t).is_none() {
                    let gpu_type =
                        self.table.gpu_types().get(t).cloned().unwrap_or_else(|| cluster_type.to_string());
                    return Err(GavelRatesError::MissingRate {
                        key: key.to_string(),
                        gpu_type,
                        job: job.id.0,
                    });
                }
            }
        }
        Ok(())
    }

    fn key(&self, job: &JobSpec) -> Result<JobTypeKey, GavelRatesError> {
        let index = job.job_type.ok_or(GavelRatesError::NoJobType { job: job.id.0 })?;
        let model = self.job_types.get(index as usize).ok_or(GavelRatesError::UnknownJobType {
            job: job.id.0,
            index,
            known: self.job_types.len(),
        })?;
        Ok(JobTypeKey::new(model.clone(), job.gpus.max(1)))
    }

    pub fn table(&self) -> &ThroughputTable {
        &self.table
    }
}

impl GavelRates {
    /// The plain [`RateModel::rate`] (a key and table lookups per call), which
    /// the cached one is checked against in tests.
    #[cfg(test)]
    fn rate_plain(&self, job: &JobSpec, placed: &Placed<'_>) -> f64 {
        let (gpus, partners, cluster) = (placed.gpus, placed.partners, placed.cluster);
        let (Some(&first), Ok(key)) = (gpus.first(), self.key(job)) else { return 0.0 };
        let Some(Some(t)) = self.table_type_of.get(cluster.gpu_type_of(first).index()).copied() else {
            return 0.0;
        };
        let spans_nodes = gpus.iter().any(|&g| cluster.node_of(g) != cluster.node_of(first));
        let isolated = if spans_nodes && self.consolidation == Consolidation::ByPlacement {
            self.table.unconsolidated(&key, t)
        } else {
            self.table.consolidated(&key, t)
        }
        .unwrap_or(0.0);
        match partners {
            [] => isolated,
            [partner] => match self.key(partner).ok().and_then(|other| self.table.colocated(&key, &other, t))
            {
                Some(pair) => pair.own_steps_per_s,
                None => isolated / 2.0,
            },
            many => isolated / (many.len() + 1) as f64,
        }
    }
}

impl RateModel for GavelRates {
    fn rate(&self, job: &JobSpec, placed: &Placed<'_>) -> f64 {
        let (gpus, partners, cluster) = (placed.gpus, placed.partners, placed.cluster);
        // `key` succeeds exactly when the job names one of the workload's types.
        let (Some(&first), Some(by_scale)) =
            (gpus.first(), job.job_type.and_then(|t| self.alone.get(t as usize)))
        else {
            return 0.0;
        };
        let Some(Some(t)) = self.table_type_of.get(cluster.gpu_type_of(first).index()).copied() else {
            return 0.0;
        };
        let spans_nodes = gpus.iter().any(|&g| cluster.node_of(g) != cluster.node_of(first));
        let scale = job.gpus.max(1);
        let [consolidated, unconsolidated] = by_scale
            .iter()
            .find(|(sf, _)| *sf == scale)
            .and_then(|(_, rates)| rates.get(t).copied())
            .unwrap_or([None, None]);
        let isolated = if spans_nodes && self.consolidation == Consolidation::ByPlacement {
            unconsolidated
        } else {
            consolidated
        }
        .unwrap_or(0.0);
        match partners {
            [] => isolated,
            [partner] => {
                let pair = self.key(job).ok().zip(self.key(partner).ok());
                match pair.and_then(|(key, other)| self.table.colocated(&key, &other, t)) {
                    Some(pair) => pair.own_steps_per_s,
                    None => isolated / 2.0,
                }
            }
            many => isolated / (many.len() + 1) as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cotenant_core::{Cluster, ClusterSpec, GpuId, GpuTypeId, Time};
    use cotenant_perf::throughput::PairRates;

    fn placed<'a>(gpus: &'a [GpuId], partners: &'a [&'a JobSpec], cluster: &'a Cluster) -> Placed<'a> {
        Placed { gpus, partners, state: None, cluster }
    }

    fn table() -> ThroughputTable {
        let mut t = ThroughputTable::new();
        let a1 = JobTypeKey::new("A", 1);
        let a2 = JobTypeKey::new("A", 2);
        let b1 = JobTypeKey::new("B", 1);
        t.set_consolidated(&a1, "k80", 2.0);
        t.set_consolidated(&a1, "v100", 8.0);
        t.set_consolidated(&a2, "v100", 15.0);
        t.set_unconsolidated(&a2, "v100", 12.0);
        t.set_consolidated(&a2, "k80", 3.0);
        t.set_consolidated(&b1, "v100", 5.0);
        t.set_consolidated(&b1, "k80", 1.0);
        t.set_colocated(&a1, &b1, "v100", PairRates { own_steps_per_s: 6.0, other_steps_per_s: 3.0 });
        t
    }

    /// Two 2-GPU V100 nodes (ids 0..4) and one 2-GPU K80 node (ids 4..6).
    fn cluster() -> Cluster {
        let mut spec = ClusterSpec { gpu_types: vec!["V100".into(), "k80".into()], ..Default::default() };
        spec.add_nodes(GpuTypeId(0), 2, 2, 8, 64);
        spec.add_nodes(GpuTypeId(1), 1, 2, 8, 64);
        Cluster::new(spec).unwrap()
    }

    fn job(id: u32, job_type: u32, gpus: u32) -> JobSpec {
        let mut j = JobSpec::new(id, 0, Time::ZERO, gpus, 1000.0);
        j.job_type = Some(job_type);
        j
    }

    #[test]
    fn rates_by_type_placement_and_partner() {
        let c = cluster();
        let names = vec!["A".to_string(), "B".to_string()];
        let by_placement =
            GavelRates::new(table(), names.clone(), &c.spec().gpu_types, Consolidation::ByPlacement).unwrap();
        let always = GavelRates::new(table(), names, &c.spec().gpu_types, Consolidation::Always).unwrap();
        let (a1, a2, b1) = (job(0, 0, 1), job(1, 0, 2), job(2, 1, 1));
        assert_eq!(always.rate(&a1, &placed(&[GpuId(0)], &[], &c)), 8.0);
        assert_eq!(always.rate(&a1, &placed(&[GpuId(4)], &[], &c)), 2.0);
        assert_eq!(by_placement.rate(&a2, &placed(&[GpuId(0), GpuId(1)], &[], &c)), 15.0);
        assert_eq!(by_placement.rate(&a2, &placed(&[GpuId(1), GpuId(2)], &[], &c)), 12.0, "spans two nodes");
        assert_eq!(always.rate(&a2, &placed(&[GpuId(1), GpuId(2)], &[], &c)), 15.0);
        assert_eq!(always.rate(&a1, &placed(&[GpuId(0)], &[&b1], &c)), 6.0);
        assert_eq!(always.rate(&b1, &placed(&[GpuId(0)], &[&a1], &c)), 2.5, "no pair entry: time-sliced");
        always.check_jobs([&a1, &a2, &b1]).unwrap();
    }

    /// The rates read once at construction give, bit for bit, what the plain
    /// lookups give: every job type (and one past the workload's, and none),
    /// scale factor 0-3, every placement on one or two GPUs (within a node and
    /// across nodes and types), alone, with each partner and with two, under
    /// both consolidation rules. A seeded bug (the unconsolidated rate taken
    /// whenever the rule is `ByPlacement` or the GPUs span nodes) fails it.
    #[test]
    fn cached_rates_are_the_plain_lookups() {
        let c = cluster();
        let names = vec!["A".to_string(), "B".to_string(), "C".to_string()];
        let mut jobs = Vec::new();
        for job_type in [Some(0), Some(1), Some(2), Some(3), None] {
            for gpus in 0..4 {
                let mut j = job(jobs.len() as u32, 0, gpus);
                j.job_type = job_type;
                jobs.push(j);
            }
        }
        let placements: Vec<Vec<GpuId>> = (0..6)
            .flat_map(|a| (0..6).map(move |b| if a == b { vec![GpuId(a)] } else { vec![GpuId(a), GpuId(b)] }))
            .chain([vec![]])
            .collect();
        for consolidation in [Consolidation::Always, Consolidation::ByPlacement] {
            let rates = GavelRates::new(table(), names.clone(), &c.spec().gpu_types, consolidation).unwrap();
            for j in &jobs {
                for gpus in &placements {
                    let mut partner_sets: Vec<Vec<&JobSpec>> = vec![vec![]];
                    partner_sets.extend(jobs.iter().map(|p| vec![p]));
                    partner_sets.push(vec![&jobs[0], &jobs[5]]);
                    for partners in &partner_sets {
                        let at = placed(gpus, partners, &c);
                        assert_eq!(
                            rates.rate(j, &at).to_bits(),
                            rates.rate_plain(j, &at).to_bits(),
                            "{j:?} on {gpus:?} with {partners:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn unknown_types_are_errors() {
        let c = cluster();
        let err = GavelRates::new(table(), vec![], &["h100".to_string()], Consolidation::Always).unwrap_err();
        assert!(err.to_string().contains("'h100'"));
        let rates =
            GavelRates::new(table(), vec!["C".into()], &c.spec().gpu_types, Consolidation::Always).unwrap();
        let err = rates.check_jobs([&job(3, 0, 1)]).unwrap_err();
        assert_eq!(err.to_string(), "throughput table has no rate for ('C', 1) on v100 (job 3)");
        assert!(matches!(rates.check_jobs([&job(4, 5, 1)]), Err(GavelRatesError::UnknownJobType { .. })));
    }
}
