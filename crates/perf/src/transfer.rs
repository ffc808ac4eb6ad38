//! Point-to-point transfers between GPUs: pipeline-parallel activations and
//! disaggregated-serving KV caches.
//!
//! Both are one send/recv of `bytes` over one link, modelled as
//!
//! ```text
//! t = latency + bytes / bandwidth
//! ```
//!
//! Defaults ([`Link::between_stages`]): inside one node (at most [`GPUS_PER_NODE`] GPUs
//! per replica) the GPU's own interconnect from the catalog (NVLink, one direction) with
//! [`NVLINK_LATENCY_S`]; across nodes a 400 Gb/s NIC per GPU ([`NIC_GB_PER_S`], DGX
//! H100's ConnectX-7) with [`NIC_LATENCY_S`]. The latencies are the medians of Vidur's
//! measured 2 KiB send/recv on an H100 DGX (shared/traces/vidur-profiles-2024,
//! network/h100_dgx_send_recv.csv.gz: 5 µs with both ranks on one node, 17 µs on two
//! nodes). The same profile's large messages run at about 370 GB/s on one node (the
//! catalog's 450 GB/s is the link's peak) and 32 GB/s across nodes (below the NIC's
//! 50 GB/s): these defaults are peaks, not fits.

use crate::gpu::GpuSpec;
use crate::model::ModelShape;

/// GPUs of one node (a DGX/HGX board) joined by NVLink.
pub const GPUS_PER_NODE: u32 = 8;
/// One-direction bandwidth of the NIC each GPU has to other nodes, GB/s (400 Gb/s).
pub const NIC_GB_PER_S: f64 = 50.0;
/// Latency of one send/recv between two GPUs of one node, seconds.
pub const NVLINK_LATENCY_S: f64 = 5e-6;
/// Latency of one send/recv between two nodes, seconds.
pub const NIC_LATENCY_S: f64 = 17e-6;

/// One point-to-point link.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Link {
    /// Bandwidth, GB/s (decimal: 1e9 bytes/s).
    pub gb_per_s: f64,
    pub latency_s: f64,
}

impl Link {
    /// The link between consecutive pipeline stages of a replica of `tp` x `pp` GPUs of
    /// type `gpu`: NVLink when the replica fits on one node, else the NIC.
    pub fn between_stages(gpu: &GpuSpec, tp: u32, pp: u32) -> Link {
        if tp.max(1).saturating_mul(pp.max(1)) <= GPUS_PER_NODE {
            Link { gb_per_s: gpu.interconnect_gb_per_s, latency_s: NVLINK_LATENCY_S }
        } else {
            Link { gb_per_s: NIC_GB_PER_S, latency_s: NIC_LATENCY_S }
        }
    }

    /// Seconds to move `bytes`: latency + bytes / bandwidth (0 for nothing to move).
    pub fn transfer_s(&self, bytes: f64) -> f64 {
        if bytes <= 0.0 {
            return 0.0;
        }
        self.latency_s + bytes / (self.gb_per_s * 1e9)
    }
}

/// Bytes of activations one pipeline stage hands the next for `tokens` tokens: the
/// hidden state, tokens x d x b (each tensor-parallel rank sends its full copy to its
/// peer of the next stage, so this is also the bytes per GPU).
pub fn activation_bytes(model: &ModelShape, tokens: u64) -> f64 {
    tokens as f64 * model.hidden as f64 * model.bytes_per_param as f64
}

/// Bytes of KV cache one GPU of a `tp`-way replica holds for `tokens` tokens (all
/// layers): tokens x 2 L ceil(H_kv / tp) h b. In disaggregated serving each GPU of the
/// prefill replica sends its shard to its peer of the decode replica, in parallel.
pub fn kv_bytes_per_gpu(model: &ModelShape, tp: u32, tokens: u64) -> f64 {
    tokens as f64 * model.kv_bytes_per_token_per_gpu(tp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::find_gpu;

    /// Llama-3.1-8B, a 1,000-token prompt at TP 1: 1,000 x 2 x 32 x 8 x 128 x 2 =
    /// 131,072,000 bytes of KV. Over a 25 GB/s link (200 Gb/s) with 20 µs latency:
    /// 20 µs + 131,072,000 / 25e9 s = 20 + 5,242.88 = 5,262.88 µs.
    #[test]
    fn kv_transfer_by_hand() {
        let model = ModelShape::parse("Llama-3.1-8B").expect("catalog");
        let bytes = kv_bytes_per_gpu(&model, 1, 1000);
        assert_eq!(bytes, 131_072_000.0);
        let link = Link { gb_per_s: 25.0, latency_s: 20e-6 };
        assert!((link.transfer_s(bytes) - 5_262.88e-6).abs() < 1e-9, "{}", link.transfer_s(bytes));
        // TP 2 halves each GPU's share (4 KV heads each).
        assert_eq!(kv_bytes_per_gpu(&model, 2, 1000), bytes / 2.0);
        assert_eq!(link.transfer_s(0.0), 0.0);
    }

    /// 512 tokens of Llama-3.1-8B activations: 512 x 4096 x 2 = 4,194,304 bytes; between two
    /// stages of one H100 node (450 GB/s, 5 µs): 5 + 9.3207 = 14.3207 µs; a TP 4 x PP 4
    /// replica spans two nodes: 17 + 83.886 = 100.886 µs over the 50 GB/s NIC.
    #[test]
    fn activation_send_by_hand() {
        let model = ModelShape::parse("Llama-3.1-8B").expect("catalog");
        let gpu = find_gpu("H100-SXM").expect("catalog");
        let bytes = activation_bytes(&model, 512);
        assert_eq!(bytes, 4_194_304.0);
        let nvlink = Link::between_stages(gpu, 2, 4);
        assert!((nvlink.transfer_s(bytes) - 14.3207e-6).abs() < 1e-9);
        let nic = Link::between_stages(gpu, 4, 4);
        assert_eq!(nic, Link { gb_per_s: NIC_GB_PER_S, latency_s: NIC_LATENCY_S });
        assert!((nic.transfer_s(bytes) - 100.886e-6).abs() < 1e-9);
    }
}
