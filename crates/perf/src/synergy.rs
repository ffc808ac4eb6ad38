//! Synergy's (OSDI'22) throughput matrices: how fast a job of each model class
//! runs with a given number of CPUs and GiB of memory per GPU, relative to the
//! GPU-proportional point (3 CPUs, 62.5 GB per GPU on a server of 8 V100, 24 CPUs
//! and 500 GB), which is 1.0.
//!
//! The bundled matrices (`data/synergy_matrices.txt`) are reconstructed from the
//! paper's account: its artifact ships no profiles (the file says how). A job
//! type names a class directly (`image`, `language`, `speech`) or one of the
//! models of Synergy's traces ([`class_of_model`]).
//!
//! The rate at an allocation ([`Matrix::rate`]) follows the paper: between the
//! proportional CPUs `c_fair` and the best-case CPUs `c_best` it is the capped-CPU
//! interpolation S' = T(c_fair) + (T(c_best) - T(c_fair)) (c - c_fair) / (c_best -
//! c_fair) (S' = 1 + (S - 1)(c - c_fair)/(c_best - c_fair) at proportional
//! memory), elsewhere piecewise-linear on the grid, clamped at its edges; memory
//! is piecewise-linear, and an allocation within 1 GiB of a grid value counts as
//! that value (allocations are whole GiB: 62 GiB is the 62.5 GB point).

/// The bundled matrices (reconstructed; see the file's header).
pub const BUNDLED_MATRICES: &str = include_str!("../data/synergy_matrices.txt");
/// The name errors give the bundled file.
pub const BUNDLED_NAME: &str = "crates/perf/data/synergy_matrices.txt";

/// Memory within this many GiB of a grid value counts as that value.
const MEMORY_SNAP_GIB: f64 = 1.0;
/// Most grid values per axis and most classes a file may declare.
const MAX_GRID: usize = 64;

/// One class's matrix, `values[cpu row][memory column]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Matrix {
    pub class: String,
    pub values: Vec<Vec<f64>>,
}

/// All classes over one grid.
#[derive(Clone, Debug, PartialEq)]
pub struct SynergyMatrices {
    pub cpus_per_gpu: Vec<f64>,
    pub memory_gib_per_gpu: Vec<f64>,
    /// Rate factor of a job whose GPUs span servers.
    pub span_penalty: f64,
    pub classes: Vec<Matrix>,
}

/// A matrix file that cannot be read: names the file, line and field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file} line {line}, field {field}: {message}")]
pub struct MatrixError {
    pub file: String,
    pub line: usize,
    pub field: String,
    pub message: String,
}

/// A demand per GPU: CPUs and GiB of memory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PerGpu {
    pub cpus: f64,
    pub memory_gib: f64,
}

/// The class of one of the models in Synergy's traces, by its name there.
pub fn class_of_model(model: &str) -> Option<&'static str> {
    let m = model.to_ascii_lowercase();
    let image = ["alexnet", "res", "mobilenet", "shufflenet", "vgg", "inception", "squeezenet"];
    if image.iter().any(|p| m.starts_with(p)) {
        return Some("image");
    }
    if ["gnmt", "lstm", "transformer", "bert", "gpt"].iter().any(|p| m.starts_with(p)) {
        return Some("language");
    }
    if m.starts_with("deepspeech") || m.starts_with("speech") {
        return Some("speech");
    }
    None
}

impl SynergyMatrices {
    /// The bundled matrices.
    pub fn bundled() -> SynergyMatrices {
        #[allow(clippy::expect_used)]
        SynergyMatrices::parse(BUNDLED_NAME, BUNDLED_MATRICES).expect("the bundled Synergy matrices parse")
    }

    /// The matrix for a job type named by class or by model; `None` if unknown.
    pub fn for_job_type(&self, name: &str) -> Option<&Matrix> {
        let class = self.classes.iter().find(|m| m.class.eq_ignore_ascii_case(name));
        class.or_else(|| {
            let class = class_of_model(name)?;
            self.classes.iter().find(|m| m.class == class)
        })
    }

    /// The GPU-proportional point of the reference server (3 CPUs, 62.5 GB per GPU):
    /// the grid point whose value is 1.0 in every class.
    pub fn fair(&self) -> PerGpu {
        PerGpu { cpus: REFERENCE_FAIR.cpus, memory_gib: REFERENCE_FAIR.memory_gib }
    }

    /// Parses the text form (see the bundled file). `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<SynergyMatrices, MatrixError> {
        let err = |line: usize, field: &str, message: String| MatrixError {
            file: file.to_string(),
            line,
            field: field.to_string(),
            message,
        };
        let mut cpus: Option<Vec<f64>> = None;
        let mut memory: Option<Vec<f64>> = None;
        let mut span_penalty = 1.0;
        let mut classes: Vec<(usize, Matrix)> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let body = raw.split('#').next().unwrap_or("").trim();
            if body.is_empty() {
                continue;
            }
            if let Some(name) = body.strip_prefix('[').and_then(|b| b.strip_suffix(']')) {
                let name = name.trim();
                if name.is_empty() || classes.iter().any(|(_, m)| m.class == name) {
                    return Err(err(line, "class", format!("empty or repeated class name {name:?}")));
                }
                if classes.len() >= MAX_GRID {
                    return Err(err(line, "class", format!("more than {MAX_GRID} classes")));
                }
                classes.push((line, Matrix { class: name.to_string(), values: Vec::new() }));
                continue;
            }
            let Some((key, value)) = body.split_once('=') else {
                return Err(err(line, body, "expected `key = values` or `[class]`".into()));
            };
            let key = key.trim();
            let numbers = |field: &str| -> Result<Vec<f64>, MatrixError> {
                let values: Vec<f64> = value
                    .split_whitespace()
                    .map(|v| match v.parse::<f64>() {
                        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
                        _ => Err(err(line, field, format!("{v:?} is not a positive number"))),
                    })
                    .collect::<Result<_, _>>()?;
                if values.is_empty() || values.len() > MAX_GRID {
                    return Err(err(line, field, format!("expected 1 to {MAX_GRID} numbers")));
                }
                Ok(values)
            };
            match (key, classes.last_mut()) {
                ("cpus_per_gpu", None) => cpus = Some(increasing(numbers(key)?, line, key, &err)?),
                ("memory_gib_per_gpu", None) => memory = Some(increasing(numbers(key)?, line, key, &err)?),
                ("span_penalty", None) => {
                    span_penalty = numbers(key)?[0];
                    if span_penalty > 1.0 {
                        return Err(err(line, key, format!("{span_penalty} is over 1 (a penalty slows down)")));
                    }
                }
                (row, Some((_, matrix))) if row.starts_with("cpus ") => {
                    let field = format!("[{}] {row}", matrix.class);
                    let grid = cpus.as_ref().ok_or_else(|| err(line, &field, "before cpus_per_gpu".into()))?;
                    let want = grid.get(matrix.values.len()).copied();
                    let stated = row["cpus ".len()..].trim().parse::<f64>().ok();
                    if stated.is_none() || stated != want {
                        return Err(err(
                            line,
                            &field,
                            format!("rows must follow cpus_per_gpu in order; expected cpus {want:?}"),
                        ));
                    }
                    let columns = memory.as_ref().map_or(0, Vec::len);
                    let values = numbers(&field)?;
                    if values.len() != columns {
                        return Err(err(
                            line,
                            &field,
                            format!("{} values; memory_gib_per_gpu has {columns}", values.len()),
                        ));
                    }
                    matrix.values.push(values);
                }
                _ => return Err(err(line, key, "unknown key (known: cpus_per_gpu, memory_gib_per_gpu, span_penalty, then `[class]` with `cpus C = ...` rows)".into())),
            }
        }
        let cpus = cpus.ok_or_else(|| err(0, "cpus_per_gpu", "missing".into()))?;
        let memory = memory.ok_or_else(|| err(0, "memory_gib_per_gpu", "missing".into()))?;
        if classes.is_empty() {
            return Err(err(0, "class", "no `[class]` matrices".into()));
        }
        let matrices = SynergyMatrices {
            cpus_per_gpu: cpus,
            memory_gib_per_gpu: memory,
            span_penalty,
            classes: Vec::new(),
        };
        let fair = (matrices.cpu_row(REFERENCE_FAIR.cpus), matrices.memory_column(REFERENCE_FAIR.memory_gib));
        let (Some(fair_row), Some(fair_column)) = fair else {
            return Err(err(
                0,
                "cpus_per_gpu",
                "the grid must contain the proportional point 3 CPUs, 62.5 GB".into(),
            ));
        };
        let mut matrices = matrices;
        for (line, matrix) in classes {
            let field = format!("[{}]", matrix.class);
            if matrix.values.len() != matrices.cpus_per_gpu.len() {
                return Err(err(
                    line,
                    &field,
                    format!("{} rows; cpus_per_gpu has {}", matrix.values.len(), matrices.cpus_per_gpu.len()),
                ));
            }
            let at_fair = matrix.values[fair_row][fair_column];
            if (at_fair - 1.0).abs() > 1e-9 {
                return Err(err(line, &field, format!("the proportional point is {at_fair}, must be 1.0")));
            }
            matrices.classes.push(matrix);
        }
        Ok(matrices)
    }

    fn cpu_row(&self, cpus: f64) -> Option<usize> {
        self.cpus_per_gpu.iter().position(|&c| (c - cpus).abs() < 1e-9)
    }
    fn memory_column(&self, memory_gib: f64) -> Option<usize> {
        self.memory_gib_per_gpu.iter().position(|&m| (m - memory_gib).abs() < 1e-9)
    }

    /// The smallest grid point reaching the class's peak: least (c / c_fair + m /
    /// m_fair), then fewer CPUs.
    pub fn best_case(&self, matrix: &Matrix) -> PerGpu {
        let peak = matrix.values.iter().flatten().copied().fold(0.0, f64::max);
        let mut best: Option<(f64, f64, PerGpu)> = None;
        for (r, row) in matrix.values.iter().enumerate() {
            for (c, &value) in row.iter().enumerate() {
                if value < peak - 1e-9 {
                    continue;
                }
                let point = PerGpu { cpus: self.cpus_per_gpu[r], memory_gib: self.memory_gib_per_gpu[c] };
                let cost = point.cpus / REFERENCE_FAIR.cpus + point.memory_gib / REFERENCE_FAIR.memory_gib;
                if best.is_none_or(|(b, bc, _)| (cost, point.cpus) < (b, bc)) {
                    best = Some((cost, point.cpus, point));
                }
            }
        }
        best.map_or(self.fair(), |(_, _, p)| p)
    }

    /// Throughput relative to the proportional point at `at` per GPU (see the module doc).
    pub fn rate(&self, matrix: &Matrix, at: PerGpu) -> f64 {
        let memory = self.snap_memory(at.memory_gib);
        let fair = self.fair().cpus;
        let best = self.best_case(matrix).cpus;
        let on_grid = |cpus: f64| self.interpolate(matrix, cpus, memory);
        if at.cpus >= fair && at.cpus <= best && best > fair {
            let (low, high) = (on_grid(fair), on_grid(best));
            return low + (high - low) * (at.cpus - fair) / (best - fair);
        }
        on_grid(at.cpus)
    }

    fn snap_memory(&self, memory_gib: f64) -> f64 {
        self.memory_gib_per_gpu
            .iter()
            .copied()
            .find(|m| (m - memory_gib).abs() < MEMORY_SNAP_GIB)
            .unwrap_or(memory_gib)
    }

    /// Bilinear on the grid, clamped at its edges.
    fn interpolate(&self, matrix: &Matrix, cpus: f64, memory_gib: f64) -> f64 {
        let (r0, r1, rt) = bracket(&self.cpus_per_gpu, cpus);
        let (c0, c1, ct) = bracket(&self.memory_gib_per_gpu, memory_gib);
        let row = |r: usize| matrix.values[r][c0] * (1.0 - ct) + matrix.values[r][c1] * ct;
        row(r0) * (1.0 - rt) + row(r1) * rt
    }
}

/// The proportional point of Synergy's server (24 CPUs and 500 GB over 8 GPUs).
const REFERENCE_FAIR: PerGpu = PerGpu { cpus: 3.0, memory_gib: 62.5 };

/// The grid cells around `x`: (lower index, upper index, fraction), clamped.
fn bracket(grid: &[f64], x: f64) -> (usize, usize, f64) {
    let last = grid.len() - 1;
    if x <= grid[0] {
        return (0, 0, 0.0);
    }
    if x >= grid[last] {
        return (last, last, 0.0);
    }
    let upper = grid.iter().position(|&g| g >= x).unwrap_or(last);
    let lower = upper - 1;
    (lower, upper, (x - grid[lower]) / (grid[upper] - grid[lower]))
}

fn increasing(
    values: Vec<f64>,
    line: usize,
    field: &str,
    err: &dyn Fn(usize, &str, String) -> MatrixError,
) -> Result<Vec<f64>, MatrixError> {
    if values.windows(2).any(|w| w[0] >= w[1]) {
        return Err(err(line, field, "values must increase".into()));
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_matrices_are_normalized_and_have_the_documented_shape() {
        let m = SynergyMatrices::bundled();
        let names: Vec<&str> = m.classes.iter().map(|c| c.class.as_str()).collect();
        assert_eq!(names, ["image", "speech", "language"]);
        let image = m.for_job_type("res18").unwrap();
        // Best case: the peak 2.464 first reached at 12 CPUs and 125 GB per GPU.
        assert_eq!(m.best_case(image), PerGpu { cpus: 12.0, memory_gib: 125.0 });
        let language = m.for_job_type("language").unwrap();
        assert_eq!(m.best_case(language), PerGpu { cpus: 2.0, memory_gib: 62.5 });
        // At the proportional point every class runs at 1.0; 62 GiB snaps to 62.5.
        for class in &m.classes {
            assert_eq!(m.rate(class, PerGpu { cpus: 3.0, memory_gib: 62.0 }), 1.0);
        }
    }

    #[test]
    fn capped_cpus_interpolate_between_fair_and_best() {
        let m = SynergyMatrices::bundled();
        let image = m.for_job_type("image").unwrap();
        // S = T(12, 62.5) = 2.2 at proportional memory; 6 CPUs: 1 + 1.2 x (6-3)/(12-3) = 1.4
        // (the grid itself says 1.68 at 6: S' is the paper's linear estimate, not the grid).
        let r = m.rate(image, PerGpu { cpus: 6.0, memory_gib: 62.5 });
        assert!((r - 1.4).abs() < 1e-12, "{r}");
        // Below proportional, the grid: halfway between 1 CPU (0.4) and 2 (0.72) at 62.5 GB.
        let r = m.rate(image, PerGpu { cpus: 1.5, memory_gib: 62.5 });
        assert!((r - 0.56).abs() < 1e-12, "{r}");
    }

    #[test]
    fn malformed_files_name_file_line_and_field() {
        let good = "cpus_per_gpu = 1 3\nmemory_gib_per_gpu = 62.5\n[x]\ncpus 1 = 0.5\ncpus 3 = 1.0\n";
        assert!(SynergyMatrices::parse("m.txt", good).is_ok());
        let short = good.replace("cpus 3 = 1.0", "cpus 3 = 1.0 2.0");
        let e = SynergyMatrices::parse("m.txt", &short).unwrap_err();
        assert_eq!((e.file.as_str(), e.line, e.field.as_str()), ("m.txt", 5, "[x] cpus 3"));
        assert!(e.to_string().contains("2 values; memory_gib_per_gpu has 1"), "{e}");
        let bad = good.replace("0.5", "fast");
        let e = SynergyMatrices::parse("m.txt", &bad).unwrap_err();
        assert_eq!(e.to_string(), "m.txt line 4, field [x] cpus 1: \"fast\" is not a positive number");
        let unnormalized = good.replace("cpus 3 = 1.0", "cpus 3 = 1.2");
        let e = SynergyMatrices::parse("m.txt", &unnormalized).unwrap_err();
        assert!(e.to_string().contains("must be 1.0"), "{e}");
        let missing_row = good.replace("cpus 3 = 1.0\n", "");
        let e = SynergyMatrices::parse("m.txt", &missing_row).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (3, "[x]"));
    }
}
