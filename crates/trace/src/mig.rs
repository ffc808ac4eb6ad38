//! MIG data files: GPU geometries (`data/mig_geometry.toml`) and speed-versus-slice
//! curves (`data/mig_curves.toml`). Both are bundled (compiled in) and may be
//! replaced by a user's file; every error names the file, the entry and the field.

use std::path::Path;

use cotenant_core::mig::{MigGeometry, MigProfile};
use cotenant_perf::slice_speed::{SliceCurve, CURVE_SLICES};
use serde::Deserialize;

use crate::suggest::toml_error;
use crate::text::read_text;
use crate::TraceError;

/// The bundled geometry file's text and its name in errors.
pub const BUNDLED_GEOMETRY: (&str, &str) =
    (include_str!("../data/mig_geometry.toml"), "crates/trace/data/mig_geometry.toml");
/// The bundled curves file's text and its name in errors.
pub const BUNDLED_CURVES: (&str, &str) =
    (include_str!("../data/mig_curves.toml"), "crates/trace/data/mig_curves.toml");

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GeometryFile {
    gpu: Vec<GpuEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GpuEntry {
    name: String,
    memory_slots: u8,
    #[serde(default)]
    allow_4g_3g: bool,
    profiles: Vec<ProfileEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileEntry {
    name: String,
    compute_slices: u8,
    memory_slots: u8,
    starts: Vec<u8>,
    max_instances: u8,
    sms: u32,
}

/// Reads a geometry file.
pub fn read_mig_geometry(path: &Path) -> Result<Vec<MigGeometry>, TraceError> {
    parse_mig_geometry(&read_text(path)?, &path.display().to_string())
}

/// The bundled geometries (A100-40GB, H100-80GB, H200).
pub fn bundled_mig_geometry() -> Result<Vec<MigGeometry>, TraceError> {
    parse_mig_geometry(BUNDLED_GEOMETRY.0, BUNDLED_GEOMETRY.1)
}

/// Parses geometry TOML; `source` names it in errors. Each geometry is checked
/// (`MigGeometry::validate`), and the error names `[[gpu]] NAME` and the field.
pub fn parse_mig_geometry(text: &str, source: &str) -> Result<Vec<MigGeometry>, TraceError> {
    let file: GeometryFile =
        toml::from_str(text).map_err(|e| TraceError::Toml(toml_error(text, source, &e)))?;
    let mut out: Vec<MigGeometry> = Vec::new();
    for entry in file.gpu {
        let context = format!("{source} [[gpu]] {}", entry.name);
        if out.iter().any(|g| g.gpu == entry.name) {
            return Err(TraceError::config(&context, "name", "appears twice"));
        }
        let geometry = MigGeometry {
            gpu: entry.name,
            memory_slots: entry.memory_slots,
            allow_4g_3g: entry.allow_4g_3g,
            profiles: entry
                .profiles
                .into_iter()
                .map(|p| MigProfile {
                    name: p.name,
                    compute_slices: p.compute_slices,
                    memory_slots: p.memory_slots,
                    starts: p.starts,
                    max_instances: p.max_instances,
                    sms: p.sms,
                })
                .collect(),
        };
        if let Err(error) = geometry.validate() {
            let key = match &error {
                cotenant_core::mig::MigError::BadProfile { profile, field, .. } => {
                    format!("profiles.{profile}.{field}")
                }
                cotenant_core::mig::MigError::BadMemorySlots { .. } => "memory_slots".to_string(),
                _ => "profiles".to_string(),
            };
            return Err(TraceError::config(&context, &key, error.to_string()));
        }
        out.push(geometry);
    }
    Ok(out)
}

/// The geometry of `gpu`, or an error naming the file's GPU types.
pub fn geometry_for<'a>(geometries: &'a [MigGeometry], gpu: &str) -> Option<&'a MigGeometry> {
    geometries.iter().find(|g| g.gpu.eq_ignore_ascii_case(gpu))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CurvesFile {
    class: Vec<ClassEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClassEntry {
    name: String,
    speeds: Vec<f64>,
    weight: f64,
    provenance: String,
}

/// A job class: its curve, its share of a generated workload and where it comes from.
#[derive(Clone, Debug, PartialEq)]
pub struct CurveClass {
    pub curve: SliceCurve,
    pub weight: f64,
    pub provenance: String,
}

pub fn read_slice_curves(path: &Path) -> Result<Vec<CurveClass>, TraceError> {
    parse_slice_curves(&read_text(path)?, &path.display().to_string())
}

pub fn bundled_slice_curves() -> Result<Vec<CurveClass>, TraceError> {
    parse_slice_curves(BUNDLED_CURVES.0, BUNDLED_CURVES.1)
}

/// Parses curves TOML. A curve has 5 speeds (1g, 2g, 3g, 4g, 7g) in [0, 1],
/// the 7g one 1, zeros (does not fit) only before the first positive speed,
/// and positive speeds never decreasing with size.
pub fn parse_slice_curves(text: &str, source: &str) -> Result<Vec<CurveClass>, TraceError> {
    let file: CurvesFile =
        toml::from_str(text).map_err(|e| TraceError::Toml(toml_error(text, source, &e)))?;
    let mut out: Vec<CurveClass> = Vec::new();
    for (i, entry) in file.class.into_iter().enumerate() {
        let context = format!("{source} [[class]] #{} ({})", i + 1, entry.name);
        if entry.name.trim().is_empty() || out.iter().any(|c| c.curve.name == entry.name) {
            return Err(TraceError::config(&context, "name", "must be non-empty and unique"));
        }
        let speeds: [f64; 5] = entry.speeds.as_slice().try_into().map_err(|_| {
            TraceError::config(
                &context,
                "speeds",
                format!(
                    "needs {} values (for {:?} slices), got {}",
                    CURVE_SLICES.len(),
                    CURVE_SLICES,
                    entry.speeds.len()
                ),
            )
        })?;
        check_speeds(&speeds).map_err(|m| TraceError::config(&context, "speeds", m))?;
        if !(entry.weight.is_finite() && entry.weight >= 0.0) {
            return Err(TraceError::config(
                &context,
                "weight",
                format!("must be a non-negative number, got {}", entry.weight),
            ));
        }
        out.push(CurveClass {
            curve: SliceCurve { name: entry.name, speeds },
            weight: entry.weight,
            provenance: entry.provenance,
        });
    }
    if out.is_empty() {
        return Err(TraceError::file(source, "no [[class]] entries"));
    }
    if out.iter().all(|c| c.weight == 0.0) {
        return Err(TraceError::config(source, "weight", "every class has weight 0"));
    }
    Ok(out)
}

fn check_speeds(speeds: &[f64; 5]) -> Result<(), String> {
    if let Some(s) = speeds.iter().find(|s| !(s.is_finite() && (0.0..=1.0).contains(*s))) {
        return Err(format!("{s} is not in [0, 1]"));
    }
    if speeds[4] != 1.0 {
        return Err(format!("the 7g speed must be 1 (curves are normalized to 7g), got {}", speeds[4]));
    }
    let first = speeds.iter().position(|&s| s > 0.0).unwrap_or(4);
    for w in speeds[first..].windows(2) {
        if w[1] < w[0] || w[1] == 0.0 {
            return Err(format!("speeds must not decrease with slice size once positive: {speeds:?}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_files_parse() {
        let geometries = bundled_mig_geometry().unwrap();
        let names: Vec<&str> = geometries.iter().map(|g| g.gpu.as_str()).collect();
        assert_eq!(names, ["A100-40GB", "H100-80GB", "H200"]);
        assert_eq!(bundled_slice_curves().unwrap().len(), 4);
    }

    #[test]
    fn errors_name_file_entry_and_field() {
        let text = BUNDLED_GEOMETRY.0.replace(
            "starts = [0, 4], max_instances = 2, sms = 42",
            "starts = [0, 5], max_instances = 2, sms = 42",
        );
        let error = parse_mig_geometry(&text, "geo.toml").unwrap_err().to_string();
        assert!(
            error.contains("geo.toml [[gpu]] A100-40GB") && error.contains("profiles.3g.20gb.starts"),
            "{error}"
        );
        let text = "[[class]]\nname = \"x\"\nspeeds = [0.1, 0.2, 0.3, 1.0]\nweight = 1\nprovenance = \"\"\n";
        let error = parse_slice_curves(text, "c.toml").unwrap_err().to_string();
        assert!(error.contains("c.toml [[class]] #1 (x), key `speeds`: needs 5 values"), "{error}");
        let text =
            "[[class]]\nname = \"x\"\nspeeds = [0.5, 0.2, 0.3, 0.4, 1.0]\nweight = 1\nprovenance = \"\"\n";
        let error = parse_slice_curves(text, "c.toml").unwrap_err().to_string();
        assert!(error.contains("must not decrease"), "{error}");
        let error = parse_mig_geometry("[[gpu]]\nname = \"g\"\nmemory_slots = 8\nprofile = []\n", "g.toml")
            .unwrap_err();
        assert!(error.to_string().starts_with("g.toml line "), "{error}");
    }

    #[test]
    fn an_unknown_profile_is_an_error_naming_it() {
        let geometries = bundled_mig_geometry().unwrap();
        let a100 = geometry_for(&geometries, "a100-40gb").unwrap();
        let error = a100.partition_from_names("3g.20gb+5g.25gb").unwrap_err().to_string();
        assert_eq!(
            error,
            "A100-40GB: unknown MIG profile '5g.25gb' (known: 1g.5gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb)"
        );
        let p = a100.partition_from_names("1g.5gb+3g.20gb+2g.10gb").unwrap();
        assert_eq!(a100.check_partition(&p), Ok(()));
        assert!(a100.partition_from_names("4g.20gb+3g.20gb").is_err());
    }
}

#[cfg(test)]
mod partitions {
    use super::*;

    /// The A100-40GB partitions no other valid partition contains (as a multiset of
    /// profiles): the candidates `scripts/miso.sh` tries for the best static
    /// partition (keep the two in step).
    pub const A100_UNDOMINATED: &str = "1g.5gb+1g.5gb+1g.5gb+1g.5gb+1g.5gb+1g.5gb+1g.5gb \
2g.10gb+1g.5gb+1g.5gb+1g.5gb+1g.5gb+1g.5gb 3g.20gb+1g.5gb+1g.5gb+1g.5gb+1g.5gb \
2g.10gb+2g.10gb+1g.5gb+1g.5gb+1g.5gb 3g.20gb+2g.10gb+1g.5gb+1g.5gb 2g.10gb+2g.10gb+2g.10gb+1g.5gb \
3g.20gb+2g.10gb+2g.10gb 3g.20gb+3g.20gb 4g.20gb+1g.5gb+1g.5gb+1g.5gb 4g.20gb+2g.10gb+1g.5gb 7g.40gb";

    #[test]
    fn the_a100_partitions_the_static_baseline_tries() {
        let geometries = bundled_mig_geometry().unwrap();
        let a100 = geometry_for(&geometries, "A100-40GB").unwrap();
        let all = a100.distinct_partitions();
        // 36 multisets in all (4g+3g not allowed), non-maximal ones included.
        assert_eq!(all.len(), 36);
        let counts = |p: &Vec<cotenant_core::mig::MigInstance>| {
            let mut c = [0usize; 5];
            p.iter().for_each(|i| c[usize::from(i.profile)] += 1);
            c
        };
        let names: Vec<String> = all
            .iter()
            .filter(|p| {
                let mine = counts(p);
                !all.iter().any(|q| q.len() > p.len() && counts(q).iter().zip(mine).all(|(&a, b)| a >= b))
            })
            .map(|p| {
                let mut names: Vec<&str> =
                    p.iter().map(|&i| a100.profile(i).unwrap().name.as_str()).collect();
                names.sort_by_key(|n| std::cmp::Reverse(a100.profile_index(n).unwrap()));
                names.join("+")
            })
            .collect();
        assert_eq!(names.join(" "), A100_UNDOMINATED);
    }
}

#[cfg(test)]
mod limits {
    use super::*;

    #[test]
    fn bundled_geometries_are_far_below_the_partition_limit_and_a_huge_one_is_refused() {
        for geometry in bundled_mig_geometry().unwrap() {
            let count = geometry.partitions().len();
            assert!(count * 10 < cotenant_core::mig::MAX_PARTITIONS, "{}: {count}", geometry.gpu);
        }
        // Eight one-slot profiles that may start anywhere: millions of partitions.
        let profiles: String = (0..8)
            .map(|i| format!("  {{ name = \"p{i}\", compute_slices = 1, memory_slots = 1, starts = [0, 1, 2, 3, 4, 5, 6, 7], max_instances = 7, sms = 1 }},\n"))
            .collect();
        let text = format!("[[gpu]]\nname = \"X\"\nmemory_slots = 8\nprofiles = [\n{profiles}]\n");
        let error = parse_mig_geometry(&text, "x.toml").unwrap_err().to_string();
        assert!(
            error.contains("x.toml [[gpu]] X")
                && error.contains("the number of valid partitions exceeds the limit of 20000"),
            "{error}"
        );
    }
}
