//! Property: no input makes a reader panic. Arbitrary text built from the
//! characters the formats use either reads (and then the `Workload` invariants
//! hold) or fails with an error.

mod common;

use common::{check_invariants, TempDir};
use cotenant_trace::{parse_cluster_inline, read_trace, Slice, SyntheticSpec, TraceKind};
use proptest::prelude::*;

const HEADERS: [(TraceKind, &str); 8] = [
    (TraceKind::Philly, "timestamp,duration,num_gpus,gpu_time,cluster\n"),
    (TraceKind::Itp, "job_id,submission_time,duration,num_gpu\n"),
    (TraceKind::Gavel, ""),
    (TraceKind::Pollux, "name,time,application,num_replicas,batch_size\n"),
    (TraceKind::Tiresias, "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"),
    (
        TraceKind::Openb,
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n",
    ),
    (TraceKind::Sacct, "JobID|User|Account|Partition|Submit|Start|End|Elapsed|State|AllocTRES|ReqTRES\n"),
    (TraceKind::Kubectl, "{\"kind\": \"List\", \"items\": ["),
];

fn body() -> impl Strategy<Value = String> {
    proptest::string::string_regex("([0-9a-z:. \\-]{0,12}[,\\t|]){0,11}[0-9a-z.\\-]{0,8}(\r?\n)?")
        .expect("regex")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn readers_never_panic(rows in proptest::collection::vec(body(), 0..6), kind in 0usize..HEADERS.len()) {
        let (kind, header) = HEADERS[kind];
        let dir = TempDir::new("prop");
        let path = dir.write("input.txt", &format!("{header}{}", rows.join("\n")));
        if let Ok(w) = read_trace(kind, &path, &Slice::all()) {
            check_invariants(&w);
        }
    }

    #[test]
    fn spec_parsers_never_panic(text in "[a-z0-9=,:/|. \\-]{0,40}") {
        let _ = parse_cluster_inline(&text);
        let _ = SyntheticSpec::parse(&text);
    }
}
