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

use std::collections::{BTreeMap, HashMap};

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
///
/// Co-location rates are kept by partner id (see [`ThroughputTable::partner_id`]):
/// ids are the table's own, so pairs are read through the table
/// ([`ThroughputTable::colocated`], [`ThroughputTable::pairs`]); comparing two
/// `TypeRates` of different tables compares ids, not keys (the tables'
/// `PartialEq` compares keys).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TypeRates {
    pub consolidated_steps_per_s: Option<f64>,
    pub unconsolidated_steps_per_s: Option<f64>,
    /// Rates by partner id (a lookup is an index, not a search); `None` where
    /// not measured, and empty until a pair is recorded.
    colocated: Vec<Option<PairRates>>,
}

impl TypeRates {
    /// Records the rates next to the partner with id `partner` (from
    /// [`ThroughputTable::partner_id`] of the table this belongs to), returning
    /// the rates it replaces, as a map's `insert` does.
    pub fn insert_pair(&mut self, partner: u32, rates: PairRates) -> Option<PairRates> {
        let at = partner as usize;
        if at >= self.colocated.len() {
            self.colocated.resize(at + 1, None);
        }
        self.colocated[at].replace(rates)
    }

    /// The rates next to the partner with id `partner`, if measured.
    pub fn pair(&self, partner: u32) -> Option<PairRates> {
        self.colocated.get(partner as usize).copied().flatten()
    }

    /// Room for partner ids below `partners` without growing.
    pub fn reserve_pairs(&mut self, partners: usize) {
        self.colocated.reserve_exact(partners.saturating_sub(self.colocated.len()));
    }
}

/// Steps per second per (job type, scale factor) per GPU type.
///
/// GPU types are kept in the order they were first inserted; lookups by name
/// are exact (`"v100"`, not `"V100"`). Each job type named as a co-location
/// partner has an id (in the order first named), so that a pair entry holds a
/// number, not a copy of the partner's key. Two tables are equal when they
/// hold the same rates for the same keys, whatever their ids.
#[derive(Clone, Debug, Default)]
pub struct ThroughputTable {
    gpu_types: Vec<String>,
    entries: BTreeMap<JobTypeKey, Vec<TypeRates>>,
    /// Partner keys by id, and ids by key.
    partners: Vec<JobTypeKey>,
    /// A fixed (seeded, not random) fast hash: keys are the table's own.
    partner_ids: HashMap<JobTypeKey, u32, foldhash::fast::FixedState>,
}

impl PartialEq for ThroughputTable {
    fn eq(&self, other: &ThroughputTable) -> bool {
        self.gpu_types == other.gpu_types
            && self.entries.len() == other.entries.len()
            && self.entries.iter().zip(&other.entries).all(|((ka, ra), (kb, rb))| {
                ka == kb
                    && ra.len() == rb.len()
                    && ra.iter().zip(rb).enumerate().all(|(t, (a, b))| {
                        a.consolidated_steps_per_s == b.consolidated_steps_per_s
                            && a.unconsolidated_steps_per_s == b.unconsolidated_steps_per_s
                            && self.pairs(ka, t).collect::<BTreeMap<_, _>>()
                                == other.pairs(kb, t).collect::<BTreeMap<_, _>>()
                    })
            })
    }
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
        let id = self.partner_id(other);
        self.slot(key, gpu_type).insert_pair(id, rates);
    }

    /// The id of partner `key`, given it the first time (ids count up from 0
    /// in the order partners are first named).
    pub fn partner_id(&mut self, key: &JobTypeKey) -> u32 {
        if let Some(&id) = self.partner_ids.get(key) {
            return id;
        }
        let id = u32::try_from(self.partners.len()).expect("fewer than 2^32 partners");
        self.partners.push(key.clone());
        self.partner_ids.insert(key.clone(), id);
        id
    }

    /// The id of partner `key`, if some entry names it.
    pub fn find_partner(&self, key: &JobTypeKey) -> Option<u32> {
        self.partner_ids.get(key).copied()
    }

    /// The pairs of `key` on the GPU type at index `gpu_type`: each partner's key
    /// and rates, in partner id order.
    pub fn pairs(&self, key: &JobTypeKey, gpu_type: usize) -> impl Iterator<Item = (&JobTypeKey, PairRates)> {
        let pairs = self.rates(key, gpu_type).map_or(&[][..], |r| &r.colocated[..]);
        pairs.iter().zip(&self.partners).filter_map(|(rates, key)| Some((key, (*rates)?)))
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
        let rates = self.rates(key, gpu_type)?;
        rates.pair(self.find_partner(other)?)
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

    proptest::proptest! {
        /// Pairs kept by partner id answer as a map by key does (the plain
        /// model, the table's old form), whatever the order partners are named
        /// and set in, rewrites included; two tables filled in different orders
        /// are equal exactly when their maps are.
        #[test]
        fn pairs_by_id_are_a_map_by_key(
            writes in proptest::collection::vec((0u32..3, 0u32..6, 0usize..2, 0u32..100), 0..40),
            shuffle in proptest::collection::vec(proptest::num::usize::ANY, 40),
        ) {
            let key = |k: u32| JobTypeKey::new(["A", "B", "C (x, y)", "D", "E", "F"][k as usize % 6], 1 + k % 2);
            let gpus = ["k80", "v100"];
            let mut table = ThroughputTable::new();
            let mut plain: BTreeMap<(JobTypeKey, usize), BTreeMap<JobTypeKey, PairRates>> = BTreeMap::new();
            for &(own, other, gpu, x) in &writes {
                let rates = PairRates { own_steps_per_s: f64::from(x), other_steps_per_s: 0.5 };
                table.set_colocated(&key(own), &key(other), gpus[gpu], rates);
                plain.entry((key(own), gpu)).or_default().insert(key(other), rates);
            }
            for own in 0..3 {
                for (gpu, name) in gpus.iter().enumerate() {
                    let t = table.gpu_type_index(name).unwrap_or(9);
                    for other in 0..6 {
                        let want = plain.get(&(key(own), gpu)).and_then(|m| m.get(&key(other))).copied();
                        proptest::prop_assert_eq!(table.colocated(&key(own), &key(other), t), want);
                    }
                    // Each partner once.
                    let want = plain.get(&(key(own), gpu)).map_or(0, |m| m.len());
                    proptest::prop_assert_eq!(table.pairs(&key(own), t).count(), want);
                }
            }
            // The same writes, the last of each (own, other, gpu) kept, in another order.
            let mut last: BTreeMap<(u32, u32, usize), u32> = BTreeMap::new();
            for &(own, other, gpu, x) in &writes {
                last.insert((own, other, gpu), x);
            }
            let mut order: Vec<_> = last.into_iter().collect();
            for (i, &s) in shuffle.iter().enumerate().take(order.len()) {
                let j = s % order.len();
                order.swap(i, j);
            }
            let mut other_table = ThroughputTable::new();
            for g in table.gpu_types() {
                other_table.add_gpu_type(g);
            }
            for &((own, other, gpu), x) in &order {
                let rates = PairRates { own_steps_per_s: f64::from(x), other_steps_per_s: 0.5 };
                other_table.set_colocated(&key(own), &key(other), gpus[gpu], rates);
            }
            proptest::prop_assert!(table == other_table);
            if let Some(&((own, other, gpu), x)) = order.first() {
                let rates = PairRates { own_steps_per_s: f64::from(x) + 1.0, other_steps_per_s: 0.5 };
                other_table.set_colocated(&key(own), &key(other), gpus[gpu], rates);
                proptest::prop_assert!(table != other_table);
            }
        }
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
