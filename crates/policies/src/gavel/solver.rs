//! A structured log-barrier (interior-point) solver for Gavel's allocation problems.
//!
//! Every Gavel policy optimizes over X[job][type] (time fractions) with the same
//! base constraints:
//! - `x[i][j] >= 0`,
//! - per GPU type: `sum_i scale[i] * x[i][j] <= capacity[j]`,
//! - per job: `sum_j x[i][j] <= 1`,
//!
//! plus, optionally, one linear "floor" row per job (`coef[i] . x[i] >= t` with
//! `t` maximized, or `>= lower[i]` fixed) and a linear objective on `x`.
//!
//! Why not a simplex: these problems have ties (identical jobs, or jobs whose
//! share is not the bottleneck), and which optimum is returned changes the
//! schedule. Gavel solves them with ECOS, an interior-point method, whose
//! answer is (to its tolerance) the limit of the central path: the analytic
//! centre of the optimal face. Following the central path here reproduces that
//! tie-breaking deterministically, and the structure (block-diagonal per job,
//! one rank-one term per GPU type) makes each Newton step O(jobs * types^3), so
//! 10,000 jobs solve in milliseconds. Tests check the optimal values against
//! good_lp's simplex.

/// A per-job lower-bound row.
#[derive(Clone, Copy, Debug)]
pub enum Floor<'a> {
    /// No per-job row.
    None,
    /// Maximize `t` subject to `coef[i] . x[i] >= t` for every job (row-major `coef`).
    MaxMin { coef: &'a [f64] },
    /// `coef[i] . x[i] >= lower[i]` for every job; needs a strictly feasible `start`.
    Bounds { coef: &'a [f64], lower: &'a [f64] },
}

/// One allocation problem. Matrices are row-major `jobs x types`.
#[derive(Clone, Copy, Debug)]
pub struct Problem<'a> {
    pub jobs: usize,
    pub types: usize,
    /// GPUs per unit of `x` (the job's scale factor), per job, > 0.
    pub scale: &'a [f64],
    /// Workers of each type, > 0 (drop types with none before building).
    pub capacity: &'a [f64],
    /// Objective coefficients on `x` (maximized), if any.
    pub linear: Option<&'a [f64]>,
    pub floor: Floor<'a>,
}

/// The central solution.
#[derive(Clone, Debug, PartialEq)]
pub struct Solution {
    /// Row-major `jobs x types`, clipped to [0, 1].
    pub x: Vec<f64>,
    /// The optimal `t` for [`Floor::MaxMin`].
    pub t: Option<f64>,
    pub newton_steps: usize,
}

/// Why a problem has no solution.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SolveError {
    #[error("allocation problem is malformed: {0}")]
    Malformed(&'static str),
    #[error("start point is not strictly feasible")]
    InfeasibleStart,
    #[error("interior-point method did not converge after {0} Newton steps")]
    NoConvergence(usize),
}

/// Duality-gap tolerance, relative to the objective's scale.
const GAP_TOLERANCE: f64 = 1e-9;
/// Barrier weight growth per outer iteration.
const TAU_GROWTH: f64 = 16.0;
/// Newton steps for one barrier weight; Newton needs ~10 from a central start.
const MAX_NEWTON_STEPS_PER_CENTERING: usize = 60;
/// Bound on total Newton steps (STYLE: a limit on everything).
const MAX_NEWTON_STEPS: usize = 2_000;

/// Solves `problem` from the default start (or `start`, required for `Bounds`).
pub fn solve(problem: &Problem<'_>, start: Option<&[f64]>) -> Result<Solution, SolveError> {
    check(problem)?;
    let (m, n) = (problem.jobs, problem.types);
    if m == 0 {
        return Ok(Solution { x: Vec::new(), t: None, newton_steps: 0 });
    }
    let mut state = State::new(problem, start)?;
    let constraints = (m * n + n + m + if matches!(problem.floor, Floor::None) { 0 } else { m }) as f64;
    let has_objective = problem.linear.is_some() || matches!(problem.floor, Floor::MaxMin { .. });
    let mut steps = 0usize;
    if !has_objective {
        steps += state.center(problem, 0.0, MAX_NEWTON_STEPS)?.0;
    } else {
        let mut tau = 1.0;
        loop {
            let budget = MAX_NEWTON_STEPS_PER_CENTERING.min(MAX_NEWTON_STEPS.saturating_sub(steps));
            let (taken, stalled) = state.center(problem, tau, budget)?;
            steps += taken;
            let scale = state.objective(problem).abs().max(1e-3);
            if stalled || constraints / tau < GAP_TOLERANCE * scale {
                break;
            }
            tau *= TAU_GROWTH;
        }
    }
    let t = matches!(problem.floor, Floor::MaxMin { .. }).then_some(state.t);
    Ok(Solution { x: state.x.iter().map(|v| v.clamp(0.0, 1.0)).collect(), t, newton_steps: steps })
}

/// Whether the max-min optimum of `problem` (a [`Floor::MaxMin`]) is at least
/// `threshold`, stopping as soon as the path proves it either way: an interior
/// iterate with `t >= threshold` is a witness; `t + constraints / tau <
/// threshold` bounds the optimum below it (the central path's duality gap).
pub fn max_min_reaches(problem: &Problem<'_>, threshold: f64) -> Result<bool, SolveError> {
    check(problem)?;
    if !matches!(problem.floor, Floor::MaxMin { .. }) {
        return Err(SolveError::Malformed("max_min_reaches needs a MaxMin floor"));
    }
    if problem.jobs == 0 {
        return Ok(true);
    }
    let (m, n) = (problem.jobs, problem.types);
    let constraints = (m * n + n + 2 * m) as f64;
    let mut state = State::new(problem, None)?;
    let mut steps = 0usize;
    let mut tau = 1.0;
    loop {
        let budget = MAX_NEWTON_STEPS_PER_CENTERING.min(MAX_NEWTON_STEPS.saturating_sub(steps));
        let (taken, stalled) = state.center(problem, tau, budget)?;
        steps += taken;
        if state.t >= threshold {
            return Ok(true);
        }
        // The bound holds on the central path; the iterate is (nearly) centred.
        if state.t + 2.0 * constraints / tau < threshold {
            return Ok(false);
        }
        let scale = state.t.abs().max(1e-3);
        if stalled || constraints / tau < GAP_TOLERANCE * scale {
            return Ok(state.t >= threshold * (1.0 - 1e-9));
        }
        tau *= TAU_GROWTH;
    }
}

fn check(p: &Problem<'_>) -> Result<(), SolveError> {
    let cells = p.jobs * p.types;
    if p.types == 0 && p.jobs > 0 {
        return Err(SolveError::Malformed("no GPU types"));
    }
    if p.scale.len() != p.jobs || p.capacity.len() != p.types {
        return Err(SolveError::Malformed("scale or capacity has the wrong length"));
    }
    if p.scale.iter().chain(p.capacity).any(|v| !(v.is_finite() && *v > 0.0)) {
        return Err(SolveError::Malformed("scale and capacity must be finite and > 0"));
    }
    let ok = |v: &[f64]| v.len() == cells && v.iter().all(|c| c.is_finite() && *c >= 0.0);
    if p.linear.is_some_and(|q| !ok(q)) {
        return Err(SolveError::Malformed("objective must be finite, >= 0, one per cell"));
    }
    match p.floor {
        Floor::None => {}
        Floor::MaxMin { coef } | Floor::Bounds { coef, .. } => {
            if !ok(coef) {
                return Err(SolveError::Malformed("floor coefficients must be finite, >= 0, one per cell"));
            }
            if (0..p.jobs).any(|i| coef[i * p.types..(i + 1) * p.types].iter().all(|c| *c == 0.0)) {
                return Err(SolveError::Malformed("a job has all-zero floor coefficients"));
            }
        }
    }
    if let Floor::Bounds { lower, .. } = p.floor {
        if lower.len() != p.jobs || lower.iter().any(|v| !v.is_finite()) {
            return Err(SolveError::Malformed("lower bounds must be finite, one per job"));
        }
    }
    Ok(())
}

/// Iterate of the barrier method.
struct State {
    x: Vec<f64>,
    t: f64,
}

/// Slacks of every constraint at a point.
struct Slacks {
    /// capacity[j] - sum_i scale[i] x[i][j]
    cap: Vec<f64>,
    /// 1 - sum_j x[i][j]
    row: Vec<f64>,
    /// coef[i] . x[i] - (t or lower[i]); empty without a floor.
    floor: Vec<f64>,
}

impl State {
    fn new(p: &Problem<'_>, start: Option<&[f64]>) -> Result<State, SolveError> {
        let (m, n) = (p.jobs, p.types);
        let x = match start {
            Some(x) if x.len() == m * n => x.to_vec(),
            Some(_) => return Err(SolveError::Malformed("start has the wrong length")),
            None => {
                let total_scale: f64 = p.scale.iter().sum();
                let per_type: Vec<f64> =
                    p.capacity.iter().map(|c| (0.5 / n as f64).min(0.5 * c / total_scale)).collect();
                (0..m).flat_map(|_| per_type.iter().copied()).collect()
            }
        };
        let mut state = State { x, t: 0.0 };
        if let Floor::MaxMin { coef } = p.floor {
            let min = (0..m)
                .map(|i| dot(&coef[i * n..(i + 1) * n], &state.x[i * n..(i + 1) * n]))
                .fold(f64::MAX, f64::min);
            state.t = min * 0.5;
        }
        match state.slacks(p) {
            Some(_) => Ok(state),
            None => Err(SolveError::InfeasibleStart),
        }
    }

    fn objective(&self, p: &Problem<'_>) -> f64 {
        let linear = p.linear.map_or(0.0, |q| dot(q, &self.x));
        match p.floor {
            Floor::MaxMin { .. } => linear + self.t,
            _ => linear,
        }
    }

    /// Slacks, or `None` if any is not strictly positive.
    fn slacks(&self, p: &Problem<'_>) -> Option<Slacks> {
        slacks_at(p, &self.x, self.t)
    }

    /// Barrier value: -tau * objective - sum log slacks (None outside the domain).
    fn barrier(p: &Problem<'_>, tau: f64, x: &[f64], t: f64) -> Option<f64> {
        let s = slacks_at(p, x, t)?;
        if x.iter().any(|v| *v <= 0.0) {
            return None;
        }
        let objective = p.linear.map_or(0.0, |q| dot(q, x))
            + if matches!(p.floor, Floor::MaxMin { .. }) { t } else { 0.0 };
        let logs: f64 = x.iter().chain(&s.cap).chain(&s.row).chain(&s.floor).map(|v| v.ln()).sum();
        Some(-tau * objective - logs)
    }

    /// Newton's method on the barrier for a fixed `tau`. Returns the steps
    /// taken and whether it stalled at the limit of double precision.
    fn center(&mut self, p: &Problem<'_>, tau: f64, budget: usize) -> Result<(usize, bool), SolveError> {
        let (m, n) = (p.jobs, p.types);
        let maxmin = matches!(p.floor, Floor::MaxMin { .. });
        for step in 0..budget {
            let s = self.slacks(p).ok_or(SolveError::InfeasibleStart)?;
            let coef = match p.floor {
                Floor::None => None,
                Floor::MaxMin { coef } | Floor::Bounds { coef, .. } => Some(coef),
            };
            // Gradient.
            let mut gx = vec![0.0; m * n];
            for i in 0..m {
                for j in 0..n {
                    let k = i * n + j;
                    let mut g = -1.0 / self.x[k] + p.scale[i] / s.cap[j] + 1.0 / s.row[i];
                    if let Some(c) = coef {
                        g -= c[k] / s.floor[i];
                    }
                    if let Some(q) = p.linear {
                        g -= tau * q[k];
                    }
                    gx[k] = g;
                }
            }
            let gt = if maxmin { -tau + s.floor.iter().map(|o| 1.0 / o).sum::<f64>() } else { 0.0 };
            // Newton direction through the structured Hessian.
            let kkt = Kkt::new(p, &self.x, &s, coef);
            let neg_gx: Vec<f64> = gx.iter().map(|g| -g).collect();
            let (dx, dt) = if maxmin {
                let h: Vec<f64> =
                    (0..m * n).map(|k| -coef.map_or(0.0, |c| c[k]) / s.floor[k / n].powi(2)).collect();
                let htt: f64 = s.floor.iter().map(|o| 1.0 / (o * o)).sum();
                let a = kkt.solve(&neg_gx);
                let b = kkt.solve(&h);
                let denom = htt - dot(&h, &b);
                let dt = (-gt - dot(&h, &a)) / denom;
                let dx: Vec<f64> = a.iter().zip(&b).map(|(a, b)| a - b * dt).collect();
                (dx, dt)
            } else {
                (kkt.solve(&neg_gx), 0.0)
            };
            let decrement = -(dot(&gx, &dx) + gt * dt);
            // A non-finite or negative decrement means the slacks have become
            // too small for double precision: the current interior point is as
            // good as this barrier weight gets.
            if !decrement.is_finite() || decrement / 2.0 < 1e-10 {
                return Ok((step, !decrement.is_finite()));
            }
            // Largest step that keeps every slack positive, then backtracking.
            let mut alpha = self.max_step(p, &dx, dt).min(1.0);
            let current = State::barrier(p, tau, &self.x, self.t).ok_or(SolveError::InfeasibleStart)?;
            loop {
                let x: Vec<f64> = self.x.iter().zip(&dx).map(|(x, d)| x + alpha * d).collect();
                let t = self.t + alpha * dt;
                if let Some(value) = State::barrier(p, tau, &x, t) {
                    if value <= current - 0.25 * alpha * decrement {
                        self.x = x;
                        self.t = t;
                        break;
                    }
                }
                alpha *= 0.5;
                if alpha < 1e-14 {
                    return Ok((step, true));
                }
            }
        }
        // Out of budget at a large barrier weight means rounding noise, not
        // divergence; the point is interior and (nearly) central.
        if tau > 0.0 && budget == MAX_NEWTON_STEPS_PER_CENTERING {
            return Ok((budget, true));
        }
        Err(SolveError::NoConvergence(budget))
    }

    /// 0.99 of the step to the nearest constraint boundary along (dx, dt).
    fn max_step(&self, p: &Problem<'_>, dx: &[f64], dt: f64) -> f64 {
        let (m, n) = (p.jobs, p.types);
        let s = self.slacks(p).expect("current point is interior");
        let mut limit = f64::INFINITY;
        let mut bound = |slack: f64, change: f64| {
            if change < 0.0 {
                limit = limit.min(slack / -change);
            }
        };
        for (x, d) in self.x.iter().zip(dx) {
            bound(*x, *d);
        }
        for j in 0..n {
            bound(s.cap[j], -(0..m).map(|i| p.scale[i] * dx[i * n + j]).sum::<f64>());
        }
        for i in 0..m {
            bound(s.row[i], -dx[i * n..(i + 1) * n].iter().sum::<f64>());
        }
        match p.floor {
            Floor::None => {}
            Floor::MaxMin { coef } => {
                for i in 0..m {
                    bound(s.floor[i], dot(&coef[i * n..(i + 1) * n], &dx[i * n..(i + 1) * n]) - dt);
                }
            }
            Floor::Bounds { coef, .. } => {
                for i in 0..m {
                    bound(s.floor[i], dot(&coef[i * n..(i + 1) * n], &dx[i * n..(i + 1) * n]));
                }
            }
        }
        0.99 * limit
    }
}

fn slacks_at(p: &Problem<'_>, x: &[f64], t: f64) -> Option<Slacks> {
    let (m, n) = (p.jobs, p.types);
    let mut cap = p.capacity.to_vec();
    let mut row = vec![1.0; m];
    for i in 0..m {
        for j in 0..n {
            let v = x[i * n + j];
            if v <= 0.0 {
                return None;
            }
            cap[j] -= p.scale[i] * v;
            row[i] -= v;
        }
    }
    let floor: Vec<f64> = match p.floor {
        Floor::None => Vec::new(),
        Floor::MaxMin { coef } => {
            (0..m).map(|i| dot(&coef[i * n..(i + 1) * n], &x[i * n..(i + 1) * n]) - t).collect()
        }
        Floor::Bounds { coef, lower } => {
            (0..m).map(|i| dot(&coef[i * n..(i + 1) * n], &x[i * n..(i + 1) * n]) - lower[i]).collect()
        }
    };
    let positive = |v: &[f64]| v.iter().all(|s| *s > 0.0);
    (positive(&cap) && positive(&row) && positive(&floor)).then_some(Slacks { cap, row, floor })
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(a, b)| a * b).sum()
}

/// The x-block of the barrier Hessian: block-diagonal per job plus one
/// rank-one term per GPU type, inverted with the Woodbury identity.
struct Kkt<'p> {
    p: &'p Problem<'p>,
    /// Inverse of each job's n x n block, row-major.
    block_inv: Vec<f64>,
    /// Cholesky factor of the n x n capacity Schur complement.
    schur: Vec<f64>,
}

impl<'p> Kkt<'p> {
    fn new(p: &'p Problem<'p>, x: &[f64], s: &Slacks, coef: Option<&[f64]>) -> Kkt<'p> {
        let (m, n) = (p.jobs, p.types);
        let mut block_inv = vec![0.0; m * n * n];
        let mut schur = vec![0.0; n * n];
        for j in 0..n {
            schur[j * n + j] = s.cap[j] * s.cap[j];
        }
        let mut block = vec![0.0; n * n];
        for i in 0..m {
            let r = 1.0 / (s.row[i] * s.row[i]);
            for a in 0..n {
                for b in 0..n {
                    let mut v = r;
                    if let Some(c) = coef {
                        v += c[i * n + a] * c[i * n + b] / (s.floor[i] * s.floor[i]);
                    }
                    if a == b {
                        v += 1.0 / (x[i * n + a] * x[i * n + a]);
                    }
                    block[a * n + b] = v;
                }
            }
            let inv = &mut block_inv[i * n * n..(i + 1) * n * n];
            invert_spd(&block, n, inv);
            let s2 = p.scale[i] * p.scale[i];
            for (acc, v) in schur.iter_mut().zip(inv.iter()) {
                *acc += s2 * v;
            }
        }
        cholesky(&mut schur, n);
        Kkt { p, block_inv, schur }
    }

    /// Solves H_xx d = rhs.
    fn solve(&self, rhs: &[f64]) -> Vec<f64> {
        let (m, n) = (self.p.jobs, self.p.types);
        let y = self.block_solve(rhs);
        let mut u = vec![0.0; n];
        for i in 0..m {
            for j in 0..n {
                u[j] += self.p.scale[i] * y[i * n + j];
            }
        }
        cholesky_solve(&self.schur, n, &mut u);
        let mut correction = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                correction[i * n + j] = self.p.scale[i] * u[j];
            }
        }
        let z = self.block_solve(&correction);
        y.iter().zip(&z).map(|(y, z)| y - z).collect()
    }

    fn block_solve(&self, rhs: &[f64]) -> Vec<f64> {
        let (m, n) = (self.p.jobs, self.p.types);
        let mut out = vec![0.0; m * n];
        for i in 0..m {
            let inv = &self.block_inv[i * n * n..(i + 1) * n * n];
            for a in 0..n {
                out[i * n + a] = (0..n).map(|b| inv[a * n + b] * rhs[i * n + b]).sum();
            }
        }
        out
    }
}

/// In-place Cholesky (lower triangle) of a symmetric positive definite matrix.
fn cholesky(a: &mut [f64], n: usize) {
    for j in 0..n {
        let mut d = a[j * n + j];
        for k in 0..j {
            d -= a[j * n + k] * a[j * n + k];
        }
        let d = d.max(f64::MIN_POSITIVE).sqrt();
        a[j * n + j] = d;
        for i in j + 1..n {
            let mut v = a[i * n + j];
            for k in 0..j {
                v -= a[i * n + k] * a[j * n + k];
            }
            a[i * n + j] = v / d;
        }
    }
}

fn cholesky_solve(l: &[f64], n: usize, b: &mut [f64]) {
    for i in 0..n {
        let mut v = b[i];
        for k in 0..i {
            v -= l[i * n + k] * b[k];
        }
        b[i] = v / l[i * n + i];
    }
    for i in (0..n).rev() {
        let mut v = b[i];
        for k in i + 1..n {
            v -= l[k * n + i] * b[k];
        }
        b[i] = v / l[i * n + i];
    }
}

/// Most GPU types inverted without heap allocation.
const SMALL_TYPES: usize = 8;

fn invert_spd(a: &[f64], n: usize, out: &mut [f64]) {
    if n > SMALL_TYPES {
        let mut l = a.to_vec();
        cholesky(&mut l, n);
        let mut e = vec![0.0; n];
        for col in 0..n {
            e.fill(0.0);
            e[col] = 1.0;
            cholesky_solve(&l, n, &mut e);
            for row in 0..n {
                out[row * n + col] = e[row];
            }
        }
        return;
    }
    let mut l = [0.0; SMALL_TYPES * SMALL_TYPES];
    l[..n * n].copy_from_slice(&a[..n * n]);
    cholesky(&mut l[..n * n], n);
    let mut e = [0.0; SMALL_TYPES];
    for col in 0..n {
        e[..n].fill(0.0);
        e[col] = 1.0;
        cholesky_solve(&l[..n * n], n, &mut e[..n]);
        for row in 0..n {
            out[row * n + col] = e[row];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use good_lp::{constraint, variable, Expression, Solution as _, SolverModel};

    /// The optimal t of max-min via good_lp's simplex, for comparison.
    fn lp_max_min(scale: &[f64], capacity: &[f64], coef: &[f64]) -> f64 {
        let (m, n) = (scale.len(), capacity.len());
        let mut vars = good_lp::variables!();
        let x: Vec<_> = (0..m * n).map(|_| vars.add(variable().min(0.0))).collect();
        let t = vars.add(variable());
        let mut model = vars.maximise(t).using(good_lp::microlp);
        for j in 0..n {
            let used: Expression = (0..m).map(|i| scale[i] * x[i * n + j]).sum();
            model = model.with(constraint!(used <= capacity[j]));
        }
        for i in 0..m {
            let row: Expression = (0..n).map(|j| x[i * n + j]).sum();
            model = model.with(constraint!(row <= 1.0));
            let floor: Expression = (0..n).map(|j| coef[i * n + j] * x[i * n + j]).sum();
            model = model.with(constraint!(floor >= t));
        }
        model.solve().expect("LP solves").value(t)
    }

    fn lcg(seed: &mut u64) -> f64 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((*seed >> 11) as f64) / ((1u64 << 53) as f64)
    }

    #[test]
    fn max_min_matches_simplex_on_random_instances() {
        let mut seed = 7;
        for case in 0..25 {
            let m = 1 + case % 9;
            let n = 1 + case % 3;
            let scale: Vec<f64> =
                (0..m).map(|_| [1.0, 1.0, 2.0, 4.0][(lcg(&mut seed) * 4.0) as usize]).collect();
            let capacity: Vec<f64> = (0..n).map(|_| 1.0 + (lcg(&mut seed) * 6.0).floor()).collect();
            let coef: Vec<f64> = (0..m * n).map(|_| 0.1 + lcg(&mut seed) * 5.0).collect();
            let p = Problem {
                jobs: m,
                types: n,
                scale: &scale,
                capacity: &capacity,
                linear: None,
                floor: Floor::MaxMin { coef: &coef },
            };
            let ours = solve(&p, None).unwrap().t.unwrap();
            let lp = lp_max_min(&scale, &capacity, &coef);
            assert!((ours - lp).abs() <= 1e-6 * lp.max(1.0), "case {case}: barrier {ours} vs simplex {lp}");
        }
    }

    #[test]
    fn ties_resolve_to_the_symmetric_centre() {
        // Three identical jobs, two types of equal value: every job gets the same
        // split, proportional to capacity (the analytic centre), not a vertex.
        let coef = [1.0; 6];
        let p = Problem {
            jobs: 3,
            types: 2,
            scale: &[1.0; 3],
            capacity: &[1.0, 2.0],
            linear: None,
            floor: Floor::MaxMin { coef: &coef },
        };
        let s = solve(&p, None).unwrap();
        assert!((s.t.unwrap() - 1.0).abs() < 1e-7);
        for i in 0..3 {
            assert!((s.x[i * 2] - 1.0 / 3.0).abs() < 1e-5, "{:?}", s.x);
            assert!((s.x[i * 2 + 1] - 2.0 / 3.0).abs() < 1e-5, "{:?}", s.x);
        }
    }

    #[test]
    fn linear_objective_and_bounds() {
        // Max throughput: the fast job takes the fast GPU.
        let q = [10.0, 1.0, 2.0, 1.0];
        let p = Problem {
            jobs: 2,
            types: 2,
            scale: &[1.0; 2],
            capacity: &[1.0, 1.0],
            linear: Some(&q),
            floor: Floor::None,
        };
        let s = solve(&p, None).unwrap();
        assert!(s.x[0] > 0.999 && s.x[3] > 0.999, "{:?}", s.x);
        // Bounds: analytic centre of {x >= 0.2 of type 0 for job 0}.
        let coef = [1.0, 0.0, 0.0, 1.0];
        let lower = [0.2, 0.2];
        let start = [0.3, 0.1, 0.1, 0.3];
        let p = Problem {
            jobs: 2,
            types: 2,
            scale: &[1.0; 2],
            capacity: &[1.0, 1.0],
            linear: None,
            floor: Floor::Bounds { coef: &coef, lower: &lower },
        };
        let s = solve(&p, Some(&start)).unwrap();
        assert!(s.x[0] > 0.2 && s.x[3] > 0.2 && s.x.iter().all(|v| *v > 0.0));
        let bad = [0.1, 0.1, 0.1, 0.1];
        assert_eq!(solve(&p, Some(&bad)).unwrap_err(), SolveError::InfeasibleStart);
    }

    #[test]
    fn malformed_problems_are_errors() {
        let p =
            Problem { jobs: 1, types: 1, scale: &[0.0], capacity: &[1.0], linear: None, floor: Floor::None };
        assert!(matches!(solve(&p, None), Err(SolveError::Malformed(_))));
        let coef = [0.0];
        let p = Problem {
            jobs: 1,
            types: 1,
            scale: &[1.0],
            capacity: &[1.0],
            linear: None,
            floor: Floor::MaxMin { coef: &coef },
        };
        assert!(matches!(solve(&p, None), Err(SolveError::Malformed(_))));
    }
}
