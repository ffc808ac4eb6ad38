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
    /// Dense FP8 tensor throughput, TFLOP/s; 0 for a GPU without FP8 tensor cores (see
    /// [`GPU_CATALOG`] for the sources and [`GpuSpec::fp8_linear_tflops`] for how FP8
    /// weights run on such a GPU).
    pub fp8_tflops: f64,
}

const fn gpu(name: &'static str, tflops: f64, tb_s: f64, gib: f64, link: f64, fp8: f64) -> GpuSpec {
    GpuSpec {
        name,
        dense_tflops: tflops,
        memory_tb_per_s: tb_s,
        memory_gib: gib,
        interconnect_gb_per_s: link,
        fp8_tflops: fp8,
    }
}

/// Bytes in one GiB.
pub const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

impl GpuSpec {
    /// Memory in bytes: `memory_gib` x 2^30.
    pub fn memory_bytes(&self) -> f64 {
        self.memory_gib * GIB
    }

    /// Whether the GPU has FP8 tensor cores (compute capability 8.9 or later).
    pub fn has_fp8(&self) -> bool {
        self.fp8_tflops > 0.0
    }

    /// The peak the linear layers of an FP8-weight model run at, TFLOP/s: the FP8 tensor
    /// peak where the GPU has one (vLLM's W8A8 path: weights and activations in FP8),
    /// else the dense 16-bit peak, because without FP8 tensor cores vLLM runs FP8
    /// checkpoints weight-only (W8A16, the FP8 Marlin kernel): the weights are read as
    /// FP8 (half the bytes) and dequantized to bf16 in the kernel, so the matrix
    /// multiply itself runs at the bf16 rate.
    pub fn fp8_linear_tflops(&self) -> f64 {
        if self.has_fp8() {
            self.fp8_tflops
        } else {
            self.dense_tflops
        }
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
///
/// FP8 (the last column), dense, from the same datasheets, which print the sparse figure
/// (twice the dense one) with an asterisk:
/// - H100-SXM: "FP8 Tensor Core 3,958 teraFLOPS*" -> 1,979 dense, 2x its 989 bf16.
/// - H200: "FP8 Tensor Core 3,958 TFLOPS*" -> 1,979 dense (the same Hopper die as H100).
/// - L4: "FP8 Tensor Core 485 teraFLOPs*" -> 242.5 dense, 2x its 121 bf16 (Ada Lovelace).
/// - A100, A6000 (Ampere), V100, P100, K80: no FP8 tensor cores (0). vLLM runs FP8
///   checkpoints there weight-only (W8A16) with the FP8 Marlin kernel ("FP8 computation
///   is supported on NVIDIA GPUs with compute capability >= 8.9 ... FP8 models will run
///   on compute capability >= 7.5 as weight-only W8A16, utilizing FP8 Marlin", vLLM docs,
///   features/quantization/fp8; vllm-project/vllm PR #5975), so compute stays at the
///   bf16 peak ([`GpuSpec::fp8_linear_tflops`]).
pub const GPU_CATALOG: &[GpuSpec] = &[
    gpu("A100-80G", 312.0, 2.039, 80.0, 300.0, 0.0),
    gpu("A100-40G", 312.0, 1.555, 40.0, 300.0, 0.0),
    gpu("H100-SXM", 989.0, 3.35, 80.0, 450.0, 1979.0),
    gpu("H200", 989.0, 4.8, 141.0, 450.0, 1979.0),
    gpu("L4", 121.0, 0.30, 24.0, 32.0, 242.5),
    gpu("V100", 125.0, 0.9, 32.0, 150.0, 0.0),
    gpu("P100", 18.7, 0.732, 16.0, 80.0, 0.0),
    gpu("K80", 8.7, 0.48, 24.0, 16.0, 0.0),
    gpu("A6000", 154.8, 0.768, 48.0, 112.5, 0.0),
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

    /// Hopper and Ada have FP8 tensor cores at twice their bf16 peak; Ampere runs FP8
    /// weights at its bf16 peak (weight-only).
    #[test]
    fn fp8_peaks() {
        for (name, fp8) in
            [("H100-SXM", true), ("H200", true), ("L4", true), ("A100-80G", false), ("V100", false)]
        {
            let g = find_gpu(name).expect("catalog");
            assert_eq!(g.has_fp8(), fp8, "{name}");
            let expected = if fp8 { 2.0 * g.dense_tflops } else { g.dense_tflops };
            assert!((g.fp8_linear_tflops() - expected).abs() <= 1.0, "{name}");
        }
    }
}
