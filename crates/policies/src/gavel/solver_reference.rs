//! The solver's kernels as they were at 0efcfba, before they were specialized
//! on the GPU-type count and the line search skipped unchanged slacks:
//! tests check that the new ones give the same bits (test-only).

use super::{dot, floor_coef, Floor, Problem};

/// Writes `h - G z` into `s`; false if some slack is not strictly positive.
pub(super) fn slacks_into(p: &Problem<'_>, x: &[f64], t: f64, s: &mut [f64]) -> bool {
    let (m, n) = (p.jobs, p.types);
    let (sx, rest) = s.split_at_mut(m * n);
    let (cap, rest) = rest.split_at_mut(n);
    let (row, floor) = rest.split_at_mut(m);
    sx.copy_from_slice(x);
    cap.copy_from_slice(p.capacity);
    for i in 0..m {
        let xi = &x[i * n..(i + 1) * n];
        let mut used = 0.0;
        for (j, v) in xi.iter().enumerate() {
            cap[j] -= p.scale[i] * v;
            used += v;
        }
        row[i] = 1.0 - used;
        match p.floor {
            Floor::None => {}
            Floor::MaxMin { coef } => floor[i] = dot(&coef[i * n..(i + 1) * n], xi) - t,
            Floor::Bounds { coef, lower } => floor[i] = dot(&coef[i * n..(i + 1) * n], xi) - lower[i],
        }
    }
    s.iter().all(|v| *v > 0.0)
}

/// `ds = -G (dx, dt)`: how the slacks change along a step.
pub(super) fn slack_change(p: &Problem<'_>, dx: &[f64], dt: f64, ds: &mut [f64]) {
    let (m, n) = (p.jobs, p.types);
    let (sx, rest) = ds.split_at_mut(m * n);
    let (cap, rest) = rest.split_at_mut(n);
    let (row, floor) = rest.split_at_mut(m);
    sx.copy_from_slice(dx);
    cap.fill(0.0);
    for i in 0..m {
        let di = &dx[i * n..(i + 1) * n];
        let mut used = 0.0;
        for (j, d) in di.iter().enumerate() {
            cap[j] -= p.scale[i] * d;
            used += d;
        }
        row[i] = -used;
        match p.floor {
            Floor::None => {}
            Floor::MaxMin { coef } => floor[i] = dot(&coef[i * n..(i + 1) * n], di) - dt,
            Floor::Bounds { coef, .. } => floor[i] = dot(&coef[i * n..(i + 1) * n], di),
        }
    }
}

/// `G^T v`: the x part into `gx`, the t part returned (0 without MaxMin).
pub(super) fn transpose_apply(p: &Problem<'_>, v: &[f64], gx: &mut [f64]) -> f64 {
    let (m, n) = (p.jobs, p.types);
    let (vx, rest) = v.split_at(m * n);
    let (cap, rest) = rest.split_at(n);
    let (row, floor) = rest.split_at(m);
    let coef = floor_coef(p);
    for i in 0..m {
        for (j, cap_j) in cap.iter().enumerate() {
            let k = i * n + j;
            let mut g = -vx[k] + p.scale[i] * cap_j + row[i];
            if let Some(c) = coef {
                g -= c[k] * floor[i];
            }
            gx[k] = g;
        }
    }
    if matches!(p.floor, Floor::MaxMin { .. }) {
        floor.iter().sum()
    } else {
        0.0
    }
}

/// Largest `alpha` keeping `v + alpha dv > 0` (infinite if nothing decreases).
pub(super) fn step_to_boundary(v: &[f64], dv: &[f64]) -> f64 {
    v.iter().zip(dv).filter(|(_, d)| **d < 0.0).map(|(v, d)| v / -d).fold(f64::INFINITY, f64::min)
}

pub(super) fn state_factor(p: &Problem<'_>, w: &[f64], kkt: &mut Kkt, h: &mut [f64], b: &mut [f64]) -> f64 {
    let (m, n) = (p.jobs, p.types);
    kkt.factor(p, w);
    let Floor::MaxMin { coef } = p.floor else { return 0.0 };
    let wf = &w[m * n + n + m..];
    for k in 0..m * n {
        h[k] = -coef[k] * wf[k / n];
    }
    // The capacity coupling `u^T S^{-1} u` of the t column comes with its solve.
    let coupling = kkt.solve(p, h, b);
    // The Schur complement of t, `H_tt - H_xt^T H_xx^{-1} H_xt`, summed
    // from nonnegative terms (subtracting the two sides directly loses
    // every digit once the floor weights are large): per job
    // `w_f / (1 + w_f gamma)` with `gamma = coef^T K^{-1} coef`, K the
    // job's block without its floor term (Sherman-Morrison, with the
    // Lagrange identity for the difference of products), plus the
    // capacity coupling.
    let wx = &w[..m * n];
    let wrow = &w[m * n + n..m * n + n + m];
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

/// `sum_k ln(a_k / b_k)` for positive `a` and `b`, with one `ln` per chunk of
/// ratios: the running product is flushed to the log sum before it can leave
/// [1e-100, 1e100], and a ratio outside [1e-100, 1e100] is logged alone.
pub(super) fn log_ratio_sum(a: &[f64], b: &[f64]) -> f64 {
    const FLUSH: f64 = 1e100;
    let (mut sum, mut product) = (0.0, 1.0);
    for (a, b) in a.iter().zip(b) {
        let ratio = a / b;
        if !(1.0 / FLUSH..=FLUSH).contains(&ratio) {
            sum += ratio.ln();
            continue;
        }
        product *= ratio;
        if !(1.0 / FLUSH..=FLUSH).contains(&product) {
            sum += product.ln();
            product = 1.0;
        }
    }
    sum + product.ln()
}

/// The x-block of `G^T diag(w) G`: block-diagonal per job (`diag(w_x) +
/// w_row 1 1^T + w_floor coef_i coef_i^T`) plus one rank-one term per GPU
/// type (`w_cap_j a_j a_j^T`, `a_j` the scale factors on type j's cells),
/// inverted with the Woodbury identity.
pub(super) struct Kkt {
    m: usize,
    n: usize,
    /// Inverse of each job's n x n block, row-major.
    block_inv: Vec<f64>,
    /// Cholesky factor of the n x n capacity Schur complement.
    schur: Vec<f64>,
    block: Vec<f64>,
}

impl Kkt {
    pub(super) fn new(m: usize, n: usize) -> Kkt {
        Kkt { m, n, block_inv: vec![0.0; m * n * n], schur: vec![0.0; n * n], block: vec![0.0; n * n] }
    }

    pub(super) fn factor(&mut self, p: &Problem<'_>, w: &[f64]) {
        let (m, n) = (self.m, self.n);
        let coef = floor_coef(p);
        let (wx, rest) = w.split_at(m * n);
        let (wcap, rest) = rest.split_at(n);
        let (wrow, wfloor) = rest.split_at(m);
        self.schur.fill(0.0);
        for (j, w) in wcap.iter().enumerate() {
            self.schur[j * n + j] = 1.0 / w;
        }
        for i in 0..m {
            let r = wrow[i];
            for a in 0..n {
                for b in 0..n {
                    let mut v = r;
                    if let Some(c) = coef {
                        v += c[i * n + a] * c[i * n + b] * wfloor[i];
                    }
                    if a == b {
                        v += wx[i * n + a];
                    }
                    self.block[a * n + b] = v;
                }
            }
            let inv = &mut self.block_inv[i * n * n..(i + 1) * n * n];
            invert_spd(&self.block, n, inv);
            let s2 = p.scale[i] * p.scale[i];
            for (acc, v) in self.schur.iter_mut().zip(inv.iter()) {
                *acc += s2 * v;
            }
        }
        cholesky(&mut self.schur, n);
    }

    /// Solves H_xx out = rhs. Returns the right-hand side's capacity coupling
    /// `|L^{-1} u|^2`, with `u = sum_i scale_i K_i^{-1} rhs_i` and L the factor
    /// of the Schur complement (what the max-min t column needs).
    pub(super) fn solve(&self, p: &Problem<'_>, rhs: &[f64], out: &mut [f64]) -> f64 {
        let (m, n) = (self.m, self.n);
        let mut u = [0.0; SMALL_TYPES];
        let mut big = Vec::new();
        let u: &mut [f64] = if n <= SMALL_TYPES {
            &mut u[..n]
        } else {
            big.resize(n, 0.0);
            &mut big
        };
        for i in 0..m {
            let inv = &self.block_inv[i * n * n..(i + 1) * n * n];
            for a in 0..n {
                let v: f64 = (0..n).map(|b| inv[a * n + b] * rhs[i * n + b]).sum();
                out[i * n + a] = v;
                u[a] += p.scale[i] * v;
            }
        }
        forward_substitute(&self.schur, n, u);
        let coupling = dot(u, u);
        back_substitute(&self.schur, n, u);
        for i in 0..m {
            let inv = &self.block_inv[i * n * n..(i + 1) * n * n];
            for a in 0..n {
                let v: f64 = (0..n).map(|b| inv[a * n + b] * u[b]).sum();
                out[i * n + a] -= p.scale[i] * v;
            }
        }
        coupling
    }
}

/// In-place Cholesky (lower triangle) of a symmetric positive definite matrix.
pub(super) fn cholesky(a: &mut [f64], n: usize) {
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
pub(super) fn forward_substitute(l: &[f64], n: usize, b: &mut [f64]) {
    for i in 0..n {
        let mut v = b[i];
        for k in 0..i {
            v -= l[i * n + k] * b[k];
        }
        b[i] = v / l[i * n + i];
    }
}

pub(super) fn cholesky_solve(l: &[f64], n: usize, b: &mut [f64]) {
    forward_substitute(l, n, b);
    back_substitute(l, n, b);
}

/// `b = L^{-T} b` for the lower-triangular Cholesky factor `l`.
pub(super) fn back_substitute(l: &[f64], n: usize, b: &mut [f64]) {
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

pub(super) fn invert_spd(a: &[f64], n: usize, out: &mut [f64]) {
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
