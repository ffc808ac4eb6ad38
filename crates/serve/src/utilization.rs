//! What a run's GPUs did: model FLOPs and bytes moved (for MFU and MBU) and KV-cache
//! blocks in use over time, recorded once per iteration by the event loop.
//!
//! MFU = model FLOPs / (peak FLOP/s x GPUs x time) and MBU = bytes moved / (peak HBM
//! bandwidth x GPUs x time), over busy time (the replicas' iterations) and over wall time
//! (every GPU for the whole run); FLOPs and bytes are [`cotenant_perf::roofline::iteration_work`]'s.
//! KV utilization is blocks in use / capacity of the replica, sampled at the start of each
//! iteration (after its blocks are allocated) and weighted by the iteration's length.

use cotenant_core::{Span, Time};
use cotenant_perf::roofline::iteration_work;
use cotenant_perf::{BatchEntry, Roofline};

/// One replica's books.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReplicaUsage {
    pub flops: f64,
    pub bytes: f64,
    /// Sum over iterations of (blocks in use / capacity) x iteration length, µs.
    pub kv_fraction_us: f64,
    pub busy_us: u64,
    /// Largest blocks in use / capacity at any iteration.
    pub kv_max: f64,
}

impl ReplicaUsage {
    /// Busy-time-weighted mean of blocks in use / capacity (0 before any iteration).
    pub fn kv_mean(&self) -> f64 {
        if self.busy_us == 0 {
            0.0
        } else {
            self.kv_fraction_us / self.busy_us as f64
        }
    }
}

/// KV utilization in one service window, over all replicas: iterations are counted in
/// the window they start in.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KvWindow {
    /// Sum over iterations of (blocks in use / capacity) x iteration length, µs.
    pub fraction_us: f64,
    /// Replica-µs of iterations that started in the window.
    pub busy_us: u64,
    /// Largest blocks in use / capacity of any replica at any iteration of the window.
    pub max: f64,
}

impl KvWindow {
    /// Busy-time-weighted mean over the window's iterations, or None without any.
    pub fn mean(&self) -> Option<f64> {
        (self.busy_us > 0).then(|| self.fraction_us / self.busy_us as f64)
    }
}

/// The run's books: per replica and per window, and the peaks they are measured against.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Usage {
    pub replicas: Vec<ReplicaUsage>,
    pub kv_windows: Vec<KvWindow>,
    pub window_us: u64,
    /// GPUs per replica (tensor x pipeline parallel).
    pub gpus_per_replica: u32,
    /// Peak dense FLOP/s and HBM bytes/s of one GPU (the catalog's datasheet figures).
    pub peak_flops_per_gpu: f64,
    pub peak_bytes_per_gpu: f64,
}

impl Usage {
    /// Empty books; `replicas` is filled at the end of the run from each replica's own.
    pub fn new(model: &Roofline, gpus_per_replica: u32, window: Span) -> Usage {
        Usage {
            replicas: Vec::new(),
            kv_windows: Vec::new(),
            window_us: window.0.max(1),
            gpus_per_replica,
            peak_flops_per_gpu: model.gpu.dense_tflops * 1e12,
            peak_bytes_per_gpu: model.gpu.memory_tb_per_s * 1e12,
        }
    }

    /// One iteration of a replica (whose own books are `replica`) starting at `start` for
    /// `duration` with `entries`, `used_blocks` of `capacity_blocks` KV blocks in use.
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &mut self,
        model: &Roofline,
        replica: &mut ReplicaUsage,
        entries: &[BatchEntry],
        start: Time,
        duration: Span,
        used_blocks: u64,
        capacity_blocks: u64,
    ) {
        let work = iteration_work(&model.model, model.tensor_parallel, entries);
        let fraction = if capacity_blocks == 0 { 0.0 } else { used_blocks as f64 / capacity_blocks as f64 };
        let weighted = fraction * duration.0 as f64;
        let books = replica;
        books.flops += work.flops;
        books.bytes += work.bytes;
        books.kv_fraction_us += weighted;
        books.busy_us += duration.0;
        books.kv_max = books.kv_max.max(fraction);
        let index = (start.0 / self.window_us) as usize;
        if self.kv_windows.len() <= index {
            self.kv_windows.resize(index + 1, KvWindow::default());
        }
        let window = &mut self.kv_windows[index];
        window.fraction_us += weighted;
        window.busy_us += duration.0;
        window.max = window.max.max(fraction);
    }

    pub fn flops(&self) -> f64 {
        self.replicas.iter().map(|r| r.flops).sum()
    }

    pub fn bytes(&self) -> f64 {
        self.replicas.iter().map(|r| r.bytes).sum()
    }

    fn busy_s(&self) -> f64 {
        self.replicas.iter().map(|r| r.busy_us).sum::<u64>() as f64 / 1e6
    }

    fn over(&self, amount: f64, peak_per_gpu: f64, replica_seconds: f64) -> f64 {
        let denominator = peak_per_gpu * f64::from(self.gpus_per_replica) * replica_seconds;
        if denominator > 0.0 {
            amount / denominator
        } else {
            0.0
        }
    }

    /// MFU and MBU over the replicas' busy time, and over `wall_s` seconds of every GPU.
    pub fn utilization(&self, wall_s: f64) -> Utilization {
        let (busy_s, all_s) = (self.busy_s(), wall_s * self.replicas.len() as f64);
        let (flops, bytes) = (self.flops(), self.bytes());
        let busy_us: u64 = self.replicas.iter().map(|r| r.busy_us).sum();
        let kv_fraction_us: f64 = self.replicas.iter().map(|r| r.kv_fraction_us).sum();
        Utilization {
            model_flops: flops,
            bytes_moved: bytes,
            mfu: self.over(flops, self.peak_flops_per_gpu, busy_s),
            mbu: self.over(bytes, self.peak_bytes_per_gpu, busy_s),
            mfu_wall: self.over(flops, self.peak_flops_per_gpu, all_s),
            mbu_wall: self.over(bytes, self.peak_bytes_per_gpu, all_s),
            kv_mean: if busy_us == 0 { 0.0 } else { kv_fraction_us / busy_us as f64 },
            kv_max: self.replicas.iter().map(|r| r.kv_max).fold(0.0, f64::max),
        }
    }
}

/// A run's utilization figures (fractions 0-1).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Utilization {
    pub model_flops: f64,
    pub bytes_moved: f64,
    /// Model FLOPs / (peak FLOP/s x GPUs per replica x summed busy time of the replicas).
    pub mfu: f64,
    pub mbu: f64,
    /// The same over the run's wall time on every GPU (idle time included).
    pub mfu_wall: f64,
    pub mbu_wall: f64,
    /// Busy-time-weighted mean over replicas and iterations of KV blocks in use / capacity.
    pub kv_mean: f64,
    /// Largest KV blocks in use / capacity of any replica at any iteration.
    pub kv_max: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use cotenant_perf::{find_gpu, ModelShape, RooflineParams};

    fn model() -> Roofline {
        let gpu = *find_gpu("H100-SXM").expect("catalog");
        Roofline::new(ModelShape::parse("Llama-3.1-8B").expect("catalog"), gpu, 2, RooflineParams::default())
    }

    /// Two replicas of 2 GPUs, 10 s windows. Replica 0: an iteration at 1 s of 2 ms with
    /// 50 of 100 blocks, one at 12 s of 6 ms with 100 of 100. Replica 1: one at 3 s of
    /// 2 ms with 10 of 100. Window 0: (0.5 x 2000 + 0.1 x 2000) / 4000 = 0.3, max 0.5;
    /// window 1: 1.0, max 1.0. Whole run: (1000 + 6000 + 200) / 10,000 = 0.72; max 1.
    /// MFU over busy time: FLOPs / (989e12 x 2 GPUs x 0.010 s); over 20 s of wall time on
    /// both replicas: FLOPs / (989e12 x 2 x 40 s).
    #[test]
    fn kv_windows_and_utilization_by_hand() {
        let model = model();
        let mut usage = Usage::new(&model, 2, Span::from_secs(10));
        let decode = [BatchEntry { new_tokens: 1, context_tokens: 100, emits_token: true }];
        let (mut first, mut second) = (ReplicaUsage::default(), ReplicaUsage::default());
        usage.record(&model, &mut first, &decode, Time(1_000_000), Span(2_000), 50, 100);
        usage.record(&model, &mut second, &decode, Time(3_000_000), Span(2_000), 10, 100);
        usage.record(&model, &mut first, &decode, Time(12_000_000), Span(6_000), 100, 100);
        usage.replicas = vec![first, second];
        assert_eq!(usage.kv_windows.len(), 2);
        assert!((usage.kv_windows[0].mean().unwrap() - 0.3).abs() < 1e-12);
        assert_eq!(usage.kv_windows[0].max, 0.5);
        assert_eq!(usage.kv_windows[1].mean(), Some(1.0));
        assert_eq!(KvWindow::default().mean(), None);
        let u = usage.utilization(20.0);
        assert!((u.kv_mean - 0.72).abs() < 1e-12, "{}", u.kv_mean);
        assert_eq!(u.kv_max, 1.0);
        let flops = 3.0 * iteration_work(&model.model, 2, &decode).flops;
        assert!((u.model_flops - flops).abs() <= 1e-9 * flops);
        assert!((u.mfu - flops / (989e12 * 2.0 * 0.010)).abs() < 1e-15);
        assert!((u.mfu_wall - flops / (989e12 * 2.0 * 40.0)).abs() < 1e-18);
        assert!((usage.replicas[0].kv_mean() - 7000.0 / 8000.0).abs() < 1e-12);
        assert_eq!(Usage::new(&model, 2, Span(1)).utilization(0.0), Utilization::default());
    }
}
