//! Kubernetes: `kubectl get pods -A -o json` and `kubectl get jobs -A -o json`
//! (a `List` of `Pod` or `batch/v1` `Job` objects) from an operator's own cluster.
//!
//! JSON has no meaningful line per row, so errors name the JSON path of the bad
//! value (`items[3].metadata.creationTimestamp`) and the line it sits on, found by
//! walking the text to that path; each job's line is the line its item starts on.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

use cotenant_core::limits::{MAX_GPUS_PER_JOB, MAX_JOB_DURATION, MAX_UNIX_SECONDS, MIN_UNIX_SECONDS};
use cotenant_core::Span;
use serde_json::Value;

use crate::error::TraceError;
use crate::slice::{assemble, check_clock, Clock, RawJob, ReadReport, Slice};
use crate::text::{describe_span, read_bytes, text_from_bytes};
use crate::wallclock::{format_wall_clock, parse_wall_clock_us};
use crate::Workload;

/// The exports this reader is written for.
pub const KUBECTL_COMMANDS: [&str; 2] =
    ["kubectl get pods -A -o json > pods.json", "kubectl get jobs -A -o json > jobs.json"];

/// The extended resource NVIDIA's device plugin advertises.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// Skip reasons, as they appear in [`Workload::skipped`].
pub const SKIP_NO_GPU: &str = "kubectl: no nvidia.com/gpu in any container's limits or requests";
pub const SKIP_NEVER_STARTED: &str =
    "kubectl: never started (Pending pod, or no status.startTime; a suspended Job)";
pub const SKIP_RUNNING: &str =
    "kubectl: still running (Running pod, or a Job with no Complete or Failed condition)";
pub const SKIP_NO_FINISH: &str =
    "kubectl: no finish time (a finished pod with no container terminated.finishedAt, e.g. evicted)";
pub const SKIP_UNKNOWN_PHASE: &str = "kubectl: pod phase Unknown (its node stopped reporting)";
pub const SKIP_OTHER_KIND: &str = "kubectl: neither a Pod nor a Job";
pub const SKIP_POD_OF_LISTED_JOB: &str =
    "kubectl: pod of a Job listed in the same file (the Job is replayed)";

/// Reads a `kubectl get pods|jobs -A -o json` file (see [`KUBECTL_COMMANDS`]); a
/// `List` may mix Pods and Jobs, and a single Pod or Job object also reads.
///
/// Every object becomes at most one job: tenant = `metadata.namespace`, arrival =
/// `metadata.creationTimestamp`, GPUs = the pod's `nvidia.com/gpu` (containers'
/// limits, else requests, summed; init containers by Kubernetes' max rule; CPU
/// and memory likewise from requests, else limits, rounded up to cores and GiB), run
/// time (`work`, also the oracle estimate) = finish - `status.startTime`. A pod
/// finishes at its containers' last `state.terminated.finishedAt`; a Job at
/// `status.completionTime`, else at its `Complete` or `Failed` condition's
/// `lastTransitionTime`. A Job holds per-pod GPUs x `min(parallelism, completions)`
/// for its whole life. Kept: `Succeeded` and `Failed` pods, Jobs that completed or
/// failed. Skipped, with counts: the reasons `SKIP_*`. Times are RFC 3339 (UTC).
pub fn read_kubectl(path: &Path, slice: &Slice) -> Result<Workload, TraceError> {
    check_clock(slice, Clock::WallClock)?;
    parse_kubectl(path, read_bytes(path)?, slice)
}

/// [`read_kubectl`] on bytes already in memory (plain or gzip); `path` only names them.
pub fn parse_kubectl(path: &Path, bytes: Vec<u8>, slice: &Slice) -> Result<Workload, TraceError> {
    check_clock(slice, Clock::WallClock)?;
    let file = path.display().to_string();
    let text = text_from_bytes(path, bytes)?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let root: Value = serde_json::from_str(text).map_err(|e| json_error(&file, text, &e))?;
    let doc = Doc { file: file.clone(), text, newlines: newlines(text) };
    let items = items(&doc, &root)?;
    let job_names = listed_jobs(&doc, &items)?;
    let mut raw = Vec::new();
    let mut report = ReadReport::arrivals_in("metadata.creationTimestamp");
    let mut tally = Tally::default();
    for (node, offset) in &items {
        let line = doc.line_of(*offset);
        let kind = node.at(&doc, "kind")?.string(&doc)?.unwrap_or("");
        let job = match kind {
            "Pod" => pod_job(&doc, node, line, &job_names, &mut report, &mut tally)?,
            "Job" => job_job(&doc, node, line, &mut report, &mut tally)?,
            _ if node.value.get("kind").is_none() => {
                return Err(doc.error(&node.key("kind"), "expected the object's kind (Pod or Job), got none"))
            }
            _ => {
                report.skip(SKIP_OTHER_KIND);
                None
            }
        };
        raw.extend(job);
    }
    tally.notes(&mut report.notes);
    assemble(file, raw, slice, Clock::WallClock, report)
}

/// serde_json's message without its own " at line L column C" suffix, with the line
/// in the usual place.
fn json_error(file: &str, text: &str, e: &serde_json::Error) -> TraceError {
    let message = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    let message = message.strip_suffix(&suffix).unwrap_or(&message);
    // YAML or kubectl's table output rather than JSON.
    let hint = match text.trim_start().chars().next() {
        Some('{' | '[') | None => "",
        Some(_) => "; export with kubectl get pods -A -o json (not -o yaml or the table)",
    };
    TraceError::Row {
        file: file.to_string(),
        line: e.line().max(1) as u64,
        message: format!("not valid JSON (column {}): {message}{hint}", e.column()),
    }
}

/// The objects to read with the byte offset each starts at: a List's items, or the
/// document itself when it is one Pod or Job.
fn items<'v>(doc: &Doc<'_>, root: &'v Value) -> Result<Vec<(Node<'v>, usize)>, TraceError> {
    let root = Node { value: root, path: Vec::new() };
    if !root.value.is_object() {
        return Err(TraceError::file(
            &doc.file,
            format!(
                "expected a JSON object (the List that kubectl get pods -A -o json prints), got {}",
                type_name(root.value)
            ),
        ));
    }
    let kind = root.at(doc, "kind")?.string(doc)?;
    if matches!(kind, Some("Pod" | "Job")) {
        return Ok(vec![(root, skip_ws(doc.text.as_bytes(), 0))]);
    }
    let list = root.at(doc, "items")?;
    let Value::Array(elements) = list.value else {
        return Err(doc.error(
            &list.path,
            format!(
                "expected a List of Pods or Jobs (kubectl get pods -A -o json), got {} here (kind {})",
                type_name(list.value),
                kind.unwrap_or("not given")
            ),
        ));
    };
    let offsets = element_offsets(doc.text, "items");
    Ok(elements
        .iter()
        .enumerate()
        .map(|(i, value)| {
            let mut path = list.path.clone();
            path.push(Step::Index(i));
            (Node { value, path }, offsets.get(i).copied().unwrap_or(0))
        })
        .collect())
}

/// `(namespace, name)` of every Job in the file, so pods they own are not counted twice.
fn listed_jobs(doc: &Doc<'_>, items: &[(Node<'_>, usize)]) -> Result<BTreeSet<(String, String)>, TraceError> {
    let mut jobs = BTreeSet::new();
    for (node, _) in items {
        if node.value.get("kind").and_then(Value::as_str) == Some("Job") {
            let meta = node.at(doc, "metadata")?;
            let name = meta.at(doc, "name")?.string(doc)?.unwrap_or("");
            jobs.insert((namespace(doc, &meta)?.to_string(), name.to_string()));
        }
    }
    Ok(jobs)
}

/// Counts behind the notes.
#[derive(Default)]
struct Tally {
    pods_by_phase: BTreeMap<String, u64>,
    jobs_by_condition: BTreeMap<&'static str, u64>,
    gang_jobs: u64,
}

impl Tally {
    fn notes(&self, notes: &mut Vec<String>) {
        let list = |counts: Vec<String>| counts.join(", ");
        if !self.pods_by_phase.is_empty() {
            let counts = self.pods_by_phase.iter().map(|(p, n)| format!("{p} {n}")).collect();
            notes.push(format!("kubectl: kept pods by phase: {}", list(counts)));
        }
        if !self.jobs_by_condition.is_empty() {
            let counts = self.jobs_by_condition.iter().map(|(c, n)| format!("{c} {n}")).collect();
            notes.push(format!("kubectl: kept Jobs by final condition: {}", list(counts)));
        }
        if self.gang_jobs > 0 {
            notes.push(format!(
                "kubectl: {} Jobs with parallelism > 1 run as one gang of parallelism x per-pod GPUs",
                self.gang_jobs
            ));
        }
    }
}

fn namespace<'v>(doc: &Doc<'_>, meta: &Node<'v>) -> Result<&'v str, TraceError> {
    let node = meta.at(doc, "namespace")?;
    match node.string(doc)? {
        Some(ns) if !ns.is_empty() => Ok(ns),
        _ => Err(doc.error(&node.path, "expected the namespace (the tenant), got none")),
    }
}

fn pod_job(
    doc: &Doc<'_>,
    pod: &Node<'_>,
    line: u64,
    listed_jobs: &BTreeSet<(String, String)>,
    report: &mut ReadReport,
    tally: &mut Tally,
) -> Result<Option<RawJob>, TraceError> {
    let meta = pod.at(doc, "metadata")?;
    let tenant = namespace(doc, &meta)?;
    let created = required_time(doc, &meta.at(doc, "creationTimestamp")?)?;
    let demand = pod_demand(doc, &pod.at(doc, "spec")?)?;
    let gpus = demand.gpus as u32;
    for owner in meta.at(doc, "ownerReferences")?.array(doc)? {
        let kind = owner.at(doc, "kind")?.string(doc)?;
        let name = owner.at(doc, "name")?.string(doc)?.unwrap_or("");
        if kind == Some("Job") && listed_jobs.contains(&(tenant.to_string(), name.to_string())) {
            report.skip(SKIP_POD_OF_LISTED_JOB);
            return Ok(None);
        }
    }
    if gpus == 0 {
        report.skip(SKIP_NO_GPU);
        return Ok(None);
    }
    let status = pod.at(doc, "status")?;
    let phase_node = status.at(doc, "phase")?;
    let phase = phase_node.string(doc)?.unwrap_or("");
    match phase {
        "Pending" => {
            report.skip(SKIP_NEVER_STARTED);
            return Ok(None);
        }
        "Running" => {
            report.skip(SKIP_RUNNING);
            return Ok(None);
        }
        "Unknown" => {
            report.skip(SKIP_UNKNOWN_PHASE);
            return Ok(None);
        }
        "Succeeded" | "Failed" => {}
        _ => {
            return Err(doc.error(
                &phase_node.path,
                format!("expected a pod phase (Pending, Running, Succeeded, Failed, Unknown), got {phase:?}"),
            ))
        }
    }
    let start_node = status.at(doc, "startTime")?;
    let Some(start) = time(doc, &start_node)? else {
        report.skip(SKIP_NEVER_STARTED);
        return Ok(None);
    };
    let mut finish: Option<(i64, Node<'_>)> = None;
    for container in status.at(doc, "containerStatuses")?.array(doc)? {
        let at = container.at(doc, "state")?.at(doc, "terminated")?.at(doc, "finishedAt")?;
        if let Some(t) = time(doc, &at)? {
            if finish.as_ref().is_none_or(|(f, _)| t > *f) {
                finish = Some((t, at));
            }
        }
    }
    let Some((finish, finish_node)) = finish else {
        report.skip(SKIP_NO_FINISH);
        return Ok(None);
    };
    let secs = run_secs(doc, start, &start_node, finish, &finish_node)?;
    *tally.pods_by_phase.entry(phase.to_string()).or_insert(0) += 1;
    let mut kept = job(created, line, tenant, gpus, secs, demand);
    kept.status = Some(phase.to_string());
    Ok(Some(kept))
}

fn job_job(
    doc: &Doc<'_>,
    job_node: &Node<'_>,
    line: u64,
    report: &mut ReadReport,
    tally: &mut Tally,
) -> Result<Option<RawJob>, TraceError> {
    let meta = job_node.at(doc, "metadata")?;
    let tenant = namespace(doc, &meta)?;
    let created = required_time(doc, &meta.at(doc, "creationTimestamp")?)?;
    let spec = job_node.at(doc, "spec")?;
    let pod = pod_demand(doc, &spec.at(doc, "template")?.at(doc, "spec")?)?;
    let per_pod = pod.gpus;
    let parallelism = count(doc, &spec.at(doc, "parallelism")?)?.unwrap_or(1);
    let width = match count(doc, &spec.at(doc, "completions")?)? {
        Some(completions) => parallelism.min(completions),
        None => parallelism,
    };
    let gpus = per_pod.saturating_mul(width);
    if gpus > u64::from(MAX_GPUS_PER_JOB) {
        return Err(doc.error(
            &spec.key("parallelism"),
            format!(
                "{per_pod} GPUs per pod x {width} pods = {gpus} GPUs exceeds the limit of {MAX_GPUS_PER_JOB} \
                 GPUs per job (core::limits::MAX_GPUS_PER_JOB)"
            ),
        ));
    }
    if per_pod == 0 {
        report.skip(SKIP_NO_GPU);
        return Ok(None);
    }
    let status = job_node.at(doc, "status")?;
    let start_node = status.at(doc, "startTime")?;
    let (Some(start), true) = (time(doc, &start_node)?, width > 0) else {
        report.skip(SKIP_NEVER_STARTED);
        return Ok(None);
    };
    let Some((finish, finish_node, condition)) = job_finish(doc, &status)? else {
        report.skip(SKIP_RUNNING);
        return Ok(None);
    };
    let secs = run_secs(doc, start, &start_node, finish, &finish_node)?;
    *tally.jobs_by_condition.entry(condition).or_insert(0) += 1;
    if width > 1 {
        tally.gang_jobs += 1;
    }
    let pods = width as f64;
    let demand = Demand { gpus, cpus: pod.cpus * pods, memory_bytes: pod.memory_bytes * pods };
    let mut kept = job(created, line, tenant, gpus as u32, secs, demand);
    kept.status = Some(condition.to_string());
    Ok(Some(kept))
}

/// When a Job ended: `status.completionTime`, else the time its `Complete` or
/// `Failed` condition became true; with the condition's name.
fn job_finish<'v>(
    doc: &Doc<'_>,
    status: &Node<'v>,
) -> Result<Option<(i64, Node<'v>, &'static str)>, TraceError> {
    let mut ended: Option<(i64, Node<'v>, &'static str)> = None;
    for condition in status.at(doc, "conditions")?.array(doc)? {
        let name = match condition.at(doc, "type")?.string(doc)? {
            Some("Complete") => "Complete",
            Some("Failed") => "Failed",
            _ => continue,
        };
        if condition.at(doc, "status")?.string(doc)? != Some("True") {
            continue;
        }
        let at = condition.at(doc, "lastTransitionTime")?;
        let t = required_time(doc, &at)?;
        ended = Some((t, at, name));
    }
    let completion = status.at(doc, "completionTime")?;
    Ok(match (time(doc, &completion)?, ended) {
        (Some(t), _) => Some((t, completion, "Complete")),
        (None, ended) => ended,
    })
}

fn job(created: i64, line: u64, tenant: &str, gpus: u32, secs: f64, demand: Demand) -> RawJob {
    let mut job = RawJob::new(created, line, tenant, gpus, secs);
    job.duration_estimate = Some(Span::from_secs_f64_ceil(secs));
    job.cpus = demand.cpus();
    job.memory_gib = demand.memory_gib();
    job
}

/// `finish - start` in seconds, within [`MAX_JOB_DURATION`].
fn run_secs(
    doc: &Doc<'_>,
    start: i64,
    start_node: &Node<'_>,
    finish: i64,
    finish_node: &Node<'_>,
) -> Result<f64, TraceError> {
    if finish < start {
        return Err(doc.error(
            &finish_node.path,
            format!(
                "finished at {} before it started ({} at {})",
                format_wall_clock(finish),
                path_text(&start_node.path),
                format_wall_clock(start)
            ),
        ));
    }
    let secs = (finish - start) as f64 / 1e6;
    if secs > MAX_JOB_DURATION.as_secs_f64() {
        return Err(doc.error(
            &finish_node.path,
            format!(
                "run time {secs} s (from {}) exceeds the limit of {} (core::limits::MAX_JOB_DURATION)",
                path_text(&start_node.path),
                describe_span(MAX_JOB_DURATION)
            ),
        ));
    }
    Ok(secs)
}

/// What one pod asks for: GPUs, CPU cores and memory bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Demand {
    gpus: u64,
    cpus: f64,
    memory_bytes: f64,
}

impl Demand {
    fn plus(self, other: Demand) -> Demand {
        Demand {
            gpus: self.gpus.saturating_add(other.gpus),
            cpus: self.cpus + other.cpus,
            memory_bytes: self.memory_bytes + other.memory_bytes,
        }
    }

    fn max(self, other: Demand) -> Demand {
        Demand {
            gpus: self.gpus.max(other.gpus),
            cpus: self.cpus.max(other.cpus),
            memory_bytes: self.memory_bytes.max(other.memory_bytes),
        }
    }

    /// Whole CPU cores, rounded up.
    fn cpus(&self) -> u32 {
        self.cpus.ceil().min(f64::from(u32::MAX)) as u32
    }

    /// Whole GiB, rounded up.
    fn memory_gib(&self) -> u32 {
        (self.memory_bytes / GIB).ceil().min(f64::from(u32::MAX)) as u32
    }
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// A pod's effective request, per resource as Kubernetes computes it: the larger of
/// the app containers' sum (plus sidecars, init containers with `restartPolicy:
/// Always`) and each init container's own request (plus the sidecars started before it).
fn pod_demand(doc: &Doc<'_>, spec: &Node<'_>) -> Result<Demand, TraceError> {
    let mut sidecars = Demand::default();
    let mut init_peak = Demand::default();
    for init in spec.at(doc, "initContainers")?.array(doc)? {
        let demand = container_demand(doc, &init)?;
        if init.at(doc, "restartPolicy")?.string(doc)? == Some("Always") {
            sidecars = sidecars.plus(demand);
        } else {
            init_peak = init_peak.max(sidecars.plus(demand));
        }
    }
    let mut apps = sidecars;
    for container in spec.at(doc, "containers")?.array(doc)? {
        apps = apps.plus(container_demand(doc, &container)?);
    }
    let demand = apps.max(init_peak);
    if demand.gpus > u64::from(MAX_GPUS_PER_JOB) {
        return Err(doc.error(
            &spec.path,
            format!(
                "{} GPUs exceeds the limit of {MAX_GPUS_PER_JOB} GPUs per job (core::limits::MAX_GPUS_PER_JOB)",
                demand.gpus
            ),
        ));
    }
    Ok(demand)
}

/// One container's GPUs, CPU cores and memory: `requests`, else `limits` (which a
/// missing request defaults to).
fn container_demand(doc: &Doc<'_>, container: &Node<'_>) -> Result<Demand, TraceError> {
    let resources = container.at(doc, "resources")?;
    let (requests, limits) = (resources.at(doc, "requests")?, resources.at(doc, "limits")?);
    let amount = |name: &str, unit: &str| -> Result<f64, TraceError> {
        let request = requests.at(doc, name)?;
        let node = if request.value.is_null() { limits.at(doc, name)? } else { request };
        resource_quantity(doc, &node, unit)
    };
    let (cpus, memory_bytes) = (amount("cpu", "CPU cores")?, amount("memory", "bytes")?);
    Ok(Demand { gpus: container_gpus(doc, container)?, cpus, memory_bytes })
}

/// A Kubernetes resource quantity (`500m`, `8`, `1.5`, `64Gi`, `1G`, `129e6`) as a
/// number; absent is 0. Only CPU and memory use these; GPUs must be whole.
fn resource_quantity(doc: &Doc<'_>, node: &Node<'_>, unit: &str) -> Result<f64, TraceError> {
    let value = match node.value {
        Value::Null => return Ok(0.0),
        Value::String(s) => parse_quantity(s),
        Value::Number(n) => n.as_f64().filter(|v| v.is_finite() && *v >= 0.0),
        _ => None,
    };
    // 2^70: beyond any machine, and far from overflowing a sum of many containers.
    value.filter(|v| *v <= 1.2e21).ok_or_else(|| {
        doc.error(
            &node.path,
            format!(
                "expected a quantity of {unit} such as \"500m\", \"8\" or \"64Gi\", got {}",
                show(node.value)
            ),
        )
    })
}

/// `500m` -> 0.5, `64Gi` -> 64 x 2^30, `1e3` -> 1000; `None` for anything else.
fn parse_quantity(text: &str) -> Option<f64> {
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+')).unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let number = number.strip_prefix('+').unwrap_or(number);
    if number.is_empty() || number.contains('+') {
        return None;
    }
    let base: f64 = number.parse().ok()?;
    let scale = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        _ => {
            let exponent = suffix.strip_prefix(['e', 'E'])?;
            let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
            if digits.is_empty() || digits.len() > 3 || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            10f64.powi(exponent.parse::<i32>().ok()?)
        }
    };
    let value = base * scale;
    (value.is_finite() && value >= 0.0).then_some(value)
}

/// One container's `nvidia.com/gpu`: its limit, else its request (Kubernetes
/// requires the two equal for an extended resource when both are given).
fn container_gpus(doc: &Doc<'_>, container: &Node<'_>) -> Result<u64, TraceError> {
    let resources = container.at(doc, "resources")?;
    let limit_node = resources.at(doc, "limits")?.at(doc, GPU_RESOURCE)?;
    let request_node = resources.at(doc, "requests")?.at(doc, GPU_RESOURCE)?;
    let (limit, request) = (quantity(doc, &limit_node)?, quantity(doc, &request_node)?);
    match (limit, request) {
        (Some(l), Some(r)) if l != r => Err(doc.error(
            &request_node.path,
            format!("requests {r} and limits {l} of {GPU_RESOURCE} differ; Kubernetes requires them equal for an extended resource"),
        )),
        (Some(n), _) | (None, Some(n)) => Ok(n),
        (None, None) => Ok(0),
    }
}

/// A GPU quantity: a whole number, as a string (`"4"`, how Kubernetes writes it)
/// or a JSON number; absent is `None`.
fn quantity(doc: &Doc<'_>, node: &Node<'_>) -> Result<Option<u64>, TraceError> {
    let parsed = match node.value {
        Value::Null => return Ok(None),
        Value::String(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => s.parse::<u64>().ok(),
        Value::Number(n) => n.as_u64(),
        _ => None,
    };
    let Some(n) = parsed else {
        return Err(doc.error(
            &node.path,
            format!("expected a whole number of GPUs such as \"4\", got {}", show(node.value)),
        ));
    };
    if n > u64::from(MAX_GPUS_PER_JOB) {
        return Err(doc.error(
            &node.path,
            format!("{n} GPUs exceeds the limit of {MAX_GPUS_PER_JOB} GPUs per job (core::limits::MAX_GPUS_PER_JOB)"),
        ));
    }
    Ok(Some(n))
}

/// A non-negative integer field (`parallelism`, `completions`); absent is `None`.
fn count(doc: &Doc<'_>, node: &Node<'_>) -> Result<Option<u64>, TraceError> {
    match node.value {
        Value::Null => Ok(None),
        Value::Number(n) if n.as_u64().is_some() => Ok(n.as_u64()),
        other => Err(doc.error(&node.path, format!("expected a non-negative integer, got {}", show(other)))),
    }
}

/// A time that must be there.
fn required_time(doc: &Doc<'_>, node: &Node<'_>) -> Result<i64, TraceError> {
    time(doc, node)?.ok_or_else(|| {
        doc.error(&node.path, "expected an RFC 3339 time such as 2026-01-05T10:00:00Z, got none")
    })
}

/// An RFC 3339 time (`2026-01-05T10:00:00Z`, `...+02:00`, fractions allowed) as
/// microseconds since 1970-01-01 UTC; absent or null is `None`.
fn time(doc: &Doc<'_>, node: &Node<'_>) -> Result<Option<i64>, TraceError> {
    let text = match node.value {
        Value::Null => return Ok(None),
        Value::String(s) => s.as_str(),
        other => {
            return Err(doc.error(
                &node.path,
                format!("expected an RFC 3339 time such as 2026-01-05T10:00:00Z, got {}", show(other)),
            ))
        }
    };
    let bad = |reason: String| {
        doc.error(
            &node.path,
            format!("expected an RFC 3339 time such as 2026-01-05T10:00:00Z, got {text:?} ({reason})"),
        )
    };
    let (local, offset_us) = split_zone(text).ok_or_else(|| bad("no time zone: Z or +HH:MM".to_string()))?;
    let us = parse_wall_clock_us(local).map_err(bad)? - offset_us;
    let secs = us.div_euclid(1_000_000);
    if !(MIN_UNIX_SECONDS..=MAX_UNIX_SECONDS).contains(&secs) {
        return Err(doc.error(
            &node.path,
            format!(
                "{text:?} is outside the accepted range {} to {} (core::limits::MIN_UNIX_SECONDS, MAX_UNIX_SECONDS)",
                format_wall_clock(MIN_UNIX_SECONDS * 1_000_000),
                format_wall_clock(MAX_UNIX_SECONDS * 1_000_000),
            ),
        ));
    }
    Ok(Some(us))
}

/// `2026-01-05T10:00:00Z` -> (`2026-01-05T10:00:00`, 0); `...+02:00` -> (.., 2 h in µs).
fn split_zone(text: &str) -> Option<(&str, i64)> {
    if let Some(local) = text.strip_suffix(['Z', 'z']) {
        return Some((local, 0));
    }
    let at = text.len().checked_sub(6)?;
    let (local, zone) = (text.get(..at)?, text.get(at..)?);
    let sign = match zone.as_bytes()[0] {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let (h, m) = zone[1..].split_once(':')?;
    let two_digits = |s: &str| s.len() == 2 && s.bytes().all(|b| b.is_ascii_digit());
    if !two_digits(h) || !two_digits(m) || !local.contains('T') {
        return None;
    }
    let (h, m): (i64, i64) = (h.parse().ok()?, m.parse().ok()?);
    if h >= 24 || m >= 60 {
        return None;
    }
    Some((local, sign * (h * 60 + m) * 60_000_000))
}

/// One step of a JSON path.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

fn path_text(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Index(i) => out.push_str(&format!("[{i}]")),
            Step::Key(k) if !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Step::Key(k) => out.push_str(&format!("[{k:?}]")),
        }
    }
    if out.is_empty() {
        out.push_str("(document)");
    }
    out
}

struct PathDisplay<'a>(&'a [Step]);

impl fmt::Display for PathDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&path_text(self.0))
    }
}

static NULL: Value = Value::Null;

/// A value and the path it was reached by.
#[derive(Clone, Debug)]
struct Node<'v> {
    value: &'v Value,
    path: Vec<Step>,
}

impl<'v> Node<'v> {
    fn key(&self, key: &str) -> Vec<Step> {
        let mut path = self.path.clone();
        path.push(Step::Key(key.to_string()));
        path
    }

    /// The member `key` (null when absent); an error when this is neither an
    /// object nor null.
    fn at(&self, doc: &Doc<'_>, key: &str) -> Result<Node<'v>, TraceError> {
        match self.value {
            Value::Object(map) => Ok(Node { value: map.get(key).unwrap_or(&NULL), path: self.key(key) }),
            Value::Null => Ok(Node { value: &NULL, path: self.key(key) }),
            other => {
                Err(doc.error(&self.path, format!("expected an object with `{key}`, got {}", show(other))))
            }
        }
    }

    fn string(&self, doc: &Doc<'_>) -> Result<Option<&'v str>, TraceError> {
        match self.value {
            Value::Null => Ok(None),
            Value::String(s) => Ok(Some(s)),
            other => Err(doc.error(&self.path, format!("expected a string, got {}", show(other)))),
        }
    }

    /// The elements of an array (none when null).
    fn array(&self, doc: &Doc<'_>) -> Result<Vec<Node<'v>>, TraceError> {
        match self.value {
            Value::Null => Ok(Vec::new()),
            Value::Array(values) => Ok(values
                .iter()
                .enumerate()
                .map(|(i, value)| {
                    let mut path = self.path.clone();
                    path.push(Step::Index(i));
                    Node { value, path }
                })
                .collect()),
            other => Err(doc.error(&self.path, format!("expected an array, got {}", show(other)))),
        }
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A value for a message: its type, and its text when short.
fn show(value: &Value) -> String {
    match value {
        Value::Array(_) | Value::Object(_) => type_name(value).to_string(),
        _ => {
            let text = value.to_string();
            if text.len() <= 40 {
                format!("{} {text}", type_name(value))
            } else {
                type_name(value).to_string()
            }
        }
    }
}

/// The input text, for turning JSON paths into lines.
struct Doc<'t> {
    file: String,
    text: &'t str,
    /// Byte offsets of every `\n`.
    newlines: Vec<usize>,
}

impl Doc<'_> {
    fn line_of(&self, offset: usize) -> u64 {
        self.newlines.partition_point(|&nl| nl < offset) as u64 + 1
    }

    /// An error at `path`, on the line of its value (or of the nearest enclosing
    /// value that is there, for a missing member).
    fn error(&self, path: &[Step], message: impl Into<String>) -> TraceError {
        let offset = (0..=path.len()).rev().find_map(|n| locate(self.text, &path[..n])).unwrap_or(0);
        TraceError::Field {
            file: self.file.clone(),
            line: self.line_of(offset),
            field: PathDisplay(path).to_string(),
            message: message.into(),
        }
    }
}

fn newlines(text: &str) -> Vec<usize> {
    text.bytes().enumerate().filter(|&(_, b)| b == b'\n').map(|(i, _)| i).collect()
}

// A minimal walk over JSON text that serde_json has already accepted: enough to
// find where a path's value starts. Never panics on other input; answers None.

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// `b[i]` is `"`: the index just past the closing quote.
fn string_end(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            b'"' => return Some(j + 1),
            _ => j += 1,
        }
    }
    None
}

/// The index just past the value starting at `i`.
fn skip_value(b: &[u8], i: usize) -> Option<usize> {
    match *b.get(i)? {
        b'"' => string_end(b, i),
        b'{' | b'[' => {
            let (mut depth, mut j) = (0usize, i);
            loop {
                match *b.get(j)? {
                    b'"' => {
                        j = string_end(b, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.checked_sub(1)?;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        _ => {
            let mut j = i;
            while j < b.len() && !matches!(b[j], b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                j += 1;
            }
            (j > i).then_some(j)
        }
    }
}

/// The byte offset where the value at `path` starts. A repeated key resolves to
/// its last occurrence, as serde_json keeps the last.
fn locate(text: &str, path: &[Step]) -> Option<usize> {
    let b = text.as_bytes();
    let mut i = skip_ws(b, 0);
    for step in path {
        match step {
            Step::Key(key) => {
                if b.get(i) != Some(&b'{') {
                    return None;
                }
                i += 1;
                let mut found = None;
                loop {
                    i = skip_ws(b, i);
                    match *b.get(i)? {
                        b'}' => break,
                        b',' => {
                            i += 1;
                            continue;
                        }
                        b'"' => {}
                        _ => return None,
                    }
                    let end = string_end(b, i)?;
                    let name = b.get(i + 1..end - 1)?;
                    i = skip_ws(b, end);
                    if b.get(i) != Some(&b':') {
                        return None;
                    }
                    i = skip_ws(b, i + 1);
                    if name == key.as_bytes() {
                        found = Some(i);
                    }
                    i = skip_value(b, i)?;
                }
                i = found?;
            }
            Step::Index(n) => {
                if b.get(i) != Some(&b'[') {
                    return None;
                }
                i = skip_ws(b, i + 1);
                for _ in 0..*n {
                    i = skip_ws(b, skip_value(b, i)?);
                    if b.get(i) != Some(&b',') {
                        return None;
                    }
                    i = skip_ws(b, i + 1);
                }
                if matches!(b.get(i), None | Some(b']')) {
                    return None;
                }
            }
        }
    }
    Some(i)
}

/// Where each element of the top-level array `key` starts, in one pass.
fn element_offsets(text: &str, key: &str) -> Vec<usize> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let Some(mut i) = locate(text, &[Step::Key(key.to_string())]) else { return out };
    if b.get(i) != Some(&b'[') {
        return out;
    }
    i = skip_ws(b, i + 1);
    while let Some(&c) = b.get(i) {
        if c == b']' {
            break;
        }
        out.push(i);
        let Some(end) = skip_value(b, i) else { break };
        i = skip_ws(b, end);
        if b.get(i) == Some(&b',') {
            i = skip_ws(b, i + 1);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, ns: &str, gpus: &str, phase: &str, start: &str, finished: &str) -> String {
        format!(
            r#"{{"apiVersion": "v1", "kind": "Pod",
  "metadata": {{"name": "{name}", "namespace": "{ns}", "creationTimestamp": "2026-01-05T10:00:00Z"}},
  "spec": {{"containers": [{{"name": "main", "resources": {{"limits": {{"nvidia.com/gpu": {gpus}}}}}}}]}},
  "status": {{"phase": "{phase}", "startTime": {start},
    "containerStatuses": [{{"name": "main", "state": {{"terminated": {{"exitCode": 0, "finishedAt": {finished}}}}}}}]}}}}"#
        )
    }

    fn list(items: &[String]) -> String {
        format!("{{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [\n{}\n]}}\n", items.join(",\n"))
    }

    fn parse(text: &str) -> Result<Workload, TraceError> {
        parse_kubectl(Path::new("pods.json"), text.as_bytes().to_vec(), &Slice::all())
    }

    fn skipped(w: &Workload, reason: &str) -> u64 {
        w.skipped.iter().find(|s| s.reason == reason).map_or(0, |s| s.rows)
    }

    const START: &str = "\"2026-01-05T10:00:30Z\"";
    const END: &str = "\"2026-01-05T11:00:30Z\"";

    #[test]
    fn pods_map_to_jobs_with_namespaces_as_tenants() {
        let text = list(&[
            pod("a", "vision", "\"4\"", "Succeeded", START, END),
            pod("b", "nlp", "2", "Failed", START, "\"2026-01-05T12:00:00.5+01:00\""),
        ]);
        let w = parse(&text).unwrap();
        let names: Vec<&str> = w.tenants.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["nlp", "vision"]);
        assert_eq!(w.lines, [2, 7], "the line each item starts on");
        assert_eq!((w.jobs[0].gpus, w.jobs[0].work, w.jobs[0].tenant.0), (4, 3600.0, 1));
        // 12:00:00.5+01:00 is 11:00:00.5Z: 59 min 30.5 s = 3,570.5 s after 10:00:30.
        assert_eq!((w.jobs[1].gpus, w.jobs[1].work), (2, 3570.5));
        assert_eq!(w.jobs[1].duration_estimate, Some(Span(3_570_500_000)));
        assert!(
            w.notes.iter().any(|n| n == "kubectl: kept pods by phase: Failed 1, Succeeded 1"),
            "{:?}",
            w.notes
        );
        assert!(w.notes.iter().any(|n| n == "time 0 is 2026-01-05 10:00:00"), "{:?}", w.notes);
    }

    #[test]
    fn every_pod_skip_reason_is_counted() {
        let text = list(&[
            pod("ok", "a", "1", "Succeeded", START, END),
            pod("cpu", "a", "0", "Succeeded", START, END),
            pod("wait", "a", "1", "Pending", "null", "null"),
            pod("run", "a", "1", "Running", START, "null"),
            pod("lost", "a", "1", "Unknown", START, "null"),
            pod("evicted", "a", "1", "Failed", START, "null"),
            pod("rejected", "a", "1", "Failed", "null", "null"),
            r#"{"kind": "Service", "metadata": {"name": "s", "namespace": "a"}}"#.to_string(),
        ]);
        let w = parse(&text).unwrap();
        assert_eq!(w.jobs.len(), 1);
        assert_eq!(skipped(&w, SKIP_NO_GPU), 1);
        assert_eq!(skipped(&w, SKIP_NEVER_STARTED), 2);
        assert_eq!(skipped(&w, SKIP_RUNNING), 1);
        assert_eq!(skipped(&w, SKIP_UNKNOWN_PHASE), 1);
        assert_eq!(skipped(&w, SKIP_NO_FINISH), 1);
        assert_eq!(skipped(&w, SKIP_OTHER_KIND), 1);
    }

    #[test]
    fn init_containers_follow_the_max_rule() {
        let spec = |init: &str, apps: &str| {
            let v: Value =
                serde_json::from_str(&format!(r#"{{"initContainers": {init}, "containers": {apps}}}"#))
                    .unwrap();
            let doc = Doc { file: "x".into(), text: "", newlines: Vec::new() };
            pod_demand(&doc, &Node { value: &v, path: Vec::new() }).unwrap().gpus
        };
        let c = |n: u32| format!(r#"{{"resources": {{"limits": {{"nvidia.com/gpu": "{n}"}}}}}}"#);
        let sidecar = |n: u32| {
            format!(
                r#"{{"restartPolicy": "Always", "resources": {{"requests": {{"nvidia.com/gpu": {n}}}}}}}"#
            )
        };
        assert_eq!(spec("[]", &format!("[{}, {}]", c(2), c(3))), 5, "app containers add up");
        assert_eq!(spec(&format!("[{}]", c(8)), &format!("[{}]", c(2))), 8, "a bigger init container wins");
        assert_eq!(spec(&format!("[{}]", c(1)), &format!("[{}]", c(2))), 2);
        assert_eq!(
            spec(&format!("[{}, {}]", sidecar(1), c(4)), &format!("[{}]", c(2))),
            5,
            "sidecar 1 + init 4"
        );
        assert_eq!(
            spec(&format!("[{}, {}]", c(2), sidecar(1)), &format!("[{}]", c(2))),
            3,
            "sidecar 1 + app 2"
        );
    }

    #[test]
    fn cpu_and_memory_requests_become_cores_and_gib() {
        assert_eq!(parse_quantity("500m"), Some(0.5));
        assert_eq!(parse_quantity("64Gi"), Some(64.0 * GIB));
        assert_eq!(parse_quantity("1G"), Some(1e9));
        assert_eq!(parse_quantity("129e6"), Some(129e6));
        assert_eq!(parse_quantity("1.5"), Some(1.5));
        for bad in ["", "-1", "1Q", "e3", "1e", "1e9999", "Gi", "1+2"] {
            assert_eq!(parse_quantity(bad), None, "{bad:?}");
        }
        // Requests win over limits; a missing request falls back to the limit.
        let text = list(&[pod("a", "x", "1", "Succeeded", START, END).replace(
            r#""resources": {"limits": {"nvidia.com/gpu": 1}}"#,
            r#""resources": {"limits": {"nvidia.com/gpu": 1, "cpu": "4", "memory": "1G"}, "requests": {"cpu": "1500m"}}},
               {"resources": {"requests": {"cpu": "500m", "memory": "64Gi"}}"#,
        )]);
        let w = parse(&text).unwrap();
        // 1.5 + 0.5 cores; 1 G (0.93 GiB) + 64 GiB rounds up to 65 GiB.
        assert_eq!((w.jobs[0].cpus, w.jobs[0].memory_gib), (2, 65));
        let bad = text.replace("\"1500m\"", "\"lots\"");
        let err = parse(&bad).unwrap_err().to_string();
        assert!(
            err.contains(
                "field items[0].spec.containers[0].resources.requests.cpu: expected a quantity of CPU cores"
            ),
            "{err}"
        );
    }

    #[test]
    fn jobs_use_parallelism_completion_time_and_conditions() {
        let job = |name: &str, parallelism: &str, status: &str| {
            format!(
                r#"{{"apiVersion": "batch/v1", "kind": "Job",
  "metadata": {{"name": "{name}", "namespace": "research", "creationTimestamp": "2026-01-05T09:00:00Z"}},
  "spec": {{"parallelism": {parallelism}, "completions": 4, "template": {{"spec": {{"containers": [{{"resources": {{"limits": {{"nvidia.com/gpu": "2"}}}}}}]}}}}}},
  "status": {status}}}"#
            )
        };
        let owned = r#"{"kind": "Pod", "metadata": {"name": "done-x1", "namespace": "research",
            "creationTimestamp": "2026-01-05T09:00:01Z", "ownerReferences": [{"kind": "Job", "name": "done"}]},
            "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}}]}, "status": {"phase": "Succeeded"}}"#;
        let text = list(&[
            job(
                "done",
                "8",
                r#"{"startTime": "2026-01-05T09:00:10Z", "completionTime": "2026-01-05T10:00:10Z"}"#,
            ),
            job(
                "failed",
                "1",
                r#"{"startTime": "2026-01-05T09:00:10Z", "conditions": [{"type": "Failed", "status": "True", "lastTransitionTime": "2026-01-05T09:30:10Z"}]}"#,
            ),
            job("active", "1", r#"{"startTime": "2026-01-05T09:00:10Z", "active": 1}"#),
            job("suspended", "1", r#"{}"#),
            owned.to_string(),
        ]);
        let w = parse(&text).unwrap();
        assert_eq!(w.jobs.iter().map(|j| (j.gpus, j.work)).collect::<Vec<_>>(), [(8, 3600.0), (2, 1800.0)]);
        assert_eq!(skipped(&w, SKIP_RUNNING), 1);
        assert_eq!(skipped(&w, SKIP_NEVER_STARTED), 1);
        assert_eq!(skipped(&w, SKIP_POD_OF_LISTED_JOB), 1);
        assert!(
            w.notes.iter().any(|n| n == "kubectl: kept Jobs by final condition: Complete 1, Failed 1"),
            "{:?}",
            w.notes
        );
        assert!(w.notes.iter().any(|n| n.contains("1 Jobs with parallelism > 1")), "{:?}", w.notes);
    }

    #[test]
    fn errors_name_file_line_and_json_path() {
        let bad_time = list(&[
            pod("a", "x", "1", "Succeeded", START, END),
            pod("b", "x", "1", "Succeeded", "\"yesterday\"", END),
        ]);
        let err = parse(&bad_time).unwrap_err().to_string();
        assert!(
            err.starts_with("pods.json line 10, field items[1].status.startTime: expected an RFC 3339 time"),
            "{err}"
        );
        let bad_gpus = list(&[pod("a", "x", "\"0.5\"", "Succeeded", START, END)]);
        let err = parse(&bad_gpus).unwrap_err().to_string();
        assert!(err.starts_with("pods.json line 4, field items[0].spec.containers[0].resources.limits[\"nvidia.com/gpu\"]: expected a whole number of GPUs"), "{err}");
        let bad_type = list(&[pod("a", "x", "1", "Succeeded", START, END)
            .replace("\"containers\": [", "\"containers\": 7, \"x\": [")]);
        let err = parse(&bad_type).unwrap_err().to_string();
        assert!(
            err.contains("line 4, field items[0].spec.containers: expected an array, got a number 7"),
            "{err}"
        );
        let no_ns = list(&[pod("a", "", "1", "Succeeded", START, END)]);
        let err = parse(&no_ns).unwrap_err().to_string();
        assert!(err.contains("line 3, field items[0].metadata.namespace: expected the namespace"), "{err}");
        let backwards = list(&[pod("a", "x", "1", "Succeeded", END, START)]);
        let err = parse(&backwards).unwrap_err().to_string();
        assert!(
            err.contains(
                "field items[0].status.containerStatuses[0].state.terminated.finishedAt: finished at"
            ),
            "{err}"
        );
        let err = parse("{\"kind\": \"List\",\n \"items\": [1,]}").unwrap_err().to_string();
        assert!(err.starts_with("pods.json line 2: not valid JSON (column"), "{err}");
        let err = parse("apiVersion: v1\nitems: []\n").unwrap_err().to_string();
        assert!(err.starts_with("pods.json line 1: not valid JSON") && err.contains("-o json"), "{err}");
        let err = parse("[]").unwrap_err().to_string();
        assert!(err.starts_with("pods.json: expected a JSON object"), "{err}");
        let err = parse("{\"kind\": \"PodList\"}").unwrap_err().to_string();
        assert!(err.contains("field items: expected a List of Pods or Jobs"), "{err}");
        let far = list(&[pod("a", "x", "1", "Succeeded", START, "\"2099-01-05T11:00:30Z\"")]);
        assert!(parse(&far).unwrap_err().to_string().contains("MAX_JOB_DURATION"));
    }

    #[test]
    fn a_single_pod_reads_too() {
        let w = parse(&pod("a", "x", "1", "Succeeded", START, END)).unwrap();
        assert_eq!((w.jobs.len(), w.lines[0]), (1, 1));
    }

    #[test]
    fn locate_finds_values_and_zones_split() {
        let text = "{\"a\": [1, {\"b\\\"\": 2, \"c\": [3, 4]}],\n \"a\": {\"d\": null}}";
        let at = |path: &[Step]| locate(text, path).map(|i| &text[i..i + 1]);
        assert_eq!(at(&[Step::Key("a".into()), Step::Key("d".into())]), Some("n"), "the last duplicate");
        assert_eq!(at(&[Step::Key("a".into()), Step::Index(1)]), None);
        assert_eq!(split_zone("2026-01-05T10:00:00-05:30"), Some(("2026-01-05T10:00:00", -19_800_000_000)));
        assert_eq!(split_zone("2026-01-05T10:00:00"), None);
        assert_eq!(element_offsets("{\"items\": [ {}, [1,2] ,3]}", "items"), [12, 16, 23]);
    }
}
