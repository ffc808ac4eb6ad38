//! Disaggregated prefill and decode pools (Splitwise, ISCA'24; DistServe, OSDI'24).
//!
//! Replicas 0..P run prompts only (requests are routed among them as usual); replicas
//! P..P+D run decodes only. A request's first token is sampled at the end of its
//! prefill, on the prefill replica (as in DistServe: TTFT ends there). It then leaves
//! that replica's batch and queues for a decode replica (chosen by the router among the
//! decode pool, on outstanding tokens). When the decode replica can allocate blocks for
//! its prompt's KV, the KV moves over the link:
//!
//! ```text
//! bytes per GPU = prompt tokens x 2 L ceil(H_kv / tp) h b        (each TP rank its shard, in parallel)
//! transfer      = latency + bytes per GPU / link bandwidth
//! start         = max(blocks allocated, the prefill replica's link free)
//! ```
//! Transfers from one prefill replica go one after another over its link. During a
//! transfer the KV occupies blocks on both replicas; the prefill replica frees its copy
//! when the transfer ends, and the request joins the decode replica's running set with
//! its prompt's KV in place, generating its second token in that replica's next
//! iteration. A decode replica that must preempt a request recomputes its prompt
//! locally (vLLM's recompute).
//!
//! Default link: the GPU's NVLink (catalog, with [`NVLINK_LATENCY_S`]) when the whole
//! deployment fits one node (at most [`GPUS_PER_NODE`] GPUs), else the 400 Gb/s NIC
//! ([`NIC_GB_PER_S`], [`NIC_LATENCY_S`]); `link=` and `latency_us=` override it.
//!
//! This is a child module of `sim` (it moves requests between replicas' private books).

use cotenant_perf::transfer::{
    kv_bytes_per_gpu, GPUS_PER_NODE, NIC_GB_PER_S, NIC_LATENCY_S, NVLINK_LATENCY_S,
};

use cotenant_perf::ModelShape;

use super::*;

/// The two pools and the link between them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DisaggConfig {
    pub prefill: u32,
    pub decode: u32,
    /// Link bandwidth, GB/s; `None`: NVLink within a node, the NIC beyond (module docs).
    pub link_gb_per_s: Option<f64>,
    /// Link latency, seconds; `None`: the default link's.
    pub latency_s: Option<f64>,
}

/// Largest pool a `--disagg` spec may name.
const MAX_POOL: u32 = 4096;

impl DisaggConfig {
    /// Parses `prefill=N,decode=M[,link=GBPS][,latency_us=L]`.
    pub fn parse(text: &str) -> Result<DisaggConfig, String> {
        let (mut prefill, mut decode, mut link, mut latency) = (None, None, None, None);
        for part in text.split(',') {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}`: expected KEY=VALUE (prefill, decode, link, latency_us)"))?;
            let value = value.trim();
            let count = || {
                value
                    .parse::<u32>()
                    .ok()
                    .filter(|n| (1..=MAX_POOL).contains(n))
                    .ok_or_else(|| format!("{key}={value}: must be an integer in [1, {MAX_POOL}]"))
            };
            let positive = |max: f64| {
                value
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x > 0.0 && *x <= max)
                    .ok_or_else(|| format!("{key}={value}: must be a finite number in (0, {max}]"))
            };
            match key.trim() {
                "prefill" => prefill = Some(count()?),
                "decode" => decode = Some(count()?),
                "link" => link = Some(positive(1e6)?),
                "latency_us" => latency = Some(positive(1e9)? / 1e6),
                other => return Err(format!("unknown key `{other}` (prefill, decode, link, latency_us)")),
            }
        }
        let prefill = prefill.ok_or("missing prefill=N")?;
        let decode = decode.ok_or("missing decode=M")?;
        Ok(DisaggConfig { prefill, decode, link_gb_per_s: link, latency_s: latency })
    }

    pub(super) fn validate(&self) -> Result<(), ServeError> {
        let bad = |field, value: String, allowed| Err(ServeError::BadConfig { field, value, allowed });
        if self.prefill == 0 {
            return bad("disagg.prefill", "0".into(), "at least 1");
        }
        if self.decode == 0 {
            return bad("disagg.decode", "0".into(), "at least 1");
        }
        if let Some(gb) = self.link_gb_per_s.filter(|x| !(x.is_finite() && *x > 0.0)) {
            return bad("disagg.link", gb.to_string(), "a positive number of GB/s");
        }
        if let Some(s) = self.latency_s.filter(|x| !(x.is_finite() && *x >= 0.0)) {
            return bad("disagg.latency", s.to_string(), "a non-negative number of seconds");
        }
        Ok(())
    }

    /// The link KV moves over for a deployment of `config` (module docs).
    pub fn link(&self, config: &ServeConfig) -> Link {
        let gpus = u64::from(self.prefill + self.decode)
            * u64::from(config.model.tensor_parallel.max(1))
            * u64::from(config.pipeline_parallel.max(1));
        let default = if gpus <= u64::from(GPUS_PER_NODE) {
            Link { gb_per_s: config.model.gpu.interconnect_gb_per_s, latency_s: NVLINK_LATENCY_S }
        } else {
            Link { gb_per_s: NIC_GB_PER_S, latency_s: NIC_LATENCY_S }
        };
        Link {
            gb_per_s: self.link_gb_per_s.unwrap_or(default.gb_per_s),
            latency_s: self.latency_s.unwrap_or(default.latency_s),
        }
    }
}

/// What a replica runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Prefills and decodes (no disaggregation).
    Colocated,
    Prefill,
    Decode,
}

impl Role {
    /// Replica `index`'s role: the first `prefill` replicas prefill, the rest decode.
    pub fn of(disagg: Option<DisaggConfig>, index: u32) -> Role {
        match disagg {
            None => Role::Colocated,
            Some(d) if index < d.prefill => Role::Prefill,
            Some(_) => Role::Decode,
        }
    }
}

/// A request between its prefill replica and its decode replica.
#[derive(Clone, Copy, Debug)]
struct Handoff {
    id: RequestId,
    from: usize,
    to: usize,
    /// Blocks and prefix-cache entries it still holds on the prefill replica.
    blocks_from: u64,
    prefix_from: u32,
    /// Blocks allocated for it on the decode replica.
    blocks_to: u64,
}

/// The pools' books during a run.
#[derive(Debug)]
pub(super) struct Disagg {
    prefill: usize,
    link: Link,
    tensor_parallel: u32,
    router: Router,
    /// Per decode replica: hand-offs waiting for blocks, oldest first.
    queued: Vec<VecDeque<Handoff>>,
    /// Per prefill replica: when its link is next free.
    link_free: Vec<Time>,
    /// Transfers under way: (end, slot in `slots`).
    in_transit: BinaryHeap<Reverse<(Time, usize)>>,
    slots: Vec<Option<Handoff>>,
    free_slots: Vec<usize>,
    decode_outstanding: Vec<u64>,
    pub(super) transfers: u64,
    pub(super) transfer_us: u64,
}

impl Disagg {
    pub(super) fn new(config: DisaggConfig, serve: &ServeConfig) -> Disagg {
        Disagg {
            prefill: config.prefill as usize,
            link: config.link(serve),
            tensor_parallel: serve.model.tensor_parallel,
            router: Router::new(serve.router),
            queued: (0..config.decode).map(|_| VecDeque::new()).collect(),
            link_free: vec![Time::ZERO; config.prefill as usize],
            in_transit: BinaryHeap::new(),
            slots: Vec::new(),
            free_slots: Vec::new(),
            decode_outstanding: vec![0; config.decode as usize],
            transfers: 0,
            transfer_us: 0,
        }
    }

    /// When the next transfer ends.
    pub(super) fn next_event(&self) -> Option<Time> {
        self.in_transit.peek().map(|Reverse((t, _))| *t)
    }

    /// After prefill replica `r`'s batch completed: every request of it whose prefill
    /// is done (first token sampled) and that needs more tokens leaves for a decode replica.
    pub(super) fn hand_off(&mut self, run: &mut Run, world: &World<'_>, replicas: &mut [Replica], r: usize) {
        if replicas[r].role != Role::Prefill {
            return;
        }
        for position in 0..replicas[r].batch_ids.len() {
            let id = replicas[r].batch_ids[position];
            let seq = &mut run.seqs[id as usize];
            if seq.phase != Phase::Running || seq.in_prefill() {
                continue;
            }
            let request = &world.requests[id as usize];
            let tenant = request.tenant.index();
            let tokens = u64::from(request.prompt_tokens) + u64::from(request.output_tokens);
            let from = &mut replicas[r];
            from.running.retain(|&other| other != id);
            from.backlog[tenant] -= 1;
            from.outstanding_tokens -= tokens;
            let (blocks_from, prefix_from) = (seq.private_blocks, seq.prefix_entries);
            seq.private_blocks = 0;
            seq.prefix_entries = 0;
            seq.phase = Phase::Waiting;
            for (d, outstanding) in self.decode_outstanding.iter_mut().enumerate() {
                *outstanding = replicas[self.prefill + d].outstanding_tokens;
            }
            let d = self.router.route(request, &self.decode_outstanding);
            let to = &mut replicas[self.prefill + d];
            to.backlog[tenant] += 1;
            to.outstanding_tokens += tokens;
            self.queued[d].push_back(Handoff {
                id,
                from: r,
                to: self.prefill + d,
                blocks_from,
                prefix_from,
                blocks_to: 0,
            });
        }
    }

    /// Starts every queued transfer whose decode replica can hold its KV, in order per
    /// decode replica.
    pub(super) fn start_transfers(
        &mut self,
        run: &mut Run,
        replicas: &mut [Replica],
        model: &ModelShape,
        now: Time,
    ) {
        for queue in &mut self.queued {
            while let Some(&front) = queue.front() {
                let tokens = u64::from(run.seqs[front.id as usize].kv_tokens);
                let kv = &mut replicas[front.to].kv;
                let need = kv.blocks_for_tokens(tokens);
                if !kv.try_allocate(need) {
                    break;
                }
                queue.pop_front();
                let seconds = self.link.transfer_s(kv_bytes_per_gpu(model, self.tensor_parallel, tokens));
                let duration = Span::from_secs_f64_ceil(seconds).max(Span(1));
                let start = now.max(self.link_free[front.from]);
                let end = start + duration;
                self.link_free[front.from] = end;
                self.transfers += 1;
                self.transfer_us += duration.0;
                let handoff = Handoff { blocks_to: need, ..front };
                let slot = match self.free_slots.pop() {
                    Some(slot) => {
                        self.slots[slot] = Some(handoff);
                        slot
                    }
                    None => {
                        self.slots.push(Some(handoff));
                        self.slots.len() - 1
                    }
                };
                self.in_transit.push(Reverse((end, slot)));
            }
        }
    }

    /// Transfers ending at `now`: the prefill replica frees its copy, the request joins
    /// its decode replica's running set.
    pub(super) fn finish_transfers(
        &mut self,
        run: &mut Run,
        world: &World<'_>,
        replicas: &mut [Replica],
        now: Time,
    ) {
        while let Some(&Reverse((t, slot))) = self.in_transit.peek() {
            if t != now {
                break;
            }
            self.in_transit.pop();
            let Some(h) = self.slots[slot].take() else { continue };
            self.free_slots.push(slot);
            let request = &world.requests[h.id as usize];
            let from = &mut replicas[h.from];
            from.kv.free(h.blocks_from);
            from.kv.release(&request.prefix_hashes[..h.prefix_from as usize]);
            let to = &mut replicas[h.to];
            to.admissions += 1;
            let seq = &mut run.seqs[h.id as usize];
            seq.private_blocks = h.blocks_to;
            seq.phase = Phase::Running;
            seq.replica = h.to as u32;
            seq.admitted_order = to.admissions;
            to.running.push(h.id);
            let cx = sched_cx!(world, &run.seqs, to, now, 0);
            to.scheduler.on_admit(&cx, h.id, false);
        }
    }
}

/// One row of `plan serve --disagg-search`: the fewest replicas, split into pools, that
/// meet the target on one GPU type and TP degree.
#[derive(Clone, Debug, PartialEq)]
pub struct DisaggPlanRow {
    pub gpu: &'static str,
    pub tensor_parallel: u32,
    pub pipeline_parallel: u32,
    pub prefill: u32,
    pub decode: u32,
    pub gpus: u32,
    pub attainment: f64,
    /// The same number of replicas colocated (no pools), for comparison.
    pub colocated_attainment: f64,
}

/// For each GPU type and TP degree, the fewest replicas (up to `max_replicas`, at least
/// 2) that some prefill:decode split serves at `target` SLO attainment, and of the
/// splits of that many the one with the highest attainment (ties: fewer prefill
/// replicas). Exponential search on the total, then bisection below it; every split of
/// a probed total is simulated. `link` is (GB/s, latency s), `None` each for the default.
#[allow(clippy::too_many_arguments)]
pub fn disagg_search(
    workload: &Workload,
    base: &ServeConfig,
    gpus: &[cotenant_perf::GpuSpec],
    tensor_parallel: &[u32],
    params: &dyn Fn(&cotenant_perf::GpuSpec, u32) -> cotenant_perf::RooflineParams,
    link: (Option<f64>, Option<f64>),
    target: f64,
    max_replicas: u32,
) -> Vec<DisaggPlanRow> {
    let mut rows = Vec::new();
    for gpu in gpus {
        for &tp in tensor_parallel {
            let mut config = crate::plan::with_windows_for(base, workload);
            config.model = Roofline::new(base.model.model.clone(), *gpu, tp, params(gpu, tp));
            let attainment = |config: &ServeConfig| -> Option<f64> {
                let result = simulate(workload, config).ok()?;
                Some(crate::summarize(workload, &result, config.slo).slo_attainment)
            };
            let best_split = |total: u32| -> Option<(u32, f64)> {
                let mut best: Option<(u32, f64)> = None;
                for prefill in 1..total {
                    let mut split = config.clone();
                    split.disagg = Some(DisaggConfig {
                        prefill,
                        decode: total - prefill,
                        link_gb_per_s: link.0,
                        latency_s: link.1,
                    });
                    let value = attainment(&split)?;
                    if value >= target && best.is_none_or(|(_, b)| value > b) {
                        best = Some((prefill, value));
                    }
                }
                best
            };
            let max_total = max_replicas.max(2);
            let (mut low, mut high) = (1_u32, 2_u32);
            let mut found = loop {
                if let Some(split) = best_split(high) {
                    break Some(split);
                }
                if high >= max_total {
                    break None;
                }
                low = high;
                high = (high * 2).min(max_total);
            };
            let Some(mut split) = found.take() else { continue };
            while high - low > 1 {
                let middle = (low + high) / 2;
                match best_split(middle) {
                    Some(s) => (high, split) = (middle, s),
                    None => low = middle,
                }
            }
            let mut colocated = config.clone();
            colocated.disagg = None;
            colocated.replicas = high;
            let pp = config.pipeline_parallel;
            rows.push(DisaggPlanRow {
                gpu: gpu.name,
                tensor_parallel: tp,
                pipeline_parallel: pp,
                prefill: split.0,
                decode: high - split.0,
                gpus: high * tp * pp,
                attainment: split.1,
                colocated_attainment: attainment(&colocated).unwrap_or(0.0),
            });
        }
    }
    rows.sort_by(|a, b| {
        a.gpus.cmp(&b.gpus).then(a.gpu.cmp(b.gpu)).then(a.tensor_parallel.cmp(&b.tensor_parallel))
    });
    rows
}
