//! The engine task: the only writer of the controller's state. It takes the
//! requests waiting on its channel as one batch (group commit): checks each
//! against the state, journals the accepted entries in one transaction, and
//! only then applies them, records the engine's commands, publishes node
//! versions and answers the callers.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, watch};

use super::{lock, now_us, Core};
use crate::journal::{Entry, Record};
use crate::setup::{Live, Refusal};

/// Most requests one batch (one journal transaction) takes.
pub(super) const MAX_BATCH: usize = 512;

/// Exit status of the process when the journal cannot be written (a restart replays it).
pub(super) const EXIT_JOURNAL_FAILED: i32 = 70;

/// What a caller asks the engine task to do. Ids (job, tenant, node) are
/// decided inside the task, in commit order.
#[derive(Debug)]
pub(super) enum Op {
    AddTenant {
        name: String,
        weight: f64,
        quota: BTreeMap<String, u32>,
        gpu_limit: Option<u32>,
        unix_user: Option<String>,
    },
    Submit {
        tenant: u32,
        request: crate::api::SubmitRequest,
    },
    Cancel {
        job: u32,
    },
    /// An agent (re)registers: bind it, journal `NodeJoined` when needed and
    /// `Vanished` for each attempt the server thinks runs there but the agent
    /// does not report.
    Register {
        name: String,
        gpu_type: String,
        gpu_uuids: Vec<String>,
        running: BTreeSet<(u32, u32)>,
    },
    /// `Exited`, `LaunchFailed` or `Vanished` from an agent (stale ones are dropped).
    Report(Entry),
    NodeLost {
        node: u32,
    },
    Wakeup,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Answer {
    Tenant(u32),
    Job(u32),
    Node(u32),
    Done,
}

pub(super) type Reply = oneshot::Sender<Result<Answer, Refusal>>;

#[derive(Debug)]
pub(super) struct Request {
    pub op: Op,
    pub reply: Reply,
}

/// What the batch already touches: a later request that touches the same
/// job, node or tenant name waits for the next batch, so that every entry is
/// checked against a state that includes the ones before it.
#[derive(Debug, Default)]
struct Claims {
    jobs: BTreeSet<u32>,
    /// Nodes a node entry (joined, lost) touches.
    nodes: BTreeSet<u32>,
    /// Nodes the jobs of job entries (cancel, exit) run on.
    job_nodes: BTreeSet<u32>,
    names: BTreeSet<String>,
    wakeup: bool,
    next_job: u32,
    next_tenant: u32,
}

enum Plan {
    Accept(Vec<Entry>, Answer),
    /// Answered without journaling anything.
    Answer(Result<Answer, Refusal>),
    /// Conflicts with an earlier request of the batch: the batch ends before it.
    Defer,
}

/// Runs until `stop` turns true.
pub(super) async fn run(
    core: Arc<Core>,
    mut requests: mpsc::Receiver<Request>,
    mut stop: watch::Receiver<bool>,
) {
    let mut waiting: VecDeque<Request> = VecDeque::new();
    loop {
        if waiting.is_empty() {
            tokio::select! {
                biased;
                _ = stop.wait_for(|s| *s) => break,
                request = requests.recv() => match request {
                    Some(request) => waiting.push_back(request),
                    None => break,
                },
            }
        }
        while waiting.len() < MAX_BATCH {
            match requests.try_recv() {
                Ok(request) => waiting.push_back(request),
                Err(_) => break,
            }
        }
        commit_batch(&core, &mut waiting).await;
    }
    tracing::debug!("engine task stopped");
}

/// Takes requests from the front of `waiting` (up to [`MAX_BATCH`], stopping at
/// the first that conflicts with the batch), commits and applies them.
async fn commit_batch(core: &Core, waiting: &mut VecDeque<Request>) {
    let mut accepted: Vec<(Vec<Entry>, Answer, Reply)> = Vec::new();
    let (first_seq, at_us) = {
        let state = lock(&core.state);
        let live = &state.live;
        let now = now_us();
        let mut claims = Claims {
            next_job: live.jobs().len() as u32,
            next_tenant: live.tenants().len() as u32,
            ..Claims::default()
        };
        while accepted.len() < MAX_BATCH {
            let Some(request) = waiting.pop_front() else { break };
            match plan(&state, &mut claims, &request.op, now) {
                Plan::Accept(entries, answer) => accepted.push((entries, answer, request.reply)),
                Plan::Answer(answer) => {
                    let _ = request.reply.send(answer);
                }
                Plan::Defer => {
                    waiting.push_front(request);
                    break;
                }
            }
        }
        (state.next_seq, now.max(live.last_at_us()))
    };
    if accepted.is_empty() {
        return;
    }
    let mut records = Vec::new();
    for (entries, _, _) in &accepted {
        for entry in entries {
            let seq = first_seq + records.len() as u64;
            records.push(Record { seq, at_us, entry: entry.clone() });
        }
    }
    if let Err(error) = core.db.append(&records).await {
        fatal(&format!("journal append of {} entries failed: {error}", records.len()));
    }
    let (commands, versions) = {
        let mut state = lock(&core.state);
        state.next_seq = first_seq + records.len() as u64;
        let commands: Vec<(u64, Vec<String>)> = records
            .iter()
            .map(|record| {
                let texts = state.apply(record).iter().map(|c| format!("{c:?}")).collect();
                (record.seq, texts)
            })
            .collect();
        let versions: Vec<u64> = state.live.nodes().iter().map(|n| n.version).collect();
        (commands, versions)
    };
    let commands: Vec<(u64, Vec<String>)> = commands.into_iter().filter(|(_, c)| !c.is_empty()).collect();
    if !commands.is_empty() {
        if let Err(error) = core.db.record_commands(&commands).await {
            fatal(&format!("recording the commands of {} entries failed: {error}", commands.len()));
        }
    }
    for (sender, version) in core.versions.iter().zip(versions) {
        sender.send_if_modified(|v| {
            let changed = *v != version;
            *v = version;
            changed
        });
    }
    core.batch_done.notify_one();
    for (_, answer, reply) in accepted {
        let _ = reply.send(Ok(answer));
    }
}

/// The journal is the truth: if it cannot be written, nothing may be answered
/// or applied. Exit; a restart replays what was committed.
fn fatal(message: &str) -> ! {
    tracing::error!(
        "{message}; exiting (status {EXIT_JOURNAL_FAILED}) so that a restart replays the journal"
    );
    eprintln!("cotenant controller: {message}; exiting so that a restart replays the journal");
    std::process::exit(EXIT_JOURNAL_FAILED)
}

fn plan(state: &super::state::State, claims: &mut Claims, op: &Op, now: u64) -> Plan {
    let live = &state.live;
    match op {
        Op::AddTenant { name, weight, quota, gpu_limit, unix_user } => {
            if claims.names.contains(name) {
                return Plan::Defer;
            }
            let entry = Entry::TenantAdded {
                tenant: claims.next_tenant,
                name: name.clone(),
                weight: *weight,
                quota: quota.clone(),
                gpu_limit: *gpu_limit,
                unix_user: unix_user.clone(),
            };
            if let Err(refusal) = live.check(&entry) {
                return Plan::Answer(Err(refusal));
            }
            claims.names.insert(name.clone());
            claims.next_tenant += 1;
            Plan::Accept(vec![entry], Answer::Tenant(claims.next_tenant - 1))
        }
        Op::Submit { tenant, request } => {
            let entry = Entry::Submitted { job: claims.next_job, tenant: *tenant, request: request.clone() };
            if let Err(refusal) = live.check(&entry) {
                return Plan::Answer(Err(refusal));
            }
            claims.next_job += 1;
            Plan::Accept(vec![entry], Answer::Job(claims.next_job - 1))
        }
        Op::Cancel { job } => {
            if !claim_job(state, claims, *job) {
                return Plan::Defer;
            }
            let entry = Entry::Cancelled { job: *job };
            match live.check(&entry) {
                Ok(()) => Plan::Accept(vec![entry], Answer::Job(*job)),
                Err(refusal) => Plan::Answer(Err(refusal)),
            }
        }
        Op::Report(entry) => {
            let (Entry::Exited { job, .. } | Entry::LaunchFailed { job, .. } | Entry::Vanished { job, .. }) =
                entry
            else {
                return Plan::Answer(Err(Refusal::BadRequest(format!("not a report: {}", entry.kind()))));
            };
            if !claim_job(state, claims, *job) {
                return Plan::Defer;
            }
            match live.check(entry) {
                Ok(()) => Plan::Accept(vec![entry.clone()], Answer::Done),
                Err(Refusal::Stale { job, attempt }) => {
                    tracing::debug!(job, attempt, kind = entry.kind(), "stale report dropped");
                    Plan::Answer(Ok(Answer::Done))
                }
                Err(refusal) => {
                    tracing::warn!(%refusal, kind = entry.kind(), "report dropped");
                    Plan::Answer(Ok(Answer::Done))
                }
            }
        }
        Op::NodeLost { node } => {
            if !live.nodes().get(*node as usize).is_some_and(|n| n.up) {
                return Plan::Answer(Ok(Answer::Done));
            }
            if !claim_node(state, claims, *node) {
                return Plan::Defer;
            }
            Plan::Accept(vec![Entry::NodeLost { node: *node }], Answer::Done)
        }
        Op::Register { name, gpu_type, gpu_uuids, running } => {
            let node = match live.bind_node(name, gpu_type, gpu_uuids.len() as u32) {
                Ok(node) => node,
                Err(refusal) => return Plan::Answer(Err(refusal)),
            };
            if !claim_node(state, claims, node) {
                return Plan::Defer;
            }
            plan_register(state, node, name, gpu_uuids, running)
        }
        Op::Wakeup => {
            if claims.wakeup || live.next_wakeup_us().is_none_or(|t| t > now) {
                return Plan::Answer(Ok(Answer::Done));
            }
            claims.wakeup = true;
            Plan::Accept(vec![Entry::Wakeup], Answer::Done)
        }
    }
}

fn plan_register(
    state: &super::state::State,
    node: u32,
    name: &str,
    gpu_uuids: &[String],
    running: &BTreeSet<(u32, u32)>,
) -> Plan {
    let live: &Live = &state.live;
    let mut entries: Vec<Entry> = state
        .attempts_on(node)
        .into_iter()
        .filter(|attempt| !running.contains(attempt))
        .map(|(job, attempt)| Entry::Vanished { job, attempt })
        .collect();
    let record = &live.nodes()[node as usize];
    if !record.up || record.agent.as_deref() != Some(name) || record.gpu_uuids != gpu_uuids {
        entries.push(Entry::NodeJoined { node, name: name.to_string(), gpu_uuids: gpu_uuids.to_vec() });
    }
    if entries.is_empty() {
        Plan::Answer(Ok(Answer::Node(node)))
    } else {
        Plan::Accept(entries, Answer::Node(node))
    }
}

/// Claims `job` and the nodes it runs on; false if the batch touches any of them.
fn claim_job(state: &super::state::State, claims: &mut Claims, job: u32) -> bool {
    let nodes = state.nodes_of(job);
    if claims.jobs.contains(&job) || nodes.iter().any(|n| claims.nodes.contains(n)) {
        return false;
    }
    claims.jobs.insert(job);
    claims.job_nodes.extend(nodes);
    true
}

/// Claims `node` and the jobs running on it; false if the batch touches any of them.
fn claim_node(state: &super::state::State, claims: &mut Claims, node: u32) -> bool {
    let jobs: Vec<u32> = state.attempts_on(node).into_iter().map(|(job, _)| job).collect();
    if claims.nodes.contains(&node)
        || claims.job_nodes.contains(&node)
        || jobs.iter().any(|j| claims.jobs.contains(j))
    {
        return false;
    }
    claims.nodes.insert(node);
    claims.jobs.extend(jobs);
    true
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::controller::state::State;
    use crate::setup::{parse_nodes, ServerSetup};

    fn state() -> State {
        let setup = ServerSetup {
            nodes: parse_nodes("2x1xA100-80GB").unwrap(),
            policy: "fifo".into(),
            options: BTreeMap::new(),
            round_secs: None,
            seed: 1,
        };
        let mut state = State::new(Live::new(setup, 0).unwrap(), 1);
        let request = serde_json::from_value(serde_json::json!({ "command": ["x"] })).unwrap();
        let entries = [
            Entry::TenantAdded {
                tenant: 0,
                name: "a".into(),
                weight: 1.0,
                quota: BTreeMap::new(),
                gpu_limit: None,
                unix_user: None,
            },
            Entry::NodeJoined { node: 0, name: "h0".into(), gpu_uuids: vec![] },
            Entry::Submitted { job: 0, tenant: 0, request },
        ];
        for (seq, entry) in entries.into_iter().enumerate() {
            state.apply(&Record { seq: seq as u64 + 1, at_us: 10, entry });
        }
        state
    }

    fn accepted(plan: Plan) -> (Vec<Entry>, Answer) {
        match plan {
            Plan::Accept(entries, answer) => (entries, answer),
            Plan::Answer(answer) => panic!("answered {answer:?}"),
            Plan::Defer => panic!("deferred"),
        }
    }

    #[test]
    fn a_batch_ends_before_a_request_that_touches_what_it_already_touches() {
        // Job 0 runs on node 0. Once a cancel of job 0 is in the batch, an exit
        // report of job 0 and the loss of node 0 wait for the next batch
        // (checked against the state after the cancel); submissions and a
        // request about node 1 do not.
        let state = state();
        let mut claims = Claims { next_job: 1, next_tenant: 1, ..Claims::default() };
        assert_eq!(accepted(plan(&state, &mut claims, &Op::Cancel { job: 0 }, 20)).1, Answer::Job(0));
        let exited = Entry::Exited { job: 0, attempt: 1, code: Some(0), signal: None };
        assert!(matches!(plan(&state, &mut claims, &Op::Report(exited), 20), Plan::Defer));
        assert!(matches!(plan(&state, &mut claims, &Op::NodeLost { node: 0 }, 20), Plan::Defer));
        let submit = Op::Submit { tenant: 0, request: state.live.job(0).unwrap().request.clone() };
        assert_eq!(accepted(plan(&state, &mut claims, &submit, 20)).1, Answer::Job(1));
        assert_eq!(accepted(plan(&state, &mut claims, &submit, 20)).1, Answer::Job(2));
        let register = Op::Register {
            name: "h1".into(),
            gpu_type: "A100-80GB".into(),
            gpu_uuids: vec!["GPU-1".into()],
            running: BTreeSet::new(),
        };
        let (entries, answer) = accepted(plan(&state, &mut claims, &register, 20));
        assert_eq!(answer, Answer::Node(1));
        assert_eq!(
            entries,
            [Entry::NodeJoined { node: 1, name: "h1".into(), gpu_uuids: vec!["GPU-1".into()] }]
        );
        let tenant = Op::AddTenant {
            name: "b".into(),
            weight: 1.0,
            quota: BTreeMap::new(),
            gpu_limit: None,
            unix_user: None,
        };
        assert_eq!(accepted(plan(&state, &mut claims, &tenant, 20)).1, Answer::Tenant(1));
        assert!(matches!(plan(&state, &mut claims, &tenant, 20), Plan::Defer));
        // A node that is already down is not lost again; nothing is journaled.
        assert!(matches!(plan(&state, &mut claims, &Op::NodeLost { node: 1 }, 20), Plan::Answer(Ok(_))));
    }
}
