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
/// Newton steps for one barrier weight; Newton needs ~10 from a central start.
const MAX_NEWTON_STEPS_PER_CENTERING: usize = 60;
/// Barrier weight growth per outer iteration.
const TAU_GROWTH: f64 = 16.0;
/// Bound on total Newton steps (STYLE: a limit on everything).
const MAX_NEWTON_STEPS: usize = 2_000;
/// The primal-dual phase hands over to the barrier at this relative gap.
const HANDOVER_GAP: f64 = 1e-6;
/// Bound on primal-dual iterations (STYLE: a limit on everything); they take 15-40.
const MAX_IPM_ITERATIONS: usize = 200;
/// Dual infeasibility accepted at the optimum, relative to the objective's size.
const DUAL_TOLERANCE: f64 = 1e-7;
/// Fraction of the step to the boundary an iterate may take.
const STEP_TO_BOUNDARY: f64 = 0.99;

/// Solves `problem` from the default start (or `start`, required for `Bounds`).
///
/// With an objective: Mehrotra's primal-dual predictor-corrector (what ECOS
/// runs), the primal iterate kept strictly feasible; each iteration factors
/// the structured Hessian once and solves with it three times. Without one
/// (a `Bounds` floor alone): the analytic centre, by damped Newton on the
/// log barrier.
pub fn solve(problem: &Problem<'_>, start: Option<&[f64]>) -> Result<Solution, SolveError> {
    solve_with(problem, start, true, true)
}

/// [`solve`], with the barrier finish's reuse of the accepted trial's slacks
/// and its line search's early stop at a trial equal to the current point
/// (see [`State::center`]) each on or off (the tests check that all give the
/// same bits).
fn solve_with(
    problem: &Problem<'_>,
    start: Option<&[f64]>,
    reuse_slacks: bool,
    stop_when_stuck: bool,
) -> Result<Solution, SolveError> {
    check(problem)?;
    let m = problem.jobs;
    if m == 0 {
        return Ok(Solution { x: Vec::new(), t: None, newton_steps: 0 });
    }
    let mut state = State::new(problem, start)?;
    let mut work = Work::new(problem);
    work.reuse_slacks = reuse_slacks;
    work.stop_when_stuck = stop_when_stuck;
    let has_objective = problem.linear.is_some() || matches!(problem.floor, Floor::MaxMin { .. });
    let steps = if has_objective {
        let constraints = constraint_count(problem) as f64;
        let (mut steps, gap) = state.primal_dual(problem, &mut work)?;
        // Some of the primal-dual phase's exits leave `work.s` at another point.
        work.s_current = false;
        // Finish on the central path of the log barrier from the barrier weight
        // the primal-dual iterate is close to: its limit is the analytic centre
        // of the optimal face, and its Newton steps stay accurate where the
        // primal-dual weights y/s no longer do.
        let mut tau = (constraints / gap.max(f64::MIN_POSITIVE)).max(1.0);
        loop {
            let budget = MAX_NEWTON_STEPS_PER_CENTERING.min(MAX_NEWTON_STEPS.saturating_sub(steps));
            let (taken, stalled) = state.center(problem, &mut work, tau, budget)?;
            steps += taken;
            let scale = state.objective(problem).abs().max(1e-3);
            if stalled || constraints / tau < GAP_TOLERANCE * scale {
                break;
            }
            tau *= TAU_GROWTH;
        }
        steps
    } else {
        state.center(problem, &mut work, 0.0, MAX_NEWTON_STEPS_PER_CENTERING * 4)?.0
    };
    let t = matches!(problem.floor, Floor::MaxMin { .. }).then_some(state.t);
    Ok(Solution { x: state.x.iter().map(|v| v.clamp(0.0, 1.0)).collect(), t, newton_steps: steps })
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

/// Iterate of the interior-point method.
struct State {
    x: Vec<f64>,
    t: f64,
}

/// The problem as `G z <= h` with `z = (x, t)`: every constraint-indexed vector
/// (slacks `s = h - G z`, duals, weights) is laid out as
/// `[x cells (m n) | capacity (n) | rows (m) | floors (m, if any)]`.
/// Rows of G: `-x_k <= 0`; `sum_i scale_i x_ij <= capacity_j`;
/// `sum_j x_ij <= 1`; `t - coef_i . x_i <= 0` (MaxMin) or
/// `-coef_i . x_i <= -lower_i` (Bounds).
fn constraint_count(p: &Problem<'_>) -> usize {
    let (m, n) = (p.jobs, p.types);
    m * n + n + m + if matches!(p.floor, Floor::None) { 0 } else { m }
}

fn floor_coef<'a>(p: &Problem<'a>) -> Option<&'a [f64]> {
    match p.floor {
        Floor::None => None,
        Floor::MaxMin { coef } | Floor::Bounds { coef, .. } => Some(coef),
    }
}

/// The number of GPU types, known at compile time for the common counts (1-4)
/// so that the per-job loops unroll and keep a job's block in registers. The
/// generic code performs the same floating-point operations in the same order
/// for every `Dim`, so results are bit-for-bit those of the runtime-sized path.
trait Dim: Copy {
    fn n(self) -> usize;
}

/// A compile-time type count.
#[derive(Clone, Copy)]
struct Fixed<const N: usize>;

impl<const N: usize> Dim for Fixed<N> {
    #[inline(always)]
    fn n(self) -> usize {
        N
    }
}

/// Any other type count.
#[derive(Clone, Copy)]
struct Runtime(usize);

impl Dim for Runtime {
    #[inline(always)]
    fn n(self) -> usize {
        self.0
    }
}

/// Whether this CPU runs the solver's AVX2 twins (see [`twin!`]).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn has_avx2() -> bool {
    #[cfg(test)]
    if BASELINE_ONLY.with(std::cell::Cell::get) {
        return false;
    }
    std::arch::is_x86_feature_detected!("avx2")
}

#[cfg(test)]
thread_local! {
    /// Set by tests to run this thread's solves on the baseline path only.
    static BASELINE_ONLY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `twin! { fn NAME(ARGS) -> R = BODY }`: a function that runs `BODY` (an
/// `#[inline(always)]` function, as is all that it calls but the other twins),
/// compiled for AVX2 where the CPU has it and for baseline x86-64 otherwise.
/// A method takes `&self: TYPE` or `&mut self: TYPE` first.
///
/// The solver's hot functions (the slacks, their change along a step, `G^T v`,
/// the factorization and its solves, the Newton direction, the primal-dual and
/// centring loops) are each compiled twice this way, with 256-bit vectors in
/// the AVX2 copy (a four-lane loop in one instruction instead of two). They
/// stay separate functions: the whole solver inlined into one AVX2 function
/// was slower than the baseline on the clock. The results are the same bits
/// either way: the same source performs the same IEEE operations in the same
/// order (vector lanes are exact per element, and the compiler neither
/// reorders floating-point sums nor fuses a multiply and an add unless told
/// to); `the_avx2_path_is_the_baseline_bit_for_bit` checks it.
macro_rules! twin {
    ($(#[$m:meta])* fn $name:ident($($a:ident: $t:ty),* $(,)?) $(-> $r:ty)? = $body:path) => {
        $(#[$m])*
        fn $name($($a: $t),*) $(-> $r)? {
            twin!(@call [$($a: $t),*] $(-> $r)? = $body)
        }
    };
    ($(#[$m:meta])* fn $name:ident(&self: $st:ty, $($a:ident: $t:ty),* $(,)?) $(-> $r:ty)? = $body:path) => {
        $(#[$m])*
        fn $name(&self, $($a: $t),*) $(-> $r)? {
            let this = self;
            twin!(@call [this: &$st, $($a: $t),*] $(-> $r)? = $body)
        }
    };
    ($(#[$m:meta])* fn $name:ident(&mut self: $st:ty, $($a:ident: $t:ty),* $(,)?) $(-> $r:ty)? = $body:path) => {
        $(#[$m])*
        fn $name(&mut self, $($a: $t),*) $(-> $r)? {
            let this = self;
            twin!(@call [this: &mut $st, $($a: $t),*] $(-> $r)? = $body)
        }
    };
    // `BODY(ARGS)`, by the AVX2 copy where the CPU has AVX2.
    (@call [$($a:ident: $t:ty),*] $(-> $r:ty)? = $body:path) => {{
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx2")]
            fn avx2($($a: $t),*) $(-> $r)? {
                $body($($a),*)
            }
            if has_avx2() {
                // SAFETY: a `target_feature` function is sound to call where
                // the CPU has the features it enables: checked.
                #[allow(unsafe_code)]
                return unsafe { avx2($($a),*) };
            }
        }
        $body($($a),*)
    }};
}

/// Runs `$body` with `$d` bound to the `Dim` for `$n` types.
macro_rules! with_dim {
    ($n:expr, $d:ident => $body:expr) => {
        match $n {
            1 => {
                let $d = Fixed::<1>;
                $body
            }
            2 => {
                let $d = Fixed::<2>;
                $body
            }
            3 => {
                let $d = Fixed::<3>;
                $body
            }
            4 => {
                let $d = Fixed::<4>;
                $body
            }
            n => {
                let $d = Runtime(n);
                $body
            }
        }
    };
}

/// A buffer of `len` numbers on the stack when it fits in `SMALL_TYPES^2`.
macro_rules! scratch {
    ($name:ident, $len:expr) => {
        let mut stack = [0.0; SMALL_TYPES * SMALL_TYPES];
        let mut heap = Vec::new();
        let len = $len;
        let $name: &mut [f64] = if len <= stack.len() {
            &mut stack[..len]
        } else {
            heap.resize(len, 0.0);
            &mut heap
        };
    };
}

twin! {
    /// Writes `h - G z` into `s`; false if some slack is not strictly positive.
    fn slacks_into(p: &Problem<'_>, x: &[f64], t: f64, s: &mut [f64]) -> bool = slacks_into_in
}

#[inline(always)]
fn slacks_into_in(p: &Problem<'_>, x: &[f64], t: f64, s: &mut [f64]) -> bool {
    with_dim!(p.types, d => slacks_into_dim(d, p, x, t, s))
}

#[inline(always)]
fn slacks_into_dim<D: Dim>(d: D, p: &Problem<'_>, x: &[f64], t: f64, s: &mut [f64]) -> bool {
    let (m, n) = (p.jobs, d.n());
    let (sx, rest) = s.split_at_mut(m * n);
    let (cap, rest) = rest.split_at_mut(n);
    let (row, floor) = rest.split_at_mut(m);
    sx.copy_from_slice(x);
    // The capacity sums run in a local buffer (registers, for the unrolled
    // type counts) rather than through `cap` in memory: the same operations
    // in the same order.
    scratch!(acc, n);
    acc.copy_from_slice(p.capacity);
    // One loop per floor kind, each over zipped rows (no bounds checks, no
    // per-job match): the same operations in the same order.
    let jobs = x.chunks_exact(n).zip(p.scale).zip(row.iter_mut());
    let mut job = |xi: &[f64], scale: &f64, row: &mut f64| {
        let mut used = 0.0;
        for (c, v) in acc.iter_mut().zip(xi) {
            *c -= scale * v;
            used += v;
        }
        *row = 1.0 - used;
    };
    match p.floor {
        Floor::None => jobs.for_each(|((xi, scale), row)| job(xi, scale, row)),
        Floor::MaxMin { coef } => {
            for (((xi, scale), row), (c, f)) in jobs.zip(coef.chunks_exact(n).zip(floor.iter_mut())) {
                job(xi, scale, row);
                *f = dot(c, xi) - t;
            }
        }
        Floor::Bounds { coef, lower } => {
            let floors = coef.chunks_exact(n).zip(lower).zip(floor.iter_mut());
            for (((xi, scale), row), ((c, lower), f)) in jobs.zip(floors) {
                job(xi, scale, row);
                *f = dot(c, xi) - lower;
            }
        }
    }
    cap.copy_from_slice(acc);
    all_positive(s)
}

/// Whether every entry is `> 0` (four lanes at a time; the answer does not
/// depend on the order).
#[inline(always)]
fn all_positive(v: &[f64]) -> bool {
    let mut chunks = v.chunks_exact(4);
    for c in &mut chunks {
        if !((c[0] > 0.0) & (c[1] > 0.0) & (c[2] > 0.0) & (c[3] > 0.0)) {
            return false;
        }
    }
    chunks.remainder().iter().all(|v| *v > 0.0)
}

twin! {
    /// `ds = -G (dx, dt)`: how the slacks change along a step.
    fn slack_change(p: &Problem<'_>, dx: &[f64], dt: f64, ds: &mut [f64]) = slack_change_in
}

#[inline(always)]
fn slack_change_in(p: &Problem<'_>, dx: &[f64], dt: f64, ds: &mut [f64]) {
    with_dim!(p.types, d => slack_change_dim(d, p, dx, dt, ds))
}

#[inline(always)]
fn slack_change_dim<D: Dim>(d: D, p: &Problem<'_>, dx: &[f64], dt: f64, ds: &mut [f64]) {
    let (m, n) = (p.jobs, d.n());
    let (sx, rest) = ds.split_at_mut(m * n);
    let (cap, rest) = rest.split_at_mut(n);
    let (row, floor) = rest.split_at_mut(m);
    sx.copy_from_slice(dx);
    // Summed locally, as in `slacks_into_dim`.
    scratch!(acc, n);
    let jobs = dx.chunks_exact(n).zip(p.scale).zip(row.iter_mut());
    let mut job = |di: &[f64], scale: &f64, row: &mut f64| {
        let mut used = 0.0;
        for (c, v) in acc.iter_mut().zip(di) {
            *c -= scale * v;
            used += v;
        }
        *row = -used;
    };
    match p.floor {
        Floor::None => jobs.for_each(|((di, scale), row)| job(di, scale, row)),
        Floor::MaxMin { coef } => {
            for (((di, scale), row), (c, f)) in jobs.zip(coef.chunks_exact(n).zip(floor.iter_mut())) {
                job(di, scale, row);
                *f = dot(c, di) - dt;
            }
        }
        Floor::Bounds { coef, .. } => {
            for (((di, scale), row), (c, f)) in jobs.zip(coef.chunks_exact(n).zip(floor.iter_mut())) {
                job(di, scale, row);
                *f = dot(c, di);
            }
        }
    }
    cap.copy_from_slice(acc);
}

twin! {
    /// `G^T v`: the x part into `gx`, the t part returned (0 without MaxMin).
    fn transpose_apply(p: &Problem<'_>, v: &[f64], gx: &mut [f64]) -> f64 = transpose_apply_in
}

#[inline(always)]
fn transpose_apply_in(p: &Problem<'_>, v: &[f64], gx: &mut [f64]) -> f64 {
    with_dim!(p.types, d => transpose_apply_dim(d, p, v, gx))
}

#[inline(always)]
fn transpose_apply_dim<D: Dim>(d: D, p: &Problem<'_>, v: &[f64], gx: &mut [f64]) -> f64 {
    let (m, n) = (p.jobs, d.n());
    let (vx, rest) = v.split_at(m * n);
    let (cap, rest) = rest.split_at(n);
    let (row, floor) = rest.split_at(m);
    let jobs = vx.chunks_exact(n).zip(gx.chunks_exact_mut(n)).zip(p.scale.iter().zip(&row[..m]));
    match floor_coef(p) {
        None => {
            for ((vi, gi), (scale, row)) in jobs {
                for ((g, v), c) in gi.iter_mut().zip(vi).zip(cap) {
                    *g = -v + scale * c + row;
                }
            }
        }
        Some(coef) => {
            for (((vi, gi), (scale, row)), (ci, f)) in jobs.zip(coef.chunks_exact(n).zip(floor)) {
                for (((g, v), c), cf) in gi.iter_mut().zip(vi).zip(cap).zip(ci) {
                    let mut x = -v + scale * c + row;
                    x -= cf * f;
                    *g = x;
                }
            }
        }
    }
    if matches!(p.floor, Floor::MaxMin { .. }) {
        floor.iter().sum()
    } else {
        0.0
    }
}

/// Largest `alpha` keeping `v + alpha dv > 0` (infinite if nothing decreases).
/// The minimum of the ratios does not depend on the order they are taken in
/// (none is NaN: `v > 0` and `d < 0`), so four lanes run side by side.
#[inline(always)]
fn step_to_boundary(v: &[f64], dv: &[f64]) -> f64 {
    let ratio = |v: f64, d: f64| if d < 0.0 { v / -d } else { f64::INFINITY };
    let mut lanes = [f64::INFINITY; 4];
    let (vc, dc) = (v.chunks_exact(4), dv.chunks_exact(4));
    let (vr, dr) = (vc.remainder(), dc.remainder());
    for (v, d) in vc.zip(dc) {
        for k in 0..4 {
            lanes[k] = lanes[k].min(ratio(v[k], d[k]));
        }
    }
    let tail = vr.iter().zip(dr).map(|(v, d)| ratio(*v, *d)).fold(f64::INFINITY, f64::min);
    lanes.iter().fold(tail, |a, b| a.min(*b))
}

/// Buffers reused across iterations (no allocation inside the loops).
struct Work {
    s: Vec<f64>,
    y: Vec<f64>,
    w: Vec<f64>,
    v: Vec<f64>,
    ds: Vec<f64>,
    dy: Vec<f64>,
    /// Objective gradient of the minimization, x part.
    fx: Vec<f64>,
    rhs: Vec<f64>,
    dx: Vec<f64>,
    /// `H_xx^{-1} H_xt` (MaxMin only).
    b: Vec<f64>,
    /// `H_xt`.
    h: Vec<f64>,
    trial: Vec<f64>,
    /// Refinement buffers.
    res: Vec<f64>,
    corr: Vec<f64>,
    tmp: Vec<f64>,
    /// The iterate before the last step.
    previous: Vec<f64>,
    /// `1 / s` at the current point of the barrier finish, for the line
    /// search's estimate (None-like when empty: some slack is too large).
    recip: Vec<f64>,
    kkt: Kkt,
    /// Whether `s` holds the slacks of the current iterate: the barrier
    /// finish's accepted trial leaves them in `v` (see [`State::center`]).
    s_current: bool,
    /// Take the accepted trial's slacks instead of recomputing them (off
    /// only in the test that checks the two paths give the same solve).
    reuse_slacks: bool,
    /// End a line search at a failed trial equal to the current point (off
    /// only in the test that checks both paths give the same solve).
    stop_when_stuck: bool,
}

impl Work {
    fn new(p: &Problem<'_>) -> Work {
        let (m, n) = (p.jobs, p.types);
        let k = constraint_count(p);
        let cells = vec![0.0; m * n];
        Work {
            s: vec![0.0; k],
            y: vec![0.0; k],
            w: vec![0.0; k],
            v: vec![0.0; k],
            ds: vec![0.0; k],
            dy: vec![0.0; k],
            fx: p.linear.map_or_else(|| cells.clone(), |q| q.iter().map(|q| -q).collect()),
            rhs: cells.clone(),
            dx: cells.clone(),
            b: cells.clone(),
            h: cells.clone(),
            trial: cells.clone(),
            previous: cells.clone(),
            res: cells.clone(),
            corr: cells,
            tmp: vec![0.0; k],
            recip: vec![0.0; k],
            kkt: Kkt::new(m, n),
            s_current: false,
            reuse_slacks: true,
            stop_when_stuck: true,
        }
    }
}

/// Solves `H (out, dt) = (rhs, rt)` with the factored `kkt`; `h`, `b` and
/// `denom` eliminate t (MaxMin only). Returns `dt`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn solve_once(
    p: &Problem<'_>,
    kkt: &Kkt,
    h: &[f64],
    b: &[f64],
    denom: f64,
    maxmin: bool,
    rhs: &[f64],
    rt: f64,
    out: &mut [f64],
) -> f64 {
    kkt.solve(p, rhs, out);
    if !maxmin {
        return 0.0;
    }
    let dt = (rt - dot(h, out)) / denom;
    for (d, b) in out.iter_mut().zip(b) {
        *d -= b * dt;
    }
    dt
}

impl Work {
    twin! {
        /// Solves `H (dx, dt) = (rhs, rt)` into `dx` and returns `dt`, with one
        /// step of iterative refinement against the exact product `G^T W G`
        /// (the factored inverse loses digits when the weights span many orders
        /// of magnitude, and the dual update inherits the residual).
        fn direction(&mut self: Work, p: &Problem<'_>, rt: f64, denom: f64, maxmin: bool) -> f64
            = Work::direction_in
    }

    #[inline(always)]
    fn direction_in(&mut self, p: &Problem<'_>, rt: f64, denom: f64, maxmin: bool) -> f64 {
        let dt = solve_once(p, &self.kkt, &self.h, &self.b, denom, maxmin, &self.rhs, rt, &mut self.dx);
        slack_change(p, &self.dx, dt, &mut self.tmp);
        for (v, w) in self.tmp.iter_mut().zip(&self.w) {
            *v *= -w;
        }
        let ht = transpose_apply(p, &self.tmp, &mut self.res);
        for (r, b) in self.res.iter_mut().zip(&self.rhs) {
            *r = b - *r;
        }
        let rt = if maxmin { rt - ht } else { 0.0 };
        let dt2 = solve_once(p, &self.kkt, &self.h, &self.b, denom, maxmin, &self.res, rt, &mut self.corr);
        for (d, c) in self.dx.iter_mut().zip(&self.corr) {
            *d += c;
        }
        dt + dt2
    }
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
        let mut s = vec![0.0; constraint_count(p)];
        if slacks_into(p, &state.x, state.t, &mut s) {
            Ok(state)
        } else {
            Err(SolveError::InfeasibleStart)
        }
    }

    fn objective(&self, p: &Problem<'_>) -> f64 {
        let linear = p.linear.map_or(0.0, |q| dot(q, &self.x));
        match p.floor {
            Floor::MaxMin { .. } => linear + self.t,
            _ => linear,
        }
    }

    twin! {
        /// Factors `G^T diag(w) G` into `work.kkt` and, for MaxMin, prepares the
        /// t column; returns the Schur denominator for t (0 without MaxMin).
        fn factor(p: &Problem<'_>, work: &mut Work) -> f64 = State::factor_in
    }

    #[inline(always)]
    fn factor_in(p: &Problem<'_>, work: &mut Work) -> f64 {
        with_dim!(p.types, d => State::factor_dim(d, p, work))
    }

    #[inline(always)]
    fn factor_dim<D: Dim>(d: D, p: &Problem<'_>, work: &mut Work) -> f64 {
        let (m, n) = (p.jobs, d.n());
        work.kkt.factor_dim(d, p, &work.w);
        let Floor::MaxMin { coef } = p.floor else { return 0.0 };
        let wf = &work.w[m * n + n + m..];
        for (i, (h, c)) in work.h.chunks_exact_mut(n).zip(coef.chunks_exact(n)).enumerate() {
            for (h, c) in h.iter_mut().zip(c) {
                *h = -c * wf[i];
            }
        }
        // The capacity coupling `u^T S^{-1} u` of the t column comes with its solve.
        let coupling = work.kkt.solve_dim(d, p, &work.h, &mut work.b);
        // The Schur complement of t, `H_tt - H_xt^T H_xx^{-1} H_xt`, summed
        // from nonnegative terms (subtracting the two sides directly loses
        // every digit once the floor weights are large): per job
        // `w_f / (1 + w_f gamma)` with `gamma = coef^T K^{-1} coef`, K the
        // job's block without its floor term (Sherman-Morrison, with the
        // Lagrange identity for the difference of products), plus the
        // capacity coupling.
        let wx = &work.w[..m * n];
        let wrow = &work.w[m * n + n..m * n + n + m];
        let mut denom = 0.0;
        for i in 0..m {
            let c = &coef[i * n..(i + 1) * n];
            let d = &wx[i * n..(i + 1) * n];
            let (mut s1, mut scc, mut lagrange) = (0.0, 0.0, 0.0);
            for a in 0..n {
                let pa = 1.0 / d[a];
                s1 += pa;
                scc += c[a] * c[a] * pa;
                for b in a + 1..n {
                    let diff = c[a] - c[b];
                    lagrange += pa * diff * diff / d[b];
                }
            }
            let gamma = (scc + wrow[i] * lagrange) / (1.0 + wrow[i] * s1);
            denom += wf[i] / (1.0 + wf[i] * gamma);
        }
        denom + coupling
    }

    twin! {
        /// Mehrotra's predictor-corrector from the current (strictly feasible)
        /// primal point. Returns the iterations taken.
        fn primal_dual(&mut self: State, p: &Problem<'_>, work: &mut Work) -> Result<(usize, f64), SolveError>
            = State::primal_dual_in
    }

    #[inline(always)]
    fn primal_dual_in(&mut self, p: &Problem<'_>, work: &mut Work) -> Result<(usize, f64), SolveError> {
        let (m, n) = (p.jobs, p.types);
        let maxmin = matches!(p.floor, Floor::MaxMin { .. });
        let ft: f64 = if maxmin { -1.0 } else { 0.0 };
        let k_total = constraint_count(p) as f64;
        if !slacks_into(p, &self.x, self.t, &mut work.s) {
            return Err(SolveError::InfeasibleStart);
        }
        // Dual start on the central path of barrier weight 1.
        for (y, s) in work.y.iter_mut().zip(&work.s) {
            *y = 1.0 / s;
        }
        let f_norm = work.fx.iter().fold(ft.abs(), |a, f| a.max(f.abs()));
        let (mut previous_t, mut previous_residual, mut previous_gap) = (self.t, f64::INFINITY, 0.0);
        for iteration in 0..MAX_IPM_ITERATIONS {
            let gap = dot(&work.s, &work.y);
            let rt = ft + transpose_apply(p, &work.y, &mut work.rhs);
            let dual_residual =
                work.rhs.iter().zip(&work.fx).fold(rt.abs(), |a, (g, f)| a.max((g + f).abs()));
            let scale = self.objective(p).abs().max(1e-3);
            // Near the optimum the weights y/s span ~16 orders of magnitude
            // and the dual update can lose its accuracy: a dual residual that
            // jumps means the last step was rounding noise, so the previous
            // iterate is the answer.
            if dual_residual > DUAL_TOLERANCE * (1.0 + f_norm) && dual_residual > 1e3 * previous_residual {
                std::mem::swap(&mut self.x, &mut work.previous);
                self.t = previous_t;
                let gap = previous_gap;
                return Ok((iteration, gap));
            }
            if gap < HANDOVER_GAP * scale && dual_residual <= DUAL_TOLERANCE * (1.0 + f_norm) {
                return Ok((iteration, gap));
            }
            let mu = gap / k_total;
            for ((w, y), s) in work.w.iter_mut().zip(&work.y).zip(&work.s) {
                *w = y / s;
            }
            let denom = State::factor(p, work);
            if !(denom.is_finite() && (!maxmin || denom > 0.0)) {
                return Ok((iteration, gap));
            }
            // Predictor (affine scaling): H dz = -f.
            for (r, f) in work.rhs.iter_mut().zip(&work.fx) {
                *r = -f;
            }
            let dt = work.direction(p, -ft, denom, maxmin);
            slack_change(p, &work.dx, dt, &mut work.ds);
            for k in 0..work.dy.len() {
                work.dy[k] = -work.y[k] - work.w[k] * work.ds[k];
            }
            let ap = step_to_boundary(&work.s, &work.ds).min(1.0);
            let ad = step_to_boundary(&work.y, &work.dy).min(1.0);
            let mut affine = 0.0;
            for k in 0..work.s.len() {
                affine += (work.s[k] + ap * work.ds[k]) * (work.y[k] + ad * work.dy[k]);
            }
            let sigma = (affine / gap).clamp(0.0, 1.0).powi(3);
            // Corrector: H dz = -f - G^T v, v = (sigma mu - ds_aff dy_aff) / s.
            for k in 0..work.v.len() {
                work.v[k] = (sigma * mu - work.ds[k] * work.dy[k]) / work.s[k];
            }
            let vt = transpose_apply(p, &work.v, &mut work.rhs);
            for (r, f) in work.rhs.iter_mut().zip(&work.fx) {
                *r = -f - *r;
            }
            let dt = work.direction(p, -ft - vt, denom, maxmin);
            if !(dt.is_finite() && work.dx.iter().all(|d| d.is_finite())) {
                return Ok((iteration, gap));
            }
            slack_change(p, &work.dx, dt, &mut work.ds);
            for k in 0..work.dy.len() {
                work.dy[k] = work.v[k] - work.y[k] - work.w[k] * work.ds[k];
            }
            let mut ap = (STEP_TO_BOUNDARY * step_to_boundary(&work.s, &work.ds)).min(1.0);
            let ad = (STEP_TO_BOUNDARY * step_to_boundary(&work.y, &work.dy)).min(1.0);
            // Recompute the slacks from the new point (no drift); rounding
            // may put one at zero, in which case the step shrinks.
            loop {
                for k in 0..m * n {
                    work.trial[k] = self.x[k] + ap * work.dx[k];
                }
                if slacks_into(p, &work.trial, self.t + ap * dt, &mut work.s) {
                    break;
                }
                ap *= 0.5;
                if ap < 1e-14 {
                    // Stalled at the limit of double precision: keep the point.
                    slacks_into(p, &self.x, self.t, &mut work.s);
                    return Ok((iteration, gap));
                }
            }
            work.previous.copy_from_slice(&self.x);
            previous_t = self.t;
            previous_residual = dual_residual;
            previous_gap = gap;
            std::mem::swap(&mut self.x, &mut work.trial);
            self.t += ap * dt;
            for (y, dy) in work.y.iter_mut().zip(&work.dy) {
                *y += ad * dy;
            }
            if ap < 1e-12 && ad < 1e-12 {
                return Ok((iteration + 1, gap));
            }
        }
        let _ = n;
        Ok((MAX_IPM_ITERATIONS, dot(&work.s, &work.y)))
    }

    /// Change of the barrier `-tau * objective - sum log slacks` from the
    /// point with slacks `s` (objective `objective`) to `(x, t)`, whose slacks
    /// go into `trial` (None outside the domain). The logs are taken of
    /// products of slack ratios, a few dozen at a time: one `ln` per chunk
    /// instead of one per slack, and the difference is computed directly
    /// rather than as the difference of two large sums. The line search asks
    /// [`State::armijo_passes`] instead, which decides `change <= threshold`
    /// as this value would without computing it where it can; this is its
    /// oracle in the tests.
    #[cfg(test)]
    #[allow(clippy::too_many_arguments)]
    fn barrier_change(
        p: &Problem<'_>,
        tau: f64,
        objective: f64,
        s: &[f64],
        x: &[f64],
        t: f64,
        trial: &mut [f64],
    ) -> Option<f64> {
        if !slacks_into(p, x, t, trial) {
            return None;
        }
        Some(State::barrier_head(p, tau, objective, x, t) - log_ratio_sum(trial, s))
    }

    /// The objective's part of the barrier's change, `-tau (value - objective)`.
    #[inline(always)]
    fn barrier_head(p: &Problem<'_>, tau: f64, objective: f64, x: &[f64], t: f64) -> f64 {
        let value = p.linear.map_or(0.0, |q| dot(q, x))
            + if matches!(p.floor, Floor::MaxMin { .. }) { t } else { 0.0 };
        -tau * (value - objective)
    }

    /// Whether `(x, t)` is inside the domain and its barrier change is at most
    /// `threshold` (the Armijo test): exactly `barrier_change(..) <= threshold`,
    /// decided by [`change_at_most`] (the slacks go into `trial`; `recip`,
    /// if given, holds `1.0 / s`).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn armijo_passes(
        p: &Problem<'_>,
        tau: f64,
        objective: f64,
        s: &[f64],
        recip: Option<&[f64]>,
        x: &[f64],
        t: f64,
        trial: &mut [f64],
        threshold: f64,
    ) -> bool {
        slacks_into(p, x, t, trial)
            && change_at_most(State::barrier_head(p, tau, objective, x, t), trial, s, recip, threshold)
    }

    twin! {
        /// Newton's method on the barrier for a fixed `tau`. Returns the steps
        /// taken and whether it stalled at the limit of double precision.
        fn center(&mut self: State, p: &Problem<'_>, work: &mut Work, tau: f64, budget: usize)
            -> Result<(usize, bool), SolveError> = State::center_in
    }

    #[inline(always)]
    fn center_in(
        &mut self,
        p: &Problem<'_>,
        work: &mut Work,
        tau: f64,
        budget: usize,
    ) -> Result<(usize, bool), SolveError> {
        let maxmin = matches!(p.floor, Floor::MaxMin { .. });
        for step in 0..budget {
            // The slacks of the current iterate: those of the trial the last
            // step accepted (the same function of the same point, so the same
            // bits; debug builds check it), or computed here.
            if work.s_current {
                #[cfg(debug_assertions)]
                {
                    let mut fresh = vec![0.0; work.s.len()];
                    slacks_into(p, &self.x, self.t, &mut fresh);
                    let same = fresh.iter().zip(&work.s).all(|(a, b)| a.to_bits() == b.to_bits());
                    debug_assert!(same, "reused slacks differ from the iterate's");
                }
            } else if slacks_into(p, &self.x, self.t, &mut work.s) {
                work.s_current = true;
            } else {
                return Err(SolveError::InfeasibleStart);
            }
            // Gradient: tau f + G^T (1 / s); Hessian G^T diag(1 / s^2) G.
            // The line search's estimate multiplies by the reciprocals instead
            // of dividing (see `log_ratio_estimate`); a slack above 1e300 would
            // make its reciprocal subnormal, and the exact sum decides then.
            let mut recip_normal = true;
            for (((v, w), r), s) in work.v.iter_mut().zip(&mut work.w).zip(&mut work.recip).zip(&work.s) {
                *v = 1.0 / s;
                *w = *v * *v;
                *r = *v;
                recip_normal &= *s <= 1e300;
            }
            let gt = transpose_apply(p, &work.v, &mut work.rhs) + if maxmin { -tau } else { 0.0 };
            for (g, f) in work.rhs.iter_mut().zip(&work.fx) {
                *g += tau * f;
            }
            // work.rhs holds the gradient; keep a copy for the decrement.
            work.trial.copy_from_slice(&work.rhs);
            for g in work.rhs.iter_mut() {
                *g = -*g;
            }
            let denom = State::factor(p, work);
            let dt = work.direction(p, -gt, denom, maxmin);
            let decrement = -(dot(&work.trial, &work.dx) + gt * dt);
            // A non-finite or negative decrement means the slacks have become
            // too small for double precision: the current interior point is as
            // good as this barrier weight gets.
            if !decrement.is_finite() || decrement / 2.0 < 1e-10 {
                return Ok((step, !decrement.is_finite()));
            }
            // Largest step that keeps every slack positive, then backtracking.
            slack_change(p, &work.dx, dt, &mut work.ds);
            let mut alpha = (STEP_TO_BOUNDARY * step_to_boundary(&work.s, &work.ds)).min(1.0);
            let objective = self.objective(p);
            let recip = recip_normal.then_some(&work.recip[..]);
            loop {
                for ((trial, x), dx) in work.trial.iter_mut().zip(&self.x).zip(&work.dx) {
                    *trial = x + alpha * dx;
                }
                let t = self.t + alpha * dt;
                let threshold = -0.25 * alpha * decrement;
                if State::armijo_passes(
                    p,
                    tau,
                    objective,
                    &work.s,
                    recip,
                    &work.trial,
                    t,
                    &mut work.v,
                    threshold,
                ) {
                    std::mem::swap(&mut self.x, &mut work.trial);
                    self.t = t;
                    // `v` holds `slacks_into(p, x, t)` of the new iterate.
                    if work.reuse_slacks {
                        std::mem::swap(&mut work.s, &mut work.v);
                    } else {
                        work.s_current = false;
                    }
                    break;
                }
                // A failed trial equal to the current point, bit for bit
                // (every cell and t), fails at every later halving too, and
                // the search ends below as stalled: its slacks are `s` itself
                // (the same function of the same point), so its change is
                // `-tau * 0 - log_ratio_sum(s, s)`, zero (or NaN), never at
                // most the threshold, negative as `alpha >= 1e-14` and
                // `decrement >= 2e-10`; and halving `alpha` keeps the trial
                // at the point: `fl(alpha / 2 * d)` has the sign of
                // `fl(alpha * d)` and at most its size, so by monotone
                // rounding `x + fl(alpha / 2 * d)` rounds between `x` and
                // `fl(x + fl(alpha * d)) = x`. (Halving to the stall takes
                // about 11 halvings from where the point stops moving on
                // Gavel's 3,000-job reference trace under
                // finish-time-fairness-perf. The test is only asked below
                // `alpha = 1e-9`: asked at every failed trial, its scan of
                // the cells cost more than the trials it saved, 7,891.6 M
                // instructions against 7,779.1 M, measured on e08bd85's
                // build, whose fused trial f3582e1 reverted.)
                if work.stop_when_stuck
                    && alpha < 1e-9
                    && t.to_bits() == self.t.to_bits()
                    && work.v[..self.x.len()].iter().zip(&self.x).all(|(a, b)| a.to_bits() == b.to_bits())
                {
                    return Ok((step, true));
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
}

/// Whether `head - log_ratio_sum(a, b) <= threshold`, with the same answer
/// as computing it, usually without the serial chain of products.
///
/// The line search's test is decided by the sign of `change - threshold`,
/// and most trials miss it by far more than rounding (a profile of Gavel's
/// 3,000-job reference run under max-min-fairness-perf: 91% of failed trials
/// by more than 1e-9, while rounding moves the sum by ~1e-14). So the sum is
/// first estimated from four independent products of `a_k * recip_k`
/// (`recip_k = 1.0 / b_k`, normal: vectorizable multiplications instead of
/// divisions, one `ln`), with a bound on its distance to `log_ratio_sum`'s
/// result; when the test's answer is the same everywhere within that bound,
/// it is the answer, and otherwise (or without `recip`) the exact sum decides.
///
/// The bound (u = 2^-53, K = `a.len()`, T the exact sum of the logs of the
/// exact ratios): where every prefix product of the ratios stays within
/// [1e-78, 1e78] (checked by the products of `max(r, 1)` and of all ratios),
/// `log_ratio_sum` takes a single product `P_S` of at most 2K rounded
/// factors and returns `fl(ln P_S)`, so `|S - T| <= 2.0000001 K u + 2u |ln P_S|`;
/// the estimate is `fl(ln P_E)` of at most 3K + 3 rounded factors (the
/// reciprocal, the product `a_k recip_k`, the lane's product; then the three
/// that join the lanes), `|E - T| <= 1.0000001 (3K + 3) u + 2u |ln P_E|`;
/// together `|S - E| <= 1.001 (5K + 3 + 4|E|) u`. `B = (10K + 16 + 8|E|) u +
/// 1e-300` is twice that. The subtraction from `head` adds
/// `u (|head - S| + |head - E|)`, covered by `r = 1.01 B + 8u|d|`. A failed
/// comparison is never trusted: `fl(d - r) > threshold` implies the exact
/// `d - r > threshold` (rounding is monotone and `threshold` is a double), and
/// `fl(d + r) < threshold` the exact `d + r < threshold`.
#[inline(always)]
fn change_at_most(head: f64, a: &[f64], b: &[f64], recip: Option<&[f64]>, threshold: f64) -> bool {
    if let Some((estimate, bound)) = recip.and_then(|recip| log_ratio_estimate(a, recip)) {
        let d = head - estimate;
        let r = 1.01 * bound + 8.0 * f64::EPSILON / 2.0 * d.abs();
        if d - r > threshold {
            return false;
        }
        if d + r < threshold {
            return true;
        }
    }
    head - log_ratio_sum(a, b) <= threshold
}

/// `(E, B)`: an estimate of `log_ratio_sum(a, b)` from four lanes of products
/// and a bound on its distance to it (see [`change_at_most`]); None where the
/// bound does not hold (a prefix product could leave [1e-78, 1e78], or
/// something is not finite).
#[inline(always)]
fn log_ratio_estimate(a: &[f64], recip: &[f64]) -> Option<(f64, f64)> {
    const RANGE: f64 = 1e78;
    // Every prefix product lies between the product of the ratios below 1
    // and the product `up` of those above 1; the former is `product / up`
    // (to a relative 4K u, far inside the margin to 1e100).
    let mut product = [1.0f64; 4];
    let mut up = [1.0f64; 4];
    let (ac, qc) = (a.chunks_exact(4), recip.chunks_exact(4));
    let (ar, qr) = (ac.remainder(), qc.remainder());
    // `r.max(1.0)` is `if r > 1.0 { r } else { 1.0 }` for every r (NaN
    // included: both give 1.0), without the branch the compiler made of the
    // `if` (a data-dependent jump per entry, where `perf annotate` put about a
    // third of `center`'s samples).
    for (a, q) in ac.zip(qc) {
        for k in 0..4 {
            let r = a[k] * q[k];
            product[k] *= r;
            up[k] *= r.max(1.0);
        }
    }
    for (k, (a, q)) in ar.iter().zip(qr).enumerate() {
        let r = a * q;
        product[k] *= r;
        up[k] *= r.max(1.0);
    }
    let up = up[0] * up[1] * up[2] * up[3];
    let product = product[0] * product[1] * product[2] * product[3];
    // `!(x <= y)` is also true for NaN.
    if !(up <= RANGE && product / up >= 1.0 / RANGE) {
        return None;
    }
    let estimate = product.ln();
    if !estimate.is_finite() {
        return None;
    }
    let u = f64::EPSILON / 2.0;
    let bound = (10.0 * a.len() as f64 + 16.0 + 8.0 * estimate.abs()) * u + 1e-300;
    Some((estimate, bound))
}

/// `sum_k ln(a_k / b_k)` for positive `a` and `b`, with one `ln` per chunk of
/// ratios: the running product is flushed to the log sum before it can leave
/// [1e-100, 1e100], and a ratio outside [1e-100, 1e100] is logged alone.
/// An unchanged entry (`a_k == b_k`) has ratio exactly 1, which leaves the
/// product (always within range) exactly as it is: it is skipped, division
/// and all (the line search's short steps leave many slacks unchanged).
/// Kept out of line so the product stays in a register along the chain.
#[inline(never)]
fn log_ratio_sum(a: &[f64], b: &[f64]) -> f64 {
    const FLUSH: f64 = 1e100;
    const LOW: f64 = 1.0 / FLUSH;
    let (mut sum, mut product) = (0.0, 1.0);
    for (a, b) in a.iter().zip(b) {
        if a == b && b.is_finite() {
            continue;
        }
        let ratio = a / b;
        if !(LOW..=FLUSH).contains(&ratio) {
            sum += ratio.ln();
            continue;
        }
        product *= ratio;
        if !(LOW..=FLUSH).contains(&product) {
            sum += product.ln();
            product = 1.0;
        }
    }
    sum + product.ln()
}

#[inline(always)]
fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(a, b)| a * b).sum()
}

/// The x-block of `G^T diag(w) G`: block-diagonal per job (`diag(w_x) +
/// w_row 1 1^T + w_floor coef_i coef_i^T`) plus one rank-one term per GPU
/// type (`w_cap_j a_j a_j^T`, `a_j` the scale factors on type j's cells),
/// inverted with the Woodbury identity. Factoring and solving cost
/// O(jobs * types^3) and O(jobs * types^2): the capacity rows couple the jobs
/// only through the `types x types` Schur complement.
struct Kkt {
    m: usize,
    n: usize,
    /// Inverse of each job's n x n block, row-major.
    block_inv: Vec<f64>,
    /// Cholesky factor of the n x n capacity Schur complement.
    schur: Vec<f64>,
}

impl Kkt {
    fn new(m: usize, n: usize) -> Kkt {
        Kkt { m, n, block_inv: vec![0.0; m * n * n], schur: vec![0.0; n * n] }
    }

    #[inline(always)]
    fn factor_dim<D: Dim>(&mut self, d: D, p: &Problem<'_>, w: &[f64]) {
        let (m, n) = (self.m, d.n());
        let coef = floor_coef(p);
        let (wx, rest) = w.split_at(m * n);
        let (wcap, rest) = rest.split_at(n);
        let (wrow, wfloor) = rest.split_at(m);
        // Summed in a local buffer (see `slacks_into_dim`), then factored in place.
        scratch!(schur, n * n);
        for (j, w) in wcap.iter().enumerate() {
            schur[j * n + j] = 1.0 / w;
        }
        scratch!(block, n * n);
        for (i, inv) in self.block_inv.chunks_exact_mut(n * n).enumerate() {
            let r = wrow[i];
            let wxi = &wx[i * n..(i + 1) * n];
            for a in 0..n {
                for b in 0..n {
                    let mut v = r;
                    if let Some(c) = coef {
                        v += c[i * n + a] * c[i * n + b] * wfloor[i];
                    }
                    if a == b {
                        v += wxi[a];
                    }
                    block[a * n + b] = v;
                }
            }
            invert_spd(d, block, inv);
            let s2 = p.scale[i] * p.scale[i];
            for (acc, v) in schur.iter_mut().zip(inv.iter()) {
                *acc += s2 * v;
            }
        }
        self.schur.copy_from_slice(schur);
        cholesky(d, &mut self.schur);
    }

    twin! {
        /// Solves H_xx out = rhs. Returns the right-hand side's capacity coupling
        /// `|L^{-1} u|^2`, with `u = sum_i scale_i K_i^{-1} rhs_i` and L the factor
        /// of the Schur complement (what the max-min t column needs).
        fn solve(&self: Kkt, p: &Problem<'_>, rhs: &[f64], out: &mut [f64]) -> f64 = Kkt::solve_in
    }

    #[inline(always)]
    fn solve_in(&self, p: &Problem<'_>, rhs: &[f64], out: &mut [f64]) -> f64 {
        with_dim!(self.n, d => self.solve_dim(d, p, rhs, out))
    }

    #[inline(always)]
    fn solve_dim<D: Dim>(&self, d: D, p: &Problem<'_>, rhs: &[f64], out: &mut [f64]) -> f64 {
        let (m, n) = (self.m, d.n());
        scratch!(u, n);
        let blocks = self.block_inv.chunks_exact(n * n).zip(rhs.chunks_exact(n)).zip(out.chunks_exact_mut(n));
        for (((inv, r), o), scale) in blocks.zip(p.scale) {
            for a in 0..n {
                // `Iterator::sum` of f64 starts from -0.0: the same bits.
                let mut v = -0.0;
                for b in 0..n {
                    v += inv[a * n + b] * r[b];
                }
                o[a] = v;
                u[a] += scale * v;
            }
        }
        forward_substitute(d, &self.schur, u);
        let coupling = dot(u, u);
        back_substitute(d, &self.schur, u);
        for ((inv, o), scale) in self.block_inv.chunks_exact(n * n).zip(out.chunks_exact_mut(n)).zip(p.scale)
        {
            for a in 0..n {
                let mut v = -0.0;
                for b in 0..n {
                    v += inv[a * n + b] * u[b];
                }
                o[a] -= scale * v;
            }
        }
        let _ = m;
        coupling
    }
}

/// In-place Cholesky (lower triangle) of a symmetric positive definite matrix.
#[inline(always)]
fn cholesky<D: Dim>(d: D, a: &mut [f64]) {
    let n = d.n();
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

/// `b = L^{-1} b` for the lower-triangular Cholesky factor `l`.
#[inline(always)]
fn forward_substitute<D: Dim>(d: D, l: &[f64], b: &mut [f64]) {
    let n = d.n();
    for i in 0..n {
        let mut v = b[i];
        for k in 0..i {
            v -= l[i * n + k] * b[k];
        }
        b[i] = v / l[i * n + i];
    }
}

/// `b = L^{-T} b` for the lower-triangular Cholesky factor `l`.
#[inline(always)]
fn back_substitute<D: Dim>(d: D, l: &[f64], b: &mut [f64]) {
    let n = d.n();
    for i in (0..n).rev() {
        let mut v = b[i];
        for k in i + 1..n {
            v -= l[k * n + i] * b[k];
        }
        b[i] = v / l[i * n + i];
    }
}

/// Most GPU types whose per-job block lives on the stack.
const SMALL_TYPES: usize = 8;

/// The inverse of a symmetric positive definite `a`, column by column from
/// its Cholesky factor.
#[inline(always)]
fn invert_spd<D: Dim>(d: D, a: &[f64], out: &mut [f64]) {
    let n = d.n();
    scratch!(l, n * n);
    l.copy_from_slice(&a[..n * n]);
    cholesky(d, l);
    scratch!(e, n);
    for col in 0..n {
        e.fill(0.0);
        e[col] = 1.0;
        forward_substitute(d, l, e);
        back_substitute(d, l, e);
        for row in 0..n {
            out[row * n + col] = e[row];
        }
    }
}

#[cfg(test)]
#[path = "solver_reference.rs"]
mod reference;

#[cfg(test)]
mod tests {
    use super::*;
    use good_lp::{constraint, variable, Expression, Solution as _, SolverModel};
    use proptest::prelude::*;

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
    fn max_min_matches_simplex_on_larger_instances() {
        // Sizes where the primal-dual phase does most of the work, with
        // repeated job types (ties) as Gavel's traces have them.
        let mut seed = 99;
        for case in 0..8 {
            let (m, n) = (20 + 15 * case, 3);
            let scale: Vec<f64> =
                (0..m).map(|_| [1.0, 1.0, 1.0, 2.0, 4.0, 8.0][(lcg(&mut seed) * 6.0) as usize]).collect();
            let capacity: Vec<f64> = (0..n).map(|_| (m / 4) as f64).collect();
            let kinds: Vec<f64> = (0..4 * n).map(|_| 0.2 + lcg(&mut seed) * 5.0).collect();
            let coef: Vec<f64> = (0..m)
                .flat_map(|_| {
                    let k = (lcg(&mut seed) * 4.0) as usize;
                    kinds[k * n..(k + 1) * n].to_vec()
                })
                .collect();
            let p = Problem {
                jobs: m,
                types: n,
                scale: &scale,
                capacity: &capacity,
                linear: None,
                floor: Floor::MaxMin { coef: &coef },
            };
            let solution = solve(&p, None).unwrap();
            let ours = solution.t.unwrap();
            let lp = lp_max_min(&scale, &capacity, &coef);
            assert!((ours - lp).abs() <= 1e-6 * lp.max(1.0), "case {case}: barrier {ours} vs simplex {lp}");
            assert!(solution.newton_steps < 120, "case {case}: {} steps", solution.newton_steps);
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

    #[test]
    fn log_ratio_sum_matches_the_sum_of_logs() {
        let a: Vec<f64> =
            (0..500).map(|k| 1e-150 + (k as f64 * 0.37).sin().abs() * 10f64.powi(k % 40 - 20)).collect();
        let b: Vec<f64> =
            (0..500).map(|k| 1e-300 + (k as f64 * 0.11).cos().abs() * 10f64.powi(k % 23 - 11)).collect();
        let exact: f64 = a.iter().zip(&b).map(|(a, b)| (a / b).ln()).sum();
        let fast = log_ratio_sum(&a, &b);
        assert!((fast - exact).abs() <= 1e-9 * exact.abs().max(1.0), "{fast} vs {exact}");
    }

    /// Hand-checked: two jobs, one GPU type with one GPU, job 1 twice as fast.
    /// Maximize t with x0 >= t, 2 x1 >= t, x0 + x1 <= 1: both floors are tight
    /// at the optimum, x0 = t and x1 = t / 2, so 3t/2 = 1: t = 2/3 and
    /// x = (2/3, 1/3), the only optimum. Then a second type of one GPU where
    /// job 0 cannot run (coefficient 0) and job 1 runs at 2: job 0's row caps
    /// it at t <= 1 * 1, which job 1 also reaches (x1 on the new type = 1/2),
    /// so t = 1 and x0 = 1 on type 0 is forced.
    #[test]
    fn hand_checked_two_job_max_min() {
        let coef = [1.0, 2.0];
        let p = Problem {
            jobs: 2,
            types: 1,
            scale: &[1.0, 1.0],
            capacity: &[1.0],
            linear: None,
            floor: Floor::MaxMin { coef: &coef },
        };
        let s = solve(&p, None).unwrap();
        assert!((s.t.unwrap() - 2.0 / 3.0).abs() < 1e-8, "{s:?}");
        assert!((s.x[0] - 2.0 / 3.0).abs() < 1e-7 && (s.x[1] - 1.0 / 3.0).abs() < 1e-7, "{s:?}");
        let coef = [1.0, 0.0, 2.0, 2.0];
        let p = Problem { types: 2, capacity: &[1.0, 1.0], floor: Floor::MaxMin { coef: &coef }, ..p };
        let s = solve(&p, None).unwrap();
        assert!((s.t.unwrap() - 1.0).abs() < 1e-7, "{s:?}");
        assert!((s.x[0] - 1.0).abs() < 1e-6, "job 0 has only type 0: {s:?}");
    }

    /// Random weights spanning many orders of magnitude, as near an optimum.
    fn weights(k: usize, seed: &mut u64) -> Vec<f64> {
        (0..k).map(|_| (0.1 + lcg(seed)) * 10f64.powi((lcg(seed) * 24.0) as i32 - 12)).collect()
    }

    /// Scale factors (1, 2, 4 or 8), capacities (1-9) and floor coefficients
    /// of a random `m x n` problem.
    fn instance(m: usize, n: usize, seed: &mut u64) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let scale = (0..m).map(|_| [1.0, 2.0, 4.0, 8.0][(lcg(seed) * 4.0) as usize]).collect();
        let capacity = (0..n).map(|_| 1.0 + (lcg(seed) * 9.0).floor()).collect();
        let coef = (0..m * n).map(|_| 0.05 + lcg(seed) * 5.0).collect();
        (scale, capacity, coef)
    }

    fn bits(v: &[f64]) -> Vec<u64> {
        v.iter().map(|v| v.to_bits()).collect()
    }

    /// A random problem of `kind` (0: max-min, 1: linear objective, 2: both,
    /// 3: the analytic centre of `Bounds` rows) solved by [`solve`] and by
    /// `solve_with` with `other` (reuse slacks, stop when stuck): the same x,
    /// t and Newton step count, bit for bit.
    fn solves_agree(
        m: usize,
        n: usize,
        kind: usize,
        seed: u64,
        other: (bool, bool, bool),
    ) -> Result<(), TestCaseError> {
        let mut seed = seed;
        let (scale, capacity, coef) = instance(m, n, &mut seed);
        let linear: Vec<f64> = (0..m * n).map(|_| lcg(&mut seed)).collect();
        // Bounds rows at a random fraction of the default start's values,
        // so that start is strictly feasible.
        let plain_problem = Problem {
            jobs: m,
            types: n,
            scale: &scale,
            capacity: &capacity,
            linear: None,
            floor: Floor::None,
        };
        let x0 = State::new(&plain_problem, None).expect("the default start is interior").x;
        let lower: Vec<f64> = (0..m)
            .map(|i| lcg(&mut seed) * dot(&coef[i * n..(i + 1) * n], &x0[i * n..(i + 1) * n]))
            .collect();
        let (linear, floor) = match kind {
            0 => (None, Floor::MaxMin { coef: &coef }),
            1 => (Some(&linear[..]), Floor::None),
            2 => (Some(&linear[..]), Floor::MaxMin { coef: &coef }),
            _ => (None, Floor::Bounds { coef: &coef, lower: &lower }),
        };
        let p = Problem { jobs: m, types: n, scale: &scale, capacity: &capacity, linear, floor };
        let start = matches!(floor, Floor::Bounds { .. }).then_some(x0);
        let fast = solve_with(&p, start.as_deref(), true, true);
        // `other.2`: the second solve on the baseline path only.
        BASELINE_ONLY.with(|b| b.set(other.2));
        let plain = solve_with(&p, start.as_deref(), other.0, other.1);
        BASELINE_ONLY.with(|b| b.set(false));
        match (fast, plain) {
            (Ok(fast), Ok(plain)) => {
                prop_assert_eq!(bits(&fast.x), bits(&plain.x));
                prop_assert_eq!(fast.t.map(f64::to_bits), plain.t.map(f64::to_bits));
                prop_assert_eq!(fast.newton_steps, plain.newton_steps);
            }
            (fast, plain) => prop_assert_eq!(fast, plain),
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// The line search's decision from the estimated log sum
        /// (`change_at_most`) is the plain one, `head - log_ratio_sum(a, b) <=
        /// threshold`, bit for bit in its answer: slacks unchanged, moved by
        /// a few parts in 1e15 (the rounding-noise regime), by up to a factor
        /// 10^spread, or (spread 3) far enough that the estimate declines;
        /// thresholds within `offset` ulps of the exact change, where only the
        /// exact sum can decide, or (`far`) anywhere near it.
        #[test]
        fn armijo_decision_matches_the_plain_one(
            k in 1usize..3000,
            spread in 0i32..4,
            offset in -64i64..64,
            head_exp in -14i32..3,
            far in any::<bool>(),
            seed in any::<u64>(),
        ) {
            let mut seed = seed;
            let b = weights(k, &mut seed);
            let a: Vec<f64> = b
                .iter()
                .map(|b| match (lcg(&mut seed) * 4.0) as usize {
                    0 => *b,
                    1 => b * (1.0 + (lcg(&mut seed) - 0.5) * 1e-14),
                    2 => b * (0.5 + lcg(&mut seed)),
                    _ => b * 10f64.powf((lcg(&mut seed) * 2.0 - 1.0) * [0.1, 2.0, 6.0, 90.0][spread as usize]),
                })
                .collect();
            let head = (lcg(&mut seed) - 0.5) * 10f64.powi(head_exp);
            let exact = head - log_ratio_sum(&a, &b);
            let threshold = if far {
                exact + (lcg(&mut seed) - 0.5) * 10f64.powi(head_exp - 6)
            } else {
                exact + offset as f64 * exact.abs().max(1e-300) * f64::EPSILON
            };
            let recip: Vec<f64> = b.iter().map(|b| 1.0 / b).collect();
            prop_assert_eq!(change_at_most(head, &a, &b, Some(&recip), threshold), exact <= threshold);
            prop_assert_eq!(change_at_most(head, &a, &b, None, threshold), exact <= threshold);
        }

        /// The line search's whole test (`State::armijo_passes`: the trial's
        /// slacks, the domain check and the decision) answers as
        /// `barrier_change(..) <= threshold` does, on problems of every floor
        /// kind, for steps from 1 down to 2^-40 along a random direction and
        /// thresholds within a few ulps of the exact change.
        #[test]
        fn armijo_test_matches_the_barrier_change(m in 1usize..40, n in 1usize..6, floor in 0usize..3, offset in -8i64..8, seed in any::<u64>()) {
            let mut seed = seed;
            let scale: Vec<f64> = (0..m).map(|_| [1.0, 2.0, 4.0][(lcg(&mut seed) * 3.0) as usize]).collect();
            let capacity: Vec<f64> = (0..n).map(|_| 1.0 + (lcg(&mut seed) * 9.0).floor()).collect();
            let coef: Vec<f64> = (0..m * n).map(|_| 0.05 + lcg(&mut seed) * 5.0).collect();
            let lower: Vec<f64> = (0..m).map(|_| 0.001 * lcg(&mut seed)).collect();
            let floor = match floor {
                0 => Floor::None,
                1 => Floor::MaxMin { coef: &coef },
                _ => Floor::Bounds { coef: &coef, lower: &lower },
            };
            let p = Problem { jobs: m, types: n, scale: &scale, capacity: &capacity, linear: None, floor };
            // Bounds rows above the default start's floors (many jobs on one
            // small type) leave it outside: no line search starts there.
            let state = State::new(&p, None);
            prop_assume!(state.is_ok());
            let state = state.expect("checked");
            let k = constraint_count(&p);
            let mut s = vec![0.0; k];
            prop_assert!(slacks_into(&p, &state.x, state.t, &mut s));
            let dx: Vec<f64> = (0..m * n).map(|_| (lcg(&mut seed) - 0.5) * 0.2).collect();
            let dt = (lcg(&mut seed) - 0.5) * 0.01;
            let tau = 10f64.powi((lcg(&mut seed) * 12.0) as i32);
            let objective = state.objective(&p);
            let (mut a, mut b) = (vec![0.0; k], vec![0.0; k]);
            let recip: Vec<f64> = s.iter().map(|s| 1.0 / s).collect();
            let mut alpha = 1.0;
            for _ in 0..40 {
                let x: Vec<f64> = state.x.iter().zip(&dx).map(|(x, d)| x + alpha * d).collect();
                let t = state.t + alpha * dt;
                let change = State::barrier_change(&p, tau, objective, &s, &x, t, &mut a);
                let threshold = match change {
                    Some(c) => c + offset as f64 * c.abs().max(1e-300) * f64::EPSILON,
                    None => -alpha,
                };
                let plain = change.is_some_and(|c| c <= threshold);
                prop_assert_eq!(State::armijo_passes(&p, tau, objective, &s, Some(&recip), &x, t, &mut b, threshold), plain);
                alpha *= 0.5;
            }
        }

        /// A whole solve on this CPU's best path (the AVX2 twins where it has
        /// AVX2, see `twin!`) gives bit for bit the solve on the baseline
        /// path: the same x, t and step count, on problems of every kind and
        /// every type count (the unrolled 1-4 and the runtime-sized). On a CPU
        /// without AVX2 both sides are the baseline. A seeded bug, the AVX2
        /// copy of the slacks nudging one slack by an ulp, fails it at once.
        #[test]
        fn the_avx2_path_is_the_baseline_bit_for_bit(m in 1usize..40, n in 1usize..7, kind in 0usize..4, seed in any::<u64>()) {
            solves_agree(m, n, kind, seed, (true, true, true))?;
        }

        /// A whole solve that takes each accepted trial's slacks as the next
        /// Newton step's (`solve`) gives bit for bit the solve that
        /// recomputes them (`solve_with(.., false)`): the same x, t and step
        /// count, on problems of every kind (max-min, linear objective, both,
        /// and the analytic centre of `Bounds` rows). Debug builds also assert
        /// the reused slacks against recomputed ones at every step; a seeded
        /// bug, the swap left out (the previous iterate's slacks kept), fails
        /// it at once.
        #[test]
        fn reused_slacks_give_the_same_solve(m in 1usize..25, n in 1usize..6, kind in 0usize..4, seed in any::<u64>()) {
            solves_agree(m, n, kind, seed, (false, true, false))?;
        }

        /// A whole solve whose line searches stop at a failed trial equal to
        /// the current point (`solve`) gives bit for bit the solve that
        /// halves on to the stall (`solve_with(.., false)`): the same x, t
        /// and step count, on problems of every kind. A seeded bug, the stop
        /// without the cells' comparison (any failed trial below
        /// `alpha = 1e-9` that keeps t), fails it.
        #[test]
        fn stopping_at_a_stuck_trial_gives_the_same_solve(m in 1usize..25, n in 1usize..6, kind in 0usize..4, seed in any::<u64>()) {
            solves_agree(m, n, kind, seed, (true, false, false))?;
        }

        /// The specialized kernels (1-4 types unrolled, any other count at
        /// run time) give bit for bit what the kernels at 0efcfba gave, for
        /// every floor kind: factoring, solving, the t column's Schur
        /// complement, the slack maps, the step to the boundary and the
        /// line search's log sum (with some slacks unchanged).
        #[test]
        fn kernels_match_the_old_path_bit_for_bit(m in 1usize..30, n in 1usize..7, floor in 0usize..3, seed in any::<u64>()) {
            let mut seed = seed;
            let (scale, capacity, coef) = instance(m, n, &mut seed);
            let lower: Vec<f64> = (0..m).map(|_| lcg(&mut seed)).collect();
            let floor = match floor {
                0 => Floor::None,
                1 => Floor::MaxMin { coef: &coef },
                _ => Floor::Bounds { coef: &coef, lower: &lower },
            };
            let p = Problem { jobs: m, types: n, scale: &scale, capacity: &capacity, linear: None, floor };
            let k = constraint_count(&p);
            let mut work = Work::new(&p);
            work.w = weights(k, &mut seed);
            let denom = State::factor(&p, &mut work);
            let mut old_kkt = reference::Kkt::new(m, n);
            let (mut h, mut b) = (vec![0.0; m * n], vec![0.0; m * n]);
            let old_denom = reference::state_factor(&p, &work.w, &mut old_kkt, &mut h, &mut b);
            prop_assert_eq!(denom.to_bits(), old_denom.to_bits());
            prop_assert_eq!(bits(&work.b), bits(&b));
            let rhs: Vec<f64> = (0..m * n).map(|_| lcg(&mut seed) - 0.5).collect();
            let (mut out, mut old_out) = (vec![0.0; m * n], vec![0.0; m * n]);
            let coupling = work.kkt.solve(&p, &rhs, &mut out);
            let old_coupling = old_kkt.solve(&p, &rhs, &mut old_out);
            prop_assert_eq!(coupling.to_bits(), old_coupling.to_bits());
            prop_assert_eq!(bits(&out), bits(&old_out));
            let x: Vec<f64> = (0..m * n).map(|_| lcg(&mut seed) / n as f64 * 0.9).collect();
            let t = 0.01 * lcg(&mut seed);
            let (mut s, mut old_s) = (vec![0.0; k], vec![0.0; k]);
            prop_assert_eq!(slacks_into(&p, &x, t, &mut s), reference::slacks_into(&p, &x, t, &mut old_s));
            prop_assert_eq!(bits(&s), bits(&old_s));
            slack_change(&p, &rhs, t, &mut s);
            reference::slack_change(&p, &rhs, t, &mut old_s);
            prop_assert_eq!(bits(&s), bits(&old_s));
            let v: Vec<f64> = (0..k).map(|_| lcg(&mut seed) - 0.3).collect();
            let (mut g, mut old_g) = (vec![0.0; m * n], vec![0.0; m * n]);
            let gt = transpose_apply(&p, &v, &mut g);
            prop_assert_eq!(gt.to_bits(), reference::transpose_apply(&p, &v, &mut old_g).to_bits());
            prop_assert_eq!(bits(&g), bits(&old_g));
            let y = weights(k, &mut seed);
            prop_assert_eq!(step_to_boundary(&y, &v).to_bits(), reference::step_to_boundary(&y, &v).to_bits());
            let moved: Vec<f64> = y.iter().map(|y| if lcg(&mut seed) < 0.5 { *y } else { y * (0.5 + lcg(&mut seed)) }).collect();
            prop_assert_eq!(log_ratio_sum(&moved, &y).to_bits(), reference::log_ratio_sum(&moved, &y).to_bits());
        }
    }
}
