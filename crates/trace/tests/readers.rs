//! Every reader on small hand-written fixtures: CRLF, blank lines, no final
//! newline, gzip, slicing and the mapping of each column.

mod common;

use common::{check_invariants, TempDir};
use cotenant_core::{Span, Time};
use cotenant_trace::{
    read_gavel, read_itp, read_openb_nodes, read_openb_pods, read_philly, read_pollux, read_tiresias,
    read_trace, Slice, TraceKind, SKIP_CPU_NODE, SKIP_CPU_ONLY, SKIP_NEVER_SCHEDULED, SKIP_NO_DELETION,
};

const PHILLY: &str = "timestamp,duration,num_gpus,gpu_time,cluster\n\
2017-11-06 00:00:10,100.0,1,100.0,bbb\n\
2017-11-05 23:59:59,50.0,2,100.0,aaa\n\
\n\
2017-11-06 00:00:10,30.5,4,122.0,aaa\n\
2017-11-07 12:00:00,10.0,8,80.0,ccc\n\
\n";

#[test]
fn philly_sorts_by_time_keeps_file_order_on_ties_and_names_tenants_in_order() {
    let dir = TempDir::new("philly");
    let w = read_philly(&dir.write("philly.csv", PHILLY), &Slice::all()).unwrap();
    check_invariants(&w);
    assert_eq!(w.lines, vec![3, 2, 5, 6]);
    let names: Vec<&str> = w.tenants.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["aaa", "bbb", "ccc"]);
    // Rebased to the first arrival (23:59:59).
    let arrivals: Vec<u64> = w.jobs.iter().map(|j| j.arrival.0 / 1_000_000).collect();
    assert_eq!(arrivals, [0, 11, 11, 36 * 3600 + 1]);
    let job = &w.jobs[2];
    assert_eq!((job.gpus, job.work, job.tenant.0), (4, 30.5, 0));
    assert_eq!(job.duration_estimate, Some(Span(30_500_000)));
}

#[test]
fn philly_window_rebases_to_its_start_and_drops_tenants_without_jobs() {
    let dir = TempDir::new("philly-window");
    let path = dir.write("philly.csv", PHILLY);
    let slice = Slice::window(Some("2017-11-06"), Some("2017-11-07"), None).unwrap();
    let w = read_philly(&path, &slice).unwrap();
    assert_eq!(w.jobs.len(), 2);
    assert_eq!(w.jobs[0].arrival, Time::from_secs(10));
    let names: Vec<&str> = w.tenants.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["aaa", "bbb"]);
    assert!(w.notes.iter().any(|n| n == "time window kept 2 of 4 jobs"), "{:?}", w.notes);
    let slice = Slice::window(Some("2017-11-06 00:00:10"), None, Some(1)).unwrap();
    let w = read_philly(&path, &slice).unwrap();
    assert_eq!((w.jobs.len(), w.lines[0], w.jobs[0].arrival), (1, 2, Time::ZERO));
}

#[test]
fn crlf_gzip_and_missing_final_newline_read_the_same() {
    let dir = TempDir::new("philly-variants");
    let plain = read_philly(&dir.write("a.csv", PHILLY), &Slice::all()).unwrap();
    let crlf = PHILLY.replace('\n', "\r\n");
    let crlf = read_philly(&dir.write("b.csv", &crlf), &Slice::all()).unwrap();
    let gz = read_philly(&dir.write("c.csv.gz", PHILLY), &Slice::all()).unwrap();
    let trimmed = read_philly(&dir.write("d.csv", PHILLY.trim_end()), &Slice::all()).unwrap();
    for other in [&crlf, &gz, &trimmed] {
        assert_eq!(other.jobs, plain.jobs);
        assert_eq!(other.lines, plain.lines);
    }
}

#[test]
fn itp_uses_one_tenant_named_after_the_file() {
    let dir = TempDir::new("itp");
    let text = "job_id,submission_time,duration,num_gpu\r\nx1,2266647,604,16\r\n\r\nx2,2266600,767,1\r\nx3,2300000,0,2";
    let path = dir.write("cluster10.csv.gz", text);
    let w = read_trace(TraceKind::Itp, &path, &Slice::all()).unwrap();
    check_invariants(&w);
    assert_eq!(w.tenants.len(), 1);
    assert_eq!(w.tenants[0].name, "cluster10");
    assert_eq!(w.lines, [4, 2, 5]);
    assert_eq!(w.jobs[1].arrival, Time::from_secs(47));
    assert_eq!((w.jobs[1].gpus, w.jobs[1].work), (16, 604.0));
    // A window in seconds, relative to the trace's own clock, rebased to its start.
    let slice = Slice::window(Some("2266640"), Some("2266650"), None).unwrap();
    let w = read_itp(&path, &slice).unwrap();
    assert_eq!((w.jobs.len(), w.jobs[0].arrival), (1, Time::from_secs(7)));
    // A wall-clock window does not fit a relative trace.
    let slice = Slice::window(Some("2021-03-04"), None, None).unwrap();
    assert!(read_itp(&path, &slice).unwrap_err().to_string().contains("seconds"));
}

const GAVEL_7: &str = "Transformer (batch size 128)\tcd %s/translation && python3 train.py -batch_size 128\t-step\t1\t95121\t0.000000\t1\n\
Recommendation (batch size 8192)\tcd %s/rec && python3 train.py\t-n\t1\t10000\t6.000000\t4\n\
Transformer (batch size 128)\tcd %s/translation && python3 train.py -batch_size 128\t-step\t1\t500\t3.500000\t2\n";

const GAVEL_10: &str = "ResNet-18 (batch size 64)\tpython3 main.py --batch_size 64\timage_classification/cifar10\t--num_steps\t1\t36030\t1\t1\t-1.000000\t0\n\
LM (batch size 5)\tpython main.py --cuda\tlanguage_modeling\t--steps\t1\t10027\t2\t3\t100.000000\t20\n\
\n";

#[test]
fn gavel_seven_column_form() {
    let dir = TempDir::new("gavel7");
    let w = read_gavel(&dir.write("0e4a51.trace", GAVEL_7), &Slice::all()).unwrap();
    check_invariants(&w);
    assert_eq!(w.tenants[0].name, "0e4a51");
    assert_eq!(w.job_types, ["Transformer (batch size 128)", "Recommendation (batch size 8192)"]);
    let job_types: Vec<Option<u32>> = w.jobs.iter().map(|j| j.job_type).collect();
    assert_eq!(job_types, [Some(0), Some(0), Some(1)]);
    assert_eq!(w.lines, [1, 3, 2]);
    assert_eq!(w.jobs[1].arrival, Time(3_500_000));
    assert_eq!((w.jobs[2].gpus, w.jobs[2].work, w.jobs[2].priority), (4, 10_000.0, 0));
    assert!(w.jobs.iter().all(|j| j.duration_estimate.is_none()));
}

#[test]
fn gavel_ten_column_form_maps_priority_and_counts_slos() {
    let dir = TempDir::new("gavel10");
    let w = read_gavel(&dir.write("small.trace.gz", GAVEL_10), &Slice::all()).unwrap();
    check_invariants(&w);
    assert_eq!(w.jobs.len(), 2);
    assert_eq!((w.jobs[0].gpus, w.jobs[0].work, w.jobs[0].priority), (1, 36_030.0, 0));
    assert_eq!((w.jobs[1].gpus, w.jobs[1].priority, w.jobs[1].arrival), (2, 2, Time::from_secs(20)));
    assert!(w.notes.iter().any(|n| n.contains("1 jobs have an SLO")), "{:?}", w.notes);
}

#[test]
fn pollux_models_run_time_from_the_size_bucket() {
    let dir = TempDir::new("pollux");
    let text = "name,time,application,num_replicas,batch_size\n\
cifar10-0,107,cifar10,6,2048\n\
imagenet-1,110,imagenet,32,6400\n\
ncf-2,135,ncf,1,32768\n";
    let w = read_pollux(&dir.write("workload-1.csv", text), &Slice::all()).unwrap();
    check_invariants(&w);
    assert_eq!(w.tenants[0].name, "workload-1");
    assert_eq!(w.jobs[0].work, 782.0 / 6.0);
    assert_eq!(w.jobs[1].work, 852_992.0 / 32.0);
    assert_eq!((w.jobs[2].gpus, w.jobs[2].work), (1, 782.0));
    assert_eq!(w.job_types[0], "cifar10 (batch size 2048)");
    assert_eq!(w.jobs[2].arrival, Time::from_secs(28));
    assert!(w.notes.iter().any(|n| n.contains("modelled")));
}

#[test]
fn tiresias_crlf_trace() {
    let dir = TempDir::new("tiresias");
    let text = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\r\n0,1,0,606,vgg19,164,30\r\n1,8,30,133,vgg11,147,23\r\n";
    let w = read_tiresias(&dir.write("60_job.csv", text), &Slice::all()).unwrap();
    check_invariants(&w);
    assert_eq!(w.job_types, ["vgg19", "vgg11"]);
    assert_eq!((w.jobs[1].gpus, w.jobs[1].work, w.jobs[1].arrival), (8, 147.0, Time::from_secs(30)));
    assert_eq!(w.jobs[1].duration_estimate, Some(Span::from_secs(147)));
}

const PODS: &str = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n\
p0,12000,16384,1,1000,,LS,Running,100,1100,105\n\
p1,6000,12288,1,460,V100M16|V100M32,BE,Running,50,500,60\n\
p2,4000,1000,0,0,,BE,Running,70,900,70\n\
p3,8000,2048,2,1000,,BE,Pending,80,90,\n\
p4,8000,2048,8,1000,,Burstable,Running,90,,95\n\
p5,88000,327680,8,1000,,Burstable,Succeeded,200,300,210\n";

#[test]
fn openb_pods_skip_with_reasons_and_round_fractional_gpus_up() {
    let dir = TempDir::new("openb");
    let w = read_openb_pods(&dir.write("openb_pod_list_default.csv", PODS), &Slice::all()).unwrap();
    check_invariants(&w);
    assert_eq!(w.lines, [3, 2, 7]);
    let p1 = &w.jobs[0];
    assert_eq!((p1.gpus, p1.work, p1.cpus, p1.memory_gib, p1.priority), (1, 440.0, 6, 12, 0));
    let p0 = &w.jobs[1];
    assert_eq!((p0.arrival, p0.work, p0.priority), (Time::from_secs(50), 995.0, 2));
    assert_eq!((w.jobs[2].gpus, w.jobs[2].priority, w.jobs[2].memory_gib), (8, 1, 320));
    let skipped: Vec<(&str, u64)> = w.skipped.iter().map(|s| (s.reason.as_str(), s.rows)).collect();
    let mut want = vec![(SKIP_CPU_ONLY, 1), (SKIP_NEVER_SCHEDULED, 1), (SKIP_NO_DELETION, 1)];
    want.sort();
    assert_eq!(skipped, want);
    assert!(w.notes.iter().any(|n| n.contains("1 fractional-GPU pods")), "{:?}", w.notes);
    assert!(w.notes.iter().any(|n| n.contains("1 pods' GPU-model constraints")), "{:?}", w.notes);
}

#[test]
fn openb_multigpu_variant_without_times_is_an_error() {
    let dir = TempDir::new("openb-multi");
    let text = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\nopenb-pod-0000,12000,16384,1,1000\n";
    let err = read_openb_pods(&dir.write("openb_pod_list_multigpu20.csv", text), &Slice::all()).unwrap_err();
    assert!(
        err.to_string().contains("openb_pod_list_multigpu20.csv: this pod list has no creation"),
        "{err}"
    );
}

#[test]
fn openb_nodes_become_a_cluster() {
    let dir = TempDir::new("openb-nodes");
    let text = "sn,cpu_milli,memory_mib,gpu,model\nn0,32000,262144,0,\nn1,128000,786432,8,G3\nn2,96000,786432,8,V100M32\nn3,64000,262143,2,G3\n";
    let (cluster, skipped) = read_openb_nodes(&dir.write("nodes.csv", text)).unwrap();
    assert_eq!(cluster.gpu_types, ["G3", "V100M32"]);
    assert_eq!(cluster.nodes.len(), 3);
    assert_eq!(cluster.total_gpus(), 18);
    let n3 = &cluster.nodes[2];
    assert_eq!((n3.name.as_str(), n3.gpu_type.0, n3.cpus, n3.memory_gib), ("n3", 0, 64, 255));
    assert_eq!(skipped.len(), 1);
    assert_eq!((skipped[0].reason.as_str(), skipped[0].rows), (SKIP_CPU_NODE, 1));
}

#[test]
fn vc_quotas_by_largest_remainder() {
    use cotenant_core::TenantSpec;
    use cotenant_trace::{apply_vc_quotas, largest_remainder, VcNodes};
    assert_eq!(largest_remainder(&[1, 1, 1], 10), [4, 3, 3]);
    assert_eq!(largest_remainder(&[3, 1], 10), [8, 2]);
    assert_eq!(largest_remainder(&[1, 2], 10), [3, 7]);
    assert_eq!(largest_remainder(&[0, 0], 10), [0, 0]);
    let vcs = vec![VcNodes { vc: "a".into(), nodes: 64 }, VcNodes { vc: "b".into(), nodes: 32 }];
    let mut tenants = vec![TenantSpec::new("a"), TenantSpec::new("b"), TenantSpec::new("zz")];
    // "zz" is not in the file: quota 0, reported; a and b split the whole cluster 2:1.
    assert_eq!(apply_vc_quotas(&mut tenants, &vcs, 100), ["zz"]);
    let quotas: Vec<Option<u32>> = tenants.iter().map(|t| t.gpu_quota).collect();
    assert_eq!(quotas, [Some(67), Some(33), Some(0)]);
}

#[test]
fn philly_vc_file() {
    let dir = TempDir::new("philly-vc");
    let vcs =
        cotenant_trace::read_philly_vc(&dir.write("philly_vc.csv", "vc,node num\r\nabc,64\r\n\r\nxyz,8"))
            .unwrap();
    assert_eq!(vcs.len(), 2);
    assert_eq!((vcs[1].vc.as_str(), vcs[1].nodes), ("xyz", 8));
    let err =
        cotenant_trace::read_philly_vc(&dir.write("bad_vc.csv", "vc,node num\nabc,many\n")).unwrap_err();
    common::assert_names(&err.to_string(), "bad_vc.csv", 2, "node num");
}

/// Errors found after reading (an unknown Gavel job type in the throughput table)
/// can name the row: `Workload::locate`.
#[test]
fn workload_locates_a_job_by_file_and_line() {
    let dir = TempDir::new("locate");
    let path = dir.write("g.trace", "\nA\tcmd\t-n\t1\t10\t5\t1\nB\tcmd\t-n\t1\t10\t0\t1\n");
    let w = read_trace(TraceKind::Gavel, &path, &Slice::all()).expect("reads");
    // Sorted by arrival: job 0 is B (line 3), job 1 is A (line 2).
    assert!(w.locate(cotenant_core::JobId(0)).ends_with("g.trace line 3"));
    assert!(w.locate(cotenant_core::JobId(1)).ends_with("g.trace line 2"));
    assert!(w.locate(cotenant_core::JobId(9)).starts_with("job 9 of "));
}
