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
    /// Network (NIC) bandwidth per GPU across nodes, one direction, GB/s: the node's
    /// scale-out bandwidth divided by its GPUs (see [`GPU_CATALOG`] for the reference
    /// system of each entry).
    pub nic_gb_per_s: f64,
    /// GPUs that reach each other at `interconnect_gb_per_s` (the NVLink domain: an 8-GPU
    /// node for HGX/DGX parts; the PCIe node, or an NVLink-bridged pair, otherwise).
    pub nvlink_domain_gpus: u32,
    /// Most MIG instances one GPU splits into (0: no MIG).
    pub mig_instances: u32,
    /// Architecture generation, which selects the training model's achievable fraction
    /// of peak (`perf::train::achievable_fraction`).
    pub generation: Generation,
}

/// NVIDIA architecture generation of a catalog GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Generation {
    Kepler,
    Pascal,
    Volta,
    Turing,
    Ampere,
    Ada,
    Hopper,
}

/// Scale-out figures of a catalog entry: NIC GB/s per GPU, NVLink domain size, MIG
/// instances, generation.
#[derive(Clone, Copy, Debug)]
struct Fabric(f64, u32, u32, Generation);

const fn gpu(name: &'static str, tflops: f64, tb_s: f64, gib: f64, link: f64, fp8: f64) -> PartialGpu {
    PartialGpu { name, tflops, tb_s, gib, link, fp8 }
}

/// A catalog entry's single-GPU figures, before its scale-out figures ([`Fabric`]).
#[derive(Clone, Copy, Debug)]
struct PartialGpu {
    name: &'static str,
    tflops: f64,
    tb_s: f64,
    gib: f64,
    link: f64,
    fp8: f64,
}

impl PartialGpu {
    const fn with(self, fabric: Fabric) -> GpuSpec {
        let Fabric(nic, domain, mig, generation) = fabric;
        GpuSpec {
            name: self.name,
            dense_tflops: self.tflops,
            memory_tb_per_s: self.tb_s,
            memory_gib: self.gib,
            interconnect_gb_per_s: self.link,
            fp8_tflops: self.fp8,
            nic_gb_per_s: nic,
            nvlink_domain_gpus: domain,
            mig_instances: mig,
            generation,
        }
    }
}

use Generation::{Ada, Ampere, Hopper, Kepler, Pascal, Turing, Volta};

/// DGX A100: eight 200 Gb/s HDR InfiniBand compute NICs for 8 GPUs (25 GB/s each).
const DGX_A100: Fabric = Fabric(25.0, 8, 7, Ampere);
/// DGX H100/H200: eight 400 Gb/s ConnectX-7 NICs for 8 GPUs (50 GB/s each).
const DGX_H100: Fabric = Fabric(50.0, 8, 7, Hopper);
/// Eight PCIe GPUs behind one 100 Gb/s NIC (AWS g4dn.metal T4, g5.48xlarge A10G,
/// g6.48xlarge L4): 12.5 GB/s / 8 = 1.5625 GB/s per GPU.
const PCIE_NODE_100G: f64 = 12.5 / 8.0;

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
/// - T4: "16 GB GDDR6", 320 GB/s, "65 FP16 TFLOPS" mixed-precision tensor (NVIDIA T4
///   datasheet), PCIe Gen3 x16 (16 GB/s one direction); Turing, no bf16, no FP8.
/// - A10: "24 GB GDDR6", 600 GB/s, "BF16 Tensor Core 125 TF" dense (NVIDIA A10
///   datasheet, 250 with sparsity), PCIe Gen4 x16 (32 GB/s one direction).
///
/// Scale-out figures ([`Fabric`]: NIC GB/s per GPU, NVLink domain, MIG instances): A100
/// and H100/H200 from the DGX A100 and DGX H100 user guides (8 compute NICs per 8 GPUs,
/// 200 Gb/s HDR and 400 Gb/s NDR; MIG up to 7 instances per the A100/H100/H200
/// datasheets); V100 and P100 from DGX-1 (4 x 100 Gb/s EDR InfiniBand for 8 GPUs:
/// 6.25 GB/s per GPU); K80 from AWS p2.16xlarge (8 boards, 25 Gb/s); T4, A10, L4 from AWS
/// g4dn.metal, g5.48xlarge, g6.48xlarge (8 GPUs, 100 Gb/s); A6000 pairs over its NVLink
/// bridge (domain 2). docs/training.md tabulates every figure with its source.
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
    gpu("A100-80G", 312.0, 2.039, 80.0, 300.0, 0.0).with(DGX_A100),
    gpu("A100-40G", 312.0, 1.555, 40.0, 300.0, 0.0).with(DGX_A100),
    gpu("H100-SXM", 989.0, 3.35, 80.0, 450.0, 1979.0).with(DGX_H100),
    gpu("H200", 989.0, 4.8, 141.0, 450.0, 1979.0).with(DGX_H100),
    gpu("L4", 121.0, 0.30, 24.0, 32.0, 242.5).with(Fabric(PCIE_NODE_100G, 8, 0, Ada)),
    gpu("V100", 125.0, 0.9, 32.0, 150.0, 0.0).with(Fabric(6.25, 8, 0, Volta)),
    gpu("P100", 18.7, 0.732, 16.0, 80.0, 0.0).with(Fabric(6.25, 8, 0, Pascal)),
    gpu("K80", 8.7, 0.48, 24.0, 16.0, 0.0).with(Fabric(25.0 / 8.0 / 8.0, 8, 0, Kepler)),
    gpu("A6000", 154.8, 0.768, 48.0, 112.5, 0.0).with(Fabric(PCIE_NODE_100G, 2, 0, Ampere)),
    gpu("T4", 65.0, 0.32, 16.0, 16.0, 0.0).with(Fabric(PCIE_NODE_100G, 8, 0, Turing)),
    gpu("A10", 125.0, 0.6, 24.0, 32.0, 0.0).with(Fabric(PCIE_NODE_100G, 8, 0, Ampere)),
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
