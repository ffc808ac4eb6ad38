//! Throughput tables: steps per second of a job type on each GPU type, alone or co-located.
//!
//! A job type is a model with a batch size (`ResNet-18 (batch size 64)`) run at a
//! scale factor (its GPU count). For each GPU type the table may hold:
//! - the consolidated rate (all GPUs of the job on one server),
//! - the unconsolidated rate (the job spans servers),
//! - for co-location (space sharing: two jobs on the same GPUs), the pair of
//!   rates `[own, other]` when running next to another job type.
//!
//! Rates are the job's total steps per second (all its GPUs together). A rate of
//! 0.0 means the job cannot run there (out of memory, in Gavel's measurements).
//! The table is plain data: readers live in `cotenant-trace`, users in policies
//! and the simulator's rate model.

use std::collections::BTreeMap;

/// A job type: model and batch size, at a scale factor (number of GPUs).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JobTypeKey {
    pub model: String,
    pub scale_factor: u32,
}

impl JobTypeKey {
    pub fn new(model: impl Into<String>, scale_factor: u32) -> JobTypeKey {
        JobTypeKey { model: model.into(), scale_factor }
    }
}

impl std::fmt::Display for JobTypeKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "('{}', {})", self.model, self.scale_factor)
    }
}

/// Rates of two co-located jobs, in steps per second.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PairRates {
    /// The job the entry belongs to.
    pub own_steps_per_s: f64,
    /// Its partner.
    pub other_steps_per_s: f64,
}

/// What the table knows about one job type on one GPU type.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TypeRates {
    pub consolidated_steps_per_s: Option<f64>,
    pub unconsolidated_steps_per_s: Option<f64>,
    pub colocated: BTreeMap<JobTypeKey, PairRates>,
}

/// Steps per second per (job type, scale factor) per GPU type.
///
/// GPU types are kept in the order they were first inserted; lookups by name
/// are exact (`"v100"`, not `"V100"`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ThroughputTable {
    gpu_types: Vec<String>,
    entries: BTreeMap<JobTypeKey, Vec<TypeRates>>,
}

impl ThroughputTable {
    pub fn new() -> ThroughputTable {
        ThroughputTable::default()
    }

    /// GPU type names, in insertion order.
    pub fn gpu_types(&self) -> &[String] {
        &self.gpu_types
    }

    pub fn gpu_type_index(&self, name: &str) -> Option<usize> {
        self.gpu_types.iter().position(|t| t == name)
    }

    /// Index of a GPU type, adding it if new.
    pub fn add_gpu_type(&mut self, name: &str) -> usize {
        match self.gpu_type_index(name) {
            Some(i) => i,
            None => {
                self.gpu_types.push(name.to_string());
                for rates in self.entries.values_mut() {
                    rates.push(TypeRates::default());
                }
                self.gpu_types.len() - 1
            }
        }
    }

    /// Job types with at least one entry, in key order.
    pub fn job_types(&self) -> impl Iterator<Item = &JobTypeKey> {
        self.entries.keys()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn slot(&mut self, key: &JobTypeKey, gpu_type: &str) -> &mut TypeRates {
        let index = self.add_gpu_type(gpu_type);
        let types = self.gpu_types.len();
        let rates = self.entries.entry(key.clone()).or_insert_with(|| vec![TypeRates::default(); types]);
        &mut rates[index]
    }

    pub fn set_consolidated(&mut self, key: &JobTypeKey, gpu_type: &str, steps_per_s: f64) {
        self.slot(key, gpu_type).consolidated_steps_per_s = Some(steps_per_s);
    }

    pub fn set_unconsolidated(&mut self, key: &JobTypeKey, gpu_type: &str, steps_per_s: f64) {
        self.slot(key, gpu_type).unconsolidated_steps_per_s = Some(steps_per_s);
    }

    /// Records the rates of `key` when co-located with `other` (`own` is `key`'s).
    pub fn set_colocated(&mut self, key: &JobTypeKey, other: &JobTypeKey, gpu_type: &str, rates: PairRates) {
        self.slot(key, gpu_type).colocated.insert(other.clone(), rates);
    }

    /// What is known about `key` on the GPU type at index `gpu_type`, for a
    /// reader to fill in: created empty on every type if `key` is new (as the
    /// setters do), without copying the key when it is not. `gpu_type` must be
    /// an index [`ThroughputTable::add_gpu_type`] returned.
    pub fn type_rates_mut(&mut self, key: &JobTypeKey, gpu_type: usize) -> &mut TypeRates {
        if !self.entries.contains_key(key) {
            self.entries.insert(key.clone(), vec![TypeRates::default(); self.gpu_types.len()]);
        }
        let rates = self.entries.get_mut(key).expect("inserted above");
        &mut rates[gpu_type]
    }

    /// Everything known about `key` on the GPU type at `gpu_type` index.
    pub fn rates(&self, key: &JobTypeKey, gpu_type: usize) -> Option<&TypeRates> {
        self.entries.get(key)?.get(gpu_type)
    }

    /// Steps per second with all GPUs on one server.
    pub fn consolidated(&self, key: &JobTypeKey, gpu_type: usize) -> Option<f64> {
        self.rates(key, gpu_type)?.consolidated_steps_per_s
    }

    /// Steps per second when the job spans servers; falls back to the
    /// consolidated rate when the table has no separate entry.
    pub fn unconsolidated(&self, key: &JobTypeKey, gpu_type: usize) -> Option<f64> {
        let rates = self.rates(key, gpu_type)?;
        rates.unconsolidated_steps_per_s.or(rates.consolidated_steps_per_s)
    }

    /// Rates of `key` next to `other` on the same GPUs, if measured.
    pub fn colocated(&self, key: &JobTypeKey, other: &JobTypeKey, gpu_type: usize) -> Option<PairRates> {
        self.rates(key, gpu_type)?.colocated.get(other).copied()
    }

    /// Consolidated rate looked up by names.
    pub fn get(&self, model: &str, scale_factor: u32, gpu_type: &str) -> Option<f64> {
        let index = self.gpu_type_index(gpu_type)?;
        self.consolidated(&JobTypeKey::new(model, scale_factor), index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_by_index_and_name() {
        let mut t = ThroughputTable::new();
        let a = JobTypeKey::new("ResNet-18 (batch size 64)", 1);
        let b = JobTypeKey::new("LM (batch size 10)", 1);
        t.set_consolidated(&a, "k80", 4.0);
        t.set_consolidated(&a, "v100", 12.0);
        t.set_unconsolidated(&a, "v100", 10.0);
        t.set_colocated(&a, &b, "v100", PairRates { own_steps_per_s: 7.0, other_steps_per_s: 3.0 });
        assert_eq!(t.gpu_types(), ["k80", "v100"]);
        assert_eq!(t.get("ResNet-18 (batch size 64)", 1, "v100"), Some(12.0));
        assert_eq!(t.unconsolidated(&a, 1), Some(10.0));
        assert_eq!(t.unconsolidated(&a, 0), Some(4.0), "falls back to consolidated");
        assert_eq!(t.colocated(&a, &b, 1).map(|p| p.own_steps_per_s), Some(7.0));
        assert_eq!(t.colocated(&a, &b, 0), None);
        assert_eq!(t.get("ResNet-18 (batch size 64)", 2, "v100"), None);
        assert_eq!(a.to_string(), "('ResNet-18 (batch size 64)', 1)");
    }

    #[test]
    fn adding_a_gpu_type_late_extends_every_entry() {
        let mut t = ThroughputTable::new();
        let a = JobTypeKey::new("A3C", 1);
        t.set_consolidated(&a, "k80", 1.0);
        t.set_consolidated(&JobTypeKey::new("CycleGAN", 1), "p100", 2.0);
        assert_eq!(t.consolidated(&a, 1), None);
        assert_eq!(t.rates(&a, 1), Some(&TypeRates::default()));
    }
}
