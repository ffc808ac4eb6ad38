//! The per-GPU parameters fitted to measured kernels (crates/perf/data/calibrated.toml,
//! written by `cotenant calibrate --write-params`; the file says which profiles and which
//! fit produced each number).

use crate::roofline::RooflineParams;

/// The embedded fitted parameters.
pub const CALIBRATED_TOML: &str = include_str!("../data/calibrated.toml");

/// The fitted parameters for `gpu` (a catalog name) at tensor-parallel degree `tp`; the
/// all-reduce fit of the nearest profiled degree. A GPU entry with `transfer_from` (no
/// profiles of its own) takes that GPU's fitted efficiencies, which are fractions of each
/// GPU's own datasheet peaks, so the catalog's FLOP/s, bandwidth and capacity still
/// apply. `None` for a GPU that was neither fitted nor transferred.
pub fn fitted(gpu: &str, tp: u32) -> Option<RooflineParams> {
    let table: toml::Table = CALIBRATED_TOML.parse().ok()?;
    let gpus = table.get("gpu")?;
    let mut entry = gpus.get(gpu)?;
    if let Some(source) = entry.get("transfer_from").and_then(toml::Value::as_str) {
        entry = gpus.get(source)?;
    }
    let number = |key: &str| entry.get(key).and_then(toml::Value::as_float);
    let five = |key: &str| -> Option<[f64; 5]> {
        let list = entry.get(key)?.as_array()?;
        let values: Vec<f64> = list.iter().filter_map(toml::Value::as_float).collect();
        values.try_into().ok()
    };
    let mut params = RooflineParams {
        compute_efficiency: number("compute_efficiency")?,
        memory_efficiency: number("memory_efficiency")?,
        linear_knee_exponent: number("linear_knee_exponent")?,
        linear_kernel_s: number("linear_kernel_us")? * 1e-6,
        elementwise_efficiency: five("elementwise_efficiency")?,
        elementwise_kernel_s: five("elementwise_kernel_us")?.map(|us| us * 1e-6),
        fixed_s: number("fixed_ms")? * 1e-3,
        ..RooflineParams::default()
    };
    if let Some(degrees) = entry.get("allreduce").and_then(toml::Value::as_table) {
        let nearest = degrees
            .iter()
            .filter_map(|(degree, fit)| Some((degree.parse::<u32>().ok()?, fit)))
            .min_by_key(|(degree, _)| (degree.abs_diff(tp), *degree));
        if let Some((_, fit)) = nearest {
            let optional = |key: &str| fit.get(key).and_then(toml::Value::as_float).unwrap_or(0.0);
            params.allreduce_latency_s = fit.get("latency_us")?.as_float()? * 1e-6;
            params.allreduce_bandwidth_gb_per_s = fit.get("bandwidth_gb_per_s")?.as_float()?;
            params.allreduce_floor_s = optional("floor_us") * 1e-6;
            params.allreduce_small_latency_s = optional("small_latency_us") * 1e-6;
            params.allreduce_small_bandwidth_gb_per_s = optional("small_bandwidth_gb_per_s");
        }
    }
    Some(params)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_file_parses_for_the_fitted_gpus() {
        let table: toml::Table = CALIBRATED_TOML.parse().expect("valid TOML");
        let gpus = table.get("gpu").and_then(toml::Value::as_table).expect("[gpu] tables");
        for name in gpus.keys() {
            let params = fitted(name, 4).unwrap_or_else(|| panic!("{name}: incomplete entry"));
            assert!(params.compute_efficiency > 0.0 && params.memory_efficiency > 0.0);
        }
        assert!(fitted("K80", 1).is_none());
    }

    /// H200 and A100-40G have no profiles: they take H100-SXM's and A100-80G's fitted
    /// efficiencies (the same silicon with other memory), applied to their own datasheet
    /// bandwidth by the roofline.
    #[test]
    fn transferred_gpus_take_their_source_fit() {
        for (gpu, source) in [("H200", "H100-SXM"), ("A100-40G", "A100-80G")] {
            for tp in [1, 2, 4, 8] {
                assert_eq!(fitted(gpu, tp), fitted(source, tp), "{gpu} at TP {tp}");
            }
            assert!(fitted(gpu, 1).is_some());
        }
    }
}
