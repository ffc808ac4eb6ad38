//! `--synthetic sjf-bsbf`, `--interference` and the sharing policies from the
//! command line: deterministic output, and bad tables refused naming file, line
//! and field.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{cotenant, stderr, stdout, temp_dir};

const TABLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/sjf-bsbf/interference.txt");
const CLUSTER: &str = "nodes=2,gpus-per-node=8,gpu=A6000";

fn sim(table: &str, policies: &str) -> std::process::Output {
    let args = ["sim", "--synthetic", "sjf-bsbf,jobs=80,rate=60/h,seed=2", "--cluster", CLUSTER];
    let mut args: Vec<&str> = args.to_vec();
    args.extend(["--interference", table, "--policy", policies, "--json"]);
    cotenant(&args)
}

#[test]
fn sharing_runs_are_deterministic_and_complete() {
    let first = sim(TABLE, "sjf-bsbf,sjf-ffs,tiresias");
    assert!(first.status.success(), "{}", stderr(&first));
    assert_eq!(stdout(&first), stdout(&sim(TABLE, "sjf-bsbf,sjf-ffs,tiresias")));
    assert!(stdout(&first).contains("\"completed\": 80"), "{}", stdout(&first));
}

#[test]
fn a_table_with_a_missing_pair_is_refused_naming_it() {
    let dir = temp_dir("sjf-bsbf-table");
    let path = dir.join("missing.txt");
    let text = std::fs::read_to_string(TABLE).unwrap().replace("mps lstm-b20 vgg16-b64 ", "# ");
    std::fs::write(&path, text).unwrap();
    let out = sim(path.to_str().unwrap(), "sjf-bsbf");
    assert_eq!(out.status.code(), Some(1));
    let wanted = "missing.txt line 6, field xi: no entry for mps lstm-b20 | vgg16-b64";
    assert!(stderr(&out).contains(wanted), "{}", stderr(&out));
}

#[test]
fn a_malformed_number_and_an_unknown_model_name_their_line_and_field() {
    let dir = temp_dir("sjf-bsbf-bad");
    let text = std::fs::read_to_string(TABLE).unwrap();
    let path = dir.join("number.txt");
    std::fs::write(
        &path,
        text.replace("time-slice lstm-b20 lstm-b20 1.173", "time-slice lstm-b20 lstm-b20 1.1.7"),
    )
    .unwrap();
    let out = sim(path.to_str().unwrap(), "sjf-bsbf");
    assert!(
        stderr(&out).contains("number.txt line 17, field xi: expected a number from 1 to 100, got '1.1.7'"),
        "{}",
        stderr(&out)
    );
    let path = dir.join("model.txt");
    std::fs::write(&path, text.replace("models resnet18-b128 ", "models resnet18 ")).unwrap();
    let out = sim(path.to_str().unwrap(), "sjf-bsbf");
    assert!(
        stderr(&out).contains("model.txt line 8, field job: unknown model 'resnet18-b128'"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn sharing_policies_need_a_table() {
    let out =
        cotenant(&["sim", "--synthetic", "sjf-bsbf,jobs=10", "--cluster", CLUSTER, "--policy", "sjf-bsbf"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("needs an interference table (--interference FILE)"), "{}", stderr(&out));
}

#[test]
fn a_job_larger_than_every_gpu_is_refused_before_the_run() {
    let out =
        cotenant(&["sim", "--synthetic", "sjf-bsbf,jobs=50", "--cluster", "k80=16", "--policy", "fifo"]);
    assert_eq!(out.status.code(), Some(1));
    let wanted = "needs 34 GiB of GPU memory per GPU, but the cluster's largest GPU has 24 GiB";
    assert!(stderr(&out).contains(wanted), "{}", stderr(&out));
}
