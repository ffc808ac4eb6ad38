//! GPU catalog: peak dense 16-bit throughput, HBM bandwidth, memory and NVLink bandwidth.
//!
//! Figures are vendor datasheet peaks (dense, no sparsity). K80, P100 and V100 have no
//! bf16; their 16-bit figure is the best dense fp16 (or fp32 for K80) rate, kept only so
//! the cluster side can name them.

/// One GPU model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GpuSpec {
    pub name: &'static str,
    /// Dense bf16 (or best 16-bit) tensor throughput, TFLOP/s.
    pub dense_tflops: f64,
    /// HBM (or GDDR) bandwidth, TB/s.
    pub memory_tb_per_s: f64,
    pub memory_gb: f64,
    /// Per-GPU NVLink bandwidth (one direction), GB/s; PCIe 4.0 x16 (32 GB/s) when no NVLink.
    pub interconnect_gb_per_s: f64,
}

const fn gpu(name: &'static str, tflops: f64, tb_s: f64, gb: f64, link: f64) -> GpuSpec {
    GpuSpec { name, dense_tflops: tflops, memory_tb_per_s: tb_s, memory_gb: gb, interconnect_gb_per_s: link }
}

/// Every GPU the project knows, by canonical name.
pub const GPU_CATALOG: &[GpuSpec] = &[
    gpu("A100-80G", 312.0, 2.039, 80.0, 300.0),
    gpu("A100-40G", 312.0, 1.555, 40.0, 300.0),
    gpu("H100-SXM", 989.0, 3.35, 80.0, 450.0),
    gpu("H200", 989.0, 4.8, 141.0, 450.0),
    gpu("L4", 121.0, 0.30, 24.0, 32.0),
    gpu("V100", 125.0, 0.9, 32.0, 150.0),
    gpu("P100", 18.7, 0.732, 16.0, 80.0),
    gpu("K80", 8.7, 0.48, 24.0, 16.0),
];

/// Case-insensitive lookup that ignores `-`, `_` and spaces, and accepts the common
/// aliases `H100` (SXM) and `A100` (80 GB).
pub fn find_gpu(name: &str) -> Option<&'static GpuSpec> {
    let wanted = normalize(name);
    let wanted = match wanted.as_str() {
        "h100" | "h100sxm5" => "h100sxm".to_string(),
        "a100" | "a10080gb" | "a100sxm480gb" => "a10080g".to_string(),
        "a10040gb" => "a10040g".to_string(),
        "h200sxm" => "h200".to_string(),
        _ => wanted,
    };
    GPU_CATALOG.iter().find(|gpu| normalize(gpu.name) == wanted)
}

fn normalize(name: &str) -> String {
    name.chars().filter(|c| !matches!(c, '-' | '_' | ' ')).flat_map(char::to_lowercase).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_resolve() {
        assert_eq!(find_gpu("h100").map(|g| g.name), Some("H100-SXM"));
        assert_eq!(find_gpu("H100 SXM").map(|g| g.name), Some("H100-SXM"));
        assert_eq!(find_gpu("a100").map(|g| g.name), Some("A100-80G"));
        assert_eq!(find_gpu("k80").map(|g| g.memory_gb), Some(24.0));
        assert!(find_gpu("tpu").is_none());
    }
}
