//! Fair-share factors on large account trees: a wide tree (200 accounts of 99
//! users each, 20,000 nodes) and a single deep chain of 20,000 accounts.
//!
//! ```console
//! $ cargo run --release -p cotenant-policies --example fairshare_scale
//! ```
//!
//! Prints the time to build each tree and to compute its factors once (the
//! policy computes them on every scheduling pass). A measurement, not a test:
//! STYLE.md keeps timings out of the test suite.

use std::time::Instant;

use cotenant_policies::fairshare::AccountTree;

const NODES: usize = 20_000;

fn wide() -> Vec<(String, Option<String>, f64)> {
    let accounts = 200;
    let mut specs: Vec<_> = (0..accounts).map(|a| (format!("acct{a}"), None, 1.0 + (a % 7) as f64)).collect();
    for u in 0..NODES - accounts {
        specs.push((format!("user{u}"), Some(format!("acct{}", u % accounts)), 1.0 + (u % 3) as f64));
    }
    specs
}

fn chain() -> Vec<(String, Option<String>, f64)> {
    // Given leaf first, so that parents come after their children in the input.
    (0..NODES).rev().map(|i| (format!("a{i}"), (i > 0).then(|| format!("a{}", i - 1)), 1.0)).collect()
}

fn measure(label: &str, specs: &[(String, Option<String>, f64)]) {
    let started = Instant::now();
    let tree = match AccountTree::from_specs(specs) {
        Ok(tree) => tree,
        Err(error) => {
            eprintln!("{label}: {error}");
            std::process::exit(1);
        }
    };
    let build_ms = started.elapsed().as_secs_f64() * 1e3;
    let usage: Vec<f64> = (0..tree.nodes().len()).map(|i| (i % 13) as f64).collect();
    let started = Instant::now();
    let factors = tree.factors(&usage);
    let factors_ms = started.elapsed().as_secs_f64() * 1e3;
    let checksum: f64 = factors.iter().sum();
    println!(
        "{label:>6}: {} nodes, build {build_ms:.2} ms, factors {factors_ms:.2} ms (sum of factors {checksum:.6})",
        tree.nodes().len()
    );
}

fn main() {
    measure("wide", &wide());
    measure("chain", &chain());
}
