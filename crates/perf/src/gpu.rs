//! GPU catalog: peak dense 16-bit throughput, HBM bandwidth, memory and NVLink bandwidth.
//!
//! Figures are vendor datasheet peaks (dense, no sparsity). K80, P100 and V100 have no
//! bf16; their 16-bit figure is the best dense fp16 (or fp32 for K80) rate, kept only so
//! the cluster side can name them.
//!
//! Memory is in GiB (2^30 bytes). Datasheets write "80GB" for HBM stacks that hold
//! 80 GiB (81,920 MiB): `nvidia-smi` on an "H100 80GB HBM3" shows 81,559 MiB after the
//! driver's reservation, on an H200 ("141GB") 143,771 MiB, both within 0.5% of the
//! GiB reading and 7% above the decimal one. vLLM's `gpu_memory_utilization` is a
//! fraction of that binary total. Bandwidths stay in
//! decimal units (TB/s, GB/s), as datasheets and link specifications give them.

/// One GPU model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GpuSpec {
    pub name: &'static str,
    /// Dense bf16 (or best 16-bit) tensor throughput, TFLOP/s.
    pub dense_tflops: f64,
    /// HBM (or GDDR) bandwidth, TB/s.
    pub memory_tb_per_s: f64,
    /// Memory, GiB (2^30 bytes): the datasheet's "GB" figure, which for HBM and GDDR
    /// parts is a binary capacity.
    pub memory_gib: f64,
    /// Per-GPU NVLink bandwidth (one direction), GB/s; PCIe 4.0 x16 (32 GB/s) when no NVLink.
    pub interconnect_gb_per_s: f64,
}

const fn gpu(name: &'static str, tflops: f64, tb_s: f64, gib: f64, link: f64) -> GpuSpec {
    GpuSpec {
        name,
        dense_tflops: tflops,
        memory_tb_per_s: tb_s,
        memory_gib: gib,
        interconnect_gb_per_s: link,
    }
}

/// Bytes in one GiB.
pub const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

impl GpuSpec {
    /// Memory in bytes: `memory_gib` x 2^30.
    pub fn memory_bytes(&self) -> f64 {
        self.memory_gib * GIB
    }
}

/// Every GPU the project knows, by canonical name.
///
/// Memory, entry by entry, from the vendor's datasheet:
/// - A100-80G: "80GB HBM2e" (NVIDIA A100 Tensor Core GPU datasheet), 80 GiB.
/// - A100-40G: "40GB HBM2" (same datasheet), 40 GiB.
/// - H100-SXM: "80GB" HBM3 (NVIDIA H100 Tensor Core GPU datasheet, SXM column), 80 GiB.
/// - H200: "141GB" HBM3e (NVIDIA H200 Tensor Core GPU datasheet), 141 GiB (`nvidia-smi`
///   reports 143,771 MiB = 140.4 GiB).
/// - L4: "24GB" GDDR6 (NVIDIA L4 datasheet), 24 GiB.
/// - V100: "32GB" HBM2 (NVIDIA V100 datasheet, SXM2 32 GB), 32 GiB.
/// - P100: "16GB" CoWoS HBM2 (NVIDIA Tesla P100 datasheet), 16 GiB.
/// - K80: "24 GB of GDDR5" per board (NVIDIA Tesla K80 datasheet), 24 GiB; the board is
///   two GK210 GPUs of 12 GiB each, and like its throughput and bandwidth the figure is
///   the board's (the cluster side schedules K80 boards).
/// - A6000: "48 GB GDDR6" (NVIDIA RTX A6000 datasheet), 48 GiB; 154.8 dense fp16 tensor
///   TFLOPS, 768 GB/s, 112.5 GB/s NVLink bridge. The SJF-BSBF paper's 48 GB GPU.
pub const GPU_CATALOG: &[GpuSpec] = &[
    gpu("A100-80G", 312.0, 2.039, 80.0, 300.0),
    gpu("A100-40G", 312.0, 1.555, 40.0, 300.0),
    gpu("H100-SXM", 989.0, 3.35, 80.0, 450.0),
    gpu("H200", 989.0, 4.8, 141.0, 450.0),
    gpu("L4", 121.0, 0.30, 24.0, 32.0),
    gpu("V100", 125.0, 0.9, 32.0, 150.0),
    gpu("P100", 18.7, 0.732, 16.0, 80.0),
    gpu("K80", 8.7, 0.48, 24.0, 16.0),
    gpu("A6000", 154.8, 0.768, 48.0, 112.5),
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
        assert_eq!(find_gpu("k80").map(|g| g.memory_gib), Some(24.0));
        assert!(find_gpu("tpu").is_none());
    }

    #[test]
    fn memory_is_binary() {
        // An "80GB" H100 holds 80 x 2^30 = 85,899,345,920 bytes, not 80e9.
        let h100 = find_gpu("h100").expect("catalog");
        assert_eq!(h100.memory_bytes(), 85_899_345_920.0);
    }
}
