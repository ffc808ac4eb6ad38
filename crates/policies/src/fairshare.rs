//! Slurm's classic multifactor fair share: `F = 2^(-U_E / S)` per user (here:
//! per tenant) on an account tree, with usage decayed by a half-life.
//!
//! - `S`, the normalized share: the product down the tree of each node's
//!   shares over the shares of it and its siblings.
//! - `U`, normalized usage: decayed GPU-seconds of the node's subtree over the
//!   cluster total.
//! - `U_E`, effective usage: `U` for accounts directly under the root; below,
//!   `U_E(child) = U(child) + (U_E(parent) - U(child)) * shares(child) / shares(child and siblings)`.
//!
//! The policy orders waiting jobs by their tenant's F (highest first), then by
//! arrival, and starts every job that fits (non-preemptive, like Slurm's
//! priority queue with backfill of jobs that fit now).

use std::collections::HashMap;

use cotenant_core::placement::Placement;
use cotenant_core::{ClusterView, Decision, JobId, Policy, PolicyCx, Span, Time};

use crate::greedy::start_in_order;

/// Slurm's default `PriorityDecayHalfLife`: 7 days.
pub const DEFAULT_HALF_LIFE: Span = Span(7 * 24 * 3600 * cotenant_core::MICROS_PER_SECOND);

/// One node of the account tree: an account, or a user (tenant) leaf.
#[derive(Clone, Debug, PartialEq)]
pub struct Account {
    pub name: String,
    /// Index of the parent; `None` for nodes directly under the root.
    pub parent: Option<usize>,
    /// Raw shares (> 0), relative to siblings.
    pub shares: f64,
}

/// A tree that cannot be built.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum AccountTreeError {
    #[error("account '{0}' is defined twice")]
    Duplicate(String),
    #[error("account '{account}' names parent '{parent}', which is not defined")]
    UnknownParent { account: String, parent: String },
    #[error("account '{0}': shares must be finite and >= 0")]
    BadShares(String),
    #[error("account '{0}' is its own ancestor")]
    Cycle(String),
}

/// Accounts and users with shares, parents before children.
///
/// Every operation is linear in the number of nodes (a 20,000-node tree, wide or
/// a single deep chain, computes its factors in about a millisecond): building
/// resolves parents through a name index and depths by memoized walks, and
/// `factors` is one pass back to front for subtree usage and one front to back
/// for shares and effective usage.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AccountTree {
    nodes: Vec<Account>,
    /// Node index by name (lookups only; never iterated, so order cannot leak).
    index: HashMap<String, usize>,
}

impl AccountTree {
    /// Builds a tree from `(name, parent name, shares)` in any order.
    pub fn from_specs(specs: &[(String, Option<String>, f64)]) -> Result<AccountTree, AccountTreeError> {
        let mut by_name: HashMap<&str, usize> = HashMap::with_capacity(specs.len());
        for (i, (name, _, shares)) in specs.iter().enumerate() {
            if by_name.insert(name.as_str(), i).is_some() {
                return Err(AccountTreeError::Duplicate(name.clone()));
            }
            if !(shares.is_finite() && *shares >= 0.0) {
                return Err(AccountTreeError::BadShares(name.clone()));
            }
        }
        let parent_of: Vec<Option<usize>> = specs
            .iter()
            .map(|(name, parent, _)| match parent {
                None => Ok(None),
                Some(p) => by_name.get(p.as_str()).copied().map(Some).ok_or_else(|| {
                    AccountTreeError::UnknownParent { account: name.clone(), parent: p.clone() }
                }),
            })
            .collect::<Result<_, _>>()?;
        let depth = depths(&parent_of).map_err(|i| AccountTreeError::Cycle(specs[i].0.clone()))?;
        // Order parents before children (depth, then input order).
        let mut order: Vec<usize> = (0..specs.len()).collect();
        order.sort_by_key(|&i| (depth[i], i));
        let mut position = vec![0usize; specs.len()];
        for (new, &old) in order.iter().enumerate() {
            position[old] = new;
        }
        let nodes: Vec<Account> = order
            .iter()
            .map(|&old| Account {
                name: specs[old].0.clone(),
                parent: parent_of[old].map(|p| position[p]),
                shares: specs[old].2,
            })
            .collect();
        Ok(AccountTree::with_nodes(nodes))
    }

    fn with_nodes(nodes: Vec<Account>) -> AccountTree {
        let index = nodes.iter().enumerate().map(|(i, n)| (n.name.clone(), i)).collect();
        AccountTree { nodes, index }
    }

    /// Every tenant directly under the root with its weight as shares.
    pub fn flat(tenants: &[(String, f64)]) -> AccountTree {
        AccountTree::with_nodes(
            tenants
                .iter()
                .map(|(name, weight)| Account { name: name.clone(), parent: None, shares: *weight })
                .collect(),
        )
    }

    pub fn nodes(&self) -> &[Account] {
        &self.nodes
    }

    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// Adds a node directly under the root (a tenant the config did not name).
    pub fn add_root_child(&mut self, name: &str, shares: f64) -> usize {
        self.nodes.push(Account { name: name.to_string(), parent: None, shares });
        let i = self.nodes.len() - 1;
        self.index.entry(name.to_string()).or_insert(i);
        i
    }

    /// Fair-share factor of every node, given each node's own (not subtree)
    /// usage; accounts usually have none of their own, users do.
    pub fn factors(&self, own_usage: &[f64]) -> Vec<f64> {
        let n = self.nodes.len();
        // Subtree usage: children come after parents, so sum back to front.
        let mut usage: Vec<f64> = (0..n).map(|i| own_usage.get(i).copied().unwrap_or(0.0)).collect();
        for i in (0..n).rev() {
            if let Some(p) = self.nodes[i].parent {
                usage[p] += usage[i];
            }
        }
        let total: f64 = (0..n).filter(|&i| self.nodes[i].parent.is_none()).map(|i| usage[i]).sum();
        let normalized: Vec<f64> = usage.iter().map(|u| if total > 0.0 { u / total } else { 0.0 }).collect();
        // Shares of each node and its siblings, summed per parent in index order
        // (the same additions, in the same order, as a per-node scan would make).
        let mut root_children_shares = -0.0;
        let mut children_shares = vec![-0.0; n];
        for node in &self.nodes {
            match node.parent {
                None => root_children_shares += node.shares,
                Some(p) => children_shares[p] += node.shares,
            }
        }
        let mut share = vec![0.0; n];
        let mut effective = vec![0.0; n];
        let mut factor = vec![0.0; n];
        for i in 0..n {
            let siblings = self.nodes[i].parent.map_or(root_children_shares, |p| children_shares[p]);
            let local = if siblings > 0.0 { self.nodes[i].shares / siblings } else { 0.0 };
            match self.nodes[i].parent {
                None => {
                    share[i] = local;
                    effective[i] = normalized[i];
                }
                Some(p) => {
                    share[i] = share[p] * local;
                    effective[i] = normalized[i] + (effective[p] - normalized[i]) * local;
                }
            }
            factor[i] = if share[i] > 0.0 { 2f64.powf(-effective[i] / share[i]) } else { 0.0 };
        }
        factor
    }
}

/// Depth of every node (0 directly under the root), each node visited once:
/// a walk up stops at the first node whose depth is known. `Err(i)`: node `i`
/// (the first in input order whose walk loops) is its own ancestor or below one.
fn depths(parent_of: &[Option<usize>]) -> Result<Vec<usize>, usize> {
    const UNKNOWN: usize = usize::MAX;
    const ON_PATH: usize = usize::MAX - 1;
    let mut depth = vec![UNKNOWN; parent_of.len()];
    let mut path: Vec<usize> = Vec::new();
    for start in 0..parent_of.len() {
        let mut at = start;
        let base = loop {
            match depth[at] {
                ON_PATH => return Err(start),
                UNKNOWN => {
                    depth[at] = ON_PATH;
                    path.push(at);
                    match parent_of[at] {
                        None => break 0,
                        Some(p) => at = p,
                    }
                }
                known => break known + 1,
            }
        };
        // `path` holds the walk from `start` up; the last pushed is the shallowest.
        for (k, &node) in path.iter().rev().enumerate() {
            depth[node] = base + k;
        }
        path.clear();
    }
    Ok(depth)
}

/// The fair-share policy.
#[derive(Debug)]
pub struct FairShare {
    placement: Placement,
    half_life: Span,
    tree: Option<AccountTree>,
    /// Tree node of each tenant (resolved on first use).
    leaf: Vec<usize>,
    /// Decayed GPU-seconds per tree node.
    usage: Vec<f64>,
    last_update: Option<Time>,
}

impl FairShare {
    /// `tree`: the account tree (tenants are its leaves, matched by name);
    /// `None` puts every tenant under the root with its weight as shares.
    pub fn new(placement: Placement, half_life: Span, tree: Option<AccountTree>) -> FairShare {
        FairShare { placement, half_life, tree, leaf: Vec::new(), usage: Vec::new(), last_update: None }
    }

    fn resolve(&mut self, view: &ClusterView<'_>) {
        if self.leaf.len() == view.tenants.len() {
            return;
        }
        let mut tree = self.tree.take().unwrap_or_default();
        self.leaf = view
            .tenants
            .iter()
            .map(|t| tree.index_of(&t.name).unwrap_or_else(|| tree.add_root_child(&t.name, t.weight)))
            .collect();
        self.usage.resize(tree.nodes().len(), 0.0);
        self.tree = Some(tree);
    }

    /// Decays usage to `now` and charges the GPUs held since the last update.
    fn charge(&mut self, view: &ClusterView<'_>) {
        let elapsed_s = self.last_update.map_or(0.0, |t| (view.now - t).as_secs_f64());
        self.last_update = Some(view.now);
        let held: Vec<(usize, u32)> =
            view.tenant_gpus.iter().enumerate().map(|(t, &g)| (self.leaf[t], g)).collect();
        decay_and_charge(&mut self.usage, &held, elapsed_s, self.half_life.as_secs_f64());
    }
}

/// Decays `usage` by `elapsed_s` at `half_life_s` (0: no decay) and adds the
/// decayed integral of `gpus` held by each node over that time.
fn decay_and_charge(usage: &mut [f64], held: &[(usize, u32)], elapsed_s: f64, half_life_s: f64) {
    if elapsed_s <= 0.0 {
        return;
    }
    let (decay, integral) = if half_life_s > 0.0 {
        let decay = 0.5f64.powf(elapsed_s / half_life_s);
        (decay, (1.0 - decay) * half_life_s / std::f64::consts::LN_2)
    } else {
        (1.0, elapsed_s)
    };
    for u in usage.iter_mut() {
        *u *= decay;
    }
    for &(node, gpus) in held {
        usage[node] += gpus as f64 * integral;
    }
}

impl Policy for FairShare {
    fn name(&self) -> &'static str {
        "fair-share"
    }

    fn schedule(&mut self, _cx: &mut PolicyCx<'_>, view: &ClusterView<'_>) -> Decision {
        self.resolve(view);
        self.charge(view);
        let factors = self.tree.as_ref().map(|t| t.factors(&self.usage)).unwrap_or_default();
        let mut order: Vec<(f64, JobId)> = view
            .pending
            .iter()
            .map(|&id| (factors[self.leaf[view.job(id).spec.tenant.index()]], id))
            .collect();
        order.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let smallest = view.pending_jobs().map(|j| j.spec.gpus).min();
        start_in_order(view, order.into_iter().map(|(_, id)| id), self.placement, false, smallest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, parent: Option<&str>, shares: f64) -> (String, Option<String>, f64) {
        (name.to_string(), parent.map(str::to_string), shares)
    }

    /// Slurm's documented example (PAPERS.md, Part 1).
    #[test]
    fn slurm_golden_example() {
        let tree = AccountTree::from_specs(&[
            spec("user1", Some("B"), 1.0),
            spec("A", None, 40.0),
            spec("D", None, 60.0),
            spec("B", Some("A"), 30.0),
            spec("C", Some("A"), 10.0),
            spec("E", Some("D"), 25.0),
            spec("F", Some("D"), 35.0),
            spec("user2", Some("C"), 1.0),
            spec("user3", Some("C"), 1.0),
            spec("user4", Some("E"), 1.0),
            spec("user5", Some("F"), 1.0),
        ])
        .unwrap();
        let mut usage = vec![0.0; tree.nodes().len()];
        for (user, u) in [("user1", 0.2), ("user2", 0.25), ("user3", 0.0), ("user4", 0.25), ("user5", 0.0)] {
            usage[tree.index_of(user).unwrap()] = u;
        }
        let factors = factors_with_total(&tree, &usage, 1.0);
        let expected =
            [("user1", 0.408479), ("user2", 0.022097), ("user3", 0.125), ("user4", 0.5), ("user5", 0.749154)];
        for (user, f) in expected {
            let got = factors[tree.index_of(user).unwrap()];
            assert!((got - f).abs() < 1e-6, "{user}: {got} vs {f}");
        }
    }

    /// The example gives usage already normalized by the cluster total (1.0),
    /// with the rest of the usage belonging to users outside the tree.
    fn factors_with_total(tree: &AccountTree, usage: &[f64], total: f64) -> Vec<f64> {
        let mut tree = tree.clone();
        let mut usage = usage.to_vec();
        let used: f64 = usage.iter().sum();
        let other = tree.add_root_child("others", 0.0);
        usage.resize(tree.nodes().len(), 0.0);
        usage[other] = total - used;
        tree.factors(&usage)
    }

    #[test]
    fn the_tenant_that_used_less_goes_first() {
        use cotenant_core::{Cluster, ClusterSpec, Command, Engine, Input, JobId, JobSpec, TenantSpec};
        let tenants = vec![TenantSpec::new("heavy"), TenantSpec::new("light")];
        let policy = FairShare::new(Placement::Consolidated, DEFAULT_HALF_LIFE, None);
        let mut e = Engine::new(
            Cluster::new(ClusterSpec::homogeneous("v100", 1, 2)).unwrap(),
            tenants,
            Box::new(policy),
            0,
        );
        // heavy holds both GPUs for an hour; then each tenant queues one job.
        e.step(
            Time::ZERO,
            Input::Batch(vec![Input::JobSubmitted(JobSpec::new(0, 0, Time::ZERO, 2, 3600.0).into())]),
        );
        let t = Time::from_secs(3600);
        e.step(
            t,
            Input::Batch(vec![
                Input::JobSubmitted(JobSpec::new(1, 0, t, 2, 100.0).into()),
                Input::JobSubmitted(JobSpec::new(2, 1, t, 2, 100.0).into()),
            ]),
        );
        let commands = e.step(t, Input::JobFinished { job: JobId(0) });
        assert_eq!(
            commands,
            vec![Command::Start {
                job: JobId(2),
                gpus: vec![cotenant_core::GpuId(0), cotenant_core::GpuId(1)]
            }]
        );
    }

    type Spec = (String, Option<String>, f64);

    /// The quadratic computation this module used before it became linear: the
    /// oracle the linear one must match bit for bit.
    fn factors_reference(tree: &AccountTree, own_usage: &[f64]) -> Vec<f64> {
        let nodes = tree.nodes();
        let n = nodes.len();
        let mut usage: Vec<f64> = (0..n).map(|i| own_usage.get(i).copied().unwrap_or(0.0)).collect();
        for i in (0..n).rev() {
            if let Some(p) = nodes[i].parent {
                usage[p] += usage[i];
            }
        }
        let total: f64 = (0..n).filter(|&i| nodes[i].parent.is_none()).map(|i| usage[i]).sum();
        let normalized: Vec<f64> = usage.iter().map(|u| if total > 0.0 { u / total } else { 0.0 }).collect();
        let mut share = vec![0.0; n];
        let mut effective = vec![0.0; n];
        let mut factor = vec![0.0; n];
        for i in 0..n {
            let parent = nodes[i].parent;
            let siblings: f64 = nodes.iter().filter(|m| m.parent == parent).map(|m| m.shares).sum();
            let local = if siblings > 0.0 { nodes[i].shares / siblings } else { 0.0 };
            match parent {
                None => {
                    share[i] = local;
                    effective[i] = normalized[i];
                }
                Some(p) => {
                    share[i] = share[p] * local;
                    effective[i] = normalized[i] + (effective[p] - normalized[i]) * local;
                }
            }
            factor[i] = if share[i] > 0.0 { 2f64.powf(-effective[i] / share[i]) } else { 0.0 };
        }
        factor
    }

    /// The ordering of the quadratic builder: depth by walking up from each node.
    fn order_reference(specs: &[(String, Option<String>, f64)]) -> Vec<String> {
        let parent = |i: usize| {
            specs[i].1.as_ref().map(|p| specs.iter().position(|s| &s.0 == p).expect("parent exists"))
        };
        let depth = |i: usize| {
            let (mut d, mut at) = (0, parent(i));
            while let Some(p) = at {
                d += 1;
                at = parent(p);
            }
            d
        };
        let mut order: Vec<usize> = (0..specs.len()).collect();
        order.sort_by_key(|&i| (depth(i), i));
        order.into_iter().map(|i| specs[i].0.clone()).collect()
    }

    /// Random trees: node `i` hangs under one of nodes `0..i` or the root, given in a
    /// shuffled order, with shares (some zero) and usage (some zero).
    fn random_tree() -> impl proptest::strategy::Strategy<Value = (Vec<Spec>, Vec<f64>)> {
        use proptest::prelude::*;
        (1usize..40)
            .prop_flat_map(|n| {
                (
                    proptest::collection::vec((0usize..=n, 0u32..5, 0u32..4), n),
                    Just(n),
                    proptest::collection::vec(0u32..1000, n),
                )
            })
            .prop_map(|(raw, n, perm_keys)| {
                let specs: Vec<(String, Option<String>, f64)> = raw
                    .iter()
                    .enumerate()
                    .map(|(i, &(p, shares, _))| {
                        let parent = if i == 0 || p >= i { None } else { Some(format!("n{p}")) };
                        (format!("n{i}"), parent, f64::from(shares))
                    })
                    .collect();
                let mut order: Vec<usize> = (0..n).collect();
                order.sort_by_key(|&i| (perm_keys[i], i));
                let shuffled: Vec<_> = order.iter().map(|&i| specs[i].clone()).collect();
                let usage = raw.iter().map(|&(_, _, u)| f64::from(u) * 1.5).collect();
                (shuffled, usage)
            })
    }

    proptest::proptest! {
        #[test]
        fn linear_factors_match_the_quadratic_oracle((specs, usage) in random_tree()) {
            let tree = AccountTree::from_specs(&specs).unwrap();
            let names: Vec<String> = tree.nodes().iter().map(|n| n.name.clone()).collect();
            proptest::prop_assert_eq!(names, order_reference(&specs));
            let fast = tree.factors(&usage);
            let slow = factors_reference(&tree, &usage);
            let fast_bits: Vec<u64> = fast.iter().map(|f| f.to_bits()).collect();
            let slow_bits: Vec<u64> = slow.iter().map(|f| f.to_bits()).collect();
            proptest::prop_assert_eq!(fast_bits, slow_bits);
        }
    }

    #[test]
    fn deep_chains_and_wide_trees_build() {
        let chain: Vec<_> = (0..5_000)
            .rev()
            .map(|i| (format!("a{i}"), (i > 0).then(|| format!("a{}", i - 1)), 1.0))
            .collect();
        let tree = AccountTree::from_specs(&chain).unwrap();
        assert_eq!(tree.nodes()[0].name, "a0");
        assert_eq!(tree.nodes()[4_999].parent, Some(4_998));
        let mut usage = vec![0.0; 5_000];
        usage[4_999] = 1.0;
        assert_eq!(tree.factors(&usage)[4_999], 0.5, "one user alone, all usage: 2^-1");
        let mut ring = chain.clone();
        ring[4_999].1 = Some("a4999".into());
        assert_eq!(AccountTree::from_specs(&ring), Err(AccountTreeError::Cycle("a4999".into())));
    }

    #[test]
    fn trees_reject_bad_input() {
        assert_eq!(
            AccountTree::from_specs(&[spec("a", Some("zz"), 1.0)]),
            Err(AccountTreeError::UnknownParent { account: "a".into(), parent: "zz".into() })
        );
        assert_eq!(
            AccountTree::from_specs(&[spec("a", None, 1.0), spec("a", None, 1.0)]),
            Err(AccountTreeError::Duplicate("a".into()))
        );
        assert_eq!(
            AccountTree::from_specs(&[spec("a", Some("b"), 1.0), spec("b", Some("a"), 1.0)]),
            Err(AccountTreeError::Cycle("a".into()))
        );
        assert_eq!(
            AccountTree::from_specs(&[spec("a", None, f64::NAN)]),
            Err(AccountTreeError::BadShares("a".into()))
        );
    }

    #[test]
    fn unused_tenants_rank_first_and_usage_decays() {
        let tree = AccountTree::flat(&[("a".into(), 1.0), ("b".into(), 1.0)]);
        let f = tree.factors(&[10.0, 0.0]);
        assert!(f[1] > f[0]);
        assert_eq!(f[1], 1.0);
        let mut usage = vec![8.0, 0.0];
        decay_and_charge(&mut usage, &[(0, 0), (1, 2)], 100.0, 100.0);
        assert!((usage[0] - 4.0).abs() < 1e-9, "one half-life halves usage");
        // 2 GPUs for 100 s, decayed: 2 * 100 / ln 2 * (1 - 1/2) = 144.27 GPU-s.
        assert!((usage[1] - 144.269_504).abs() < 1e-3, "{usage:?}");
    }
}
