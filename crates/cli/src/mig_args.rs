//! `--mig` and its files: MIG geometries for the cluster's GPU types, the
//! speed-versus-slice curve of each job type, checked against the workload.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Result};
use cotenant_core::mig::{MigGeometry, MigModel};
use cotenant_policies::miso::MigData;
use cotenant_sim::mig_rates::MigRates;
use cotenant_trace::mig::{
    bundled_mig_geometry, bundled_slice_curves, geometry_for, read_mig_geometry, read_slice_curves,
    BUNDLED_CURVES, BUNDLED_GEOMETRY,
};

use crate::workload::Prepared;

/// Flags that turn on MIG for a run.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct MigArgs {
    /// Partition GPUs with MIG: GPU types with a MIG geometry (built in: A100-40GB, H100-80GB,
    /// H200) take the MIG policies (miso, miso-oracle, mig-unpartitioned, mig-static), and jobs
    /// run at their job type's speed-vs-slice curve. Every job must ask for 1 GPU.
    #[arg(long)]
    pub mig: bool,
    /// MIG geometry file (TOML, see crates/trace/data/mig_geometry.toml) instead of the built-in one.
    #[arg(long, value_name = "PATH", requires = "mig")]
    pub mig_geometry: Option<PathBuf>,
    /// Speed-vs-slice curves (TOML, see crates/trace/data/mig_curves.toml) instead of the built-in ones.
    #[arg(long, value_name = "PATH", requires = "mig")]
    pub mig_curves: Option<PathBuf>,
    /// Allow a 4g and a 3g instance on one GPU (sources differ; the geometry files say no).
    #[arg(long, requires = "mig")]
    pub mig_allow_4g3g: bool,
}

/// Everything a MIG run needs, checked against the workload and cluster.
pub struct MigSetup {
    pub model: MigModel,
    pub data: Arc<MigData>,
}

/// `None` without `--mig`.
pub fn setup(args: &MigArgs, prepared: &Prepared) -> Result<Option<MigSetup>> {
    if !args.mig {
        return Ok(None);
    }
    let (mut geometries, geometry_source) = match &args.mig_geometry {
        Some(path) => (read_mig_geometry(path)?, path.display().to_string()),
        None => (bundled_mig_geometry()?, BUNDLED_GEOMETRY.1.to_string()),
    };
    if args.mig_allow_4g3g {
        geometries.iter_mut().for_each(|g| g.allow_4g_3g = true);
    }
    let types = &prepared.cluster.gpu_types;
    let model =
        MigModel { geometries: types.iter().map(|t| geometry_for(&geometries, t).cloned()).collect() };
    if model.geometries.iter().all(Option::is_none) {
        bail!(
            "--mig: no GPU type of the cluster ({}) has a MIG geometry in {geometry_source} (it has: {}); \
             name one in --cluster, e.g. gpu=A100-40GB",
            types.join(", "),
            geometries.iter().map(|g| g.gpu.as_str()).collect::<Vec<_>>().join(", ")
        );
    }
    let (classes, curves_source) = match &args.mig_curves {
        Some(path) => (read_slice_curves(path)?, path.display().to_string()),
        None => (bundled_slice_curves()?, BUNDLED_CURVES.1.to_string()),
    };
    let workload = &prepared.workload;
    let mut curves = Vec::new();
    for name in &workload.job_types {
        match classes.iter().find(|c| &c.curve.name == name) {
            Some(class) => curves.push(class.curve.clone()),
            None => bail!(
                "--mig: job type '{name}' has no curve in {curves_source} (classes: {})",
                classes.iter().map(|c| c.curve.name.as_str()).collect::<Vec<_>>().join(", ")
            ),
        }
    }
    for job in &workload.jobs {
        if job.gpus != 1 {
            bail!(
                "--mig: {} asks for {} GPUs; a MIG instance hosts one single-GPU job",
                workload.locate(job.id),
                job.gpus
            );
        }
        if job.job_type.is_none() {
            bail!(
                "--mig: {} has no job type, so no speed-vs-slice curve (use --synthetic miso or a trace with job types)",
                workload.locate(job.id)
            );
        }
    }
    let used: Vec<MigGeometry> = model.geometries.iter().flatten().cloned().collect();
    let data = Arc::new(MigData { curves, geometries: used });
    Ok(Some(MigSetup { model, data }))
}

/// The rate model of a MIG run.
pub fn rates(setup: &MigSetup) -> MigRates {
    MigRates::new(setup.data.curves.clone())
}

/// `--synthetic miso[:KEY=VALUE,...]`: MISO's workload over the bundled curve classes.
pub fn miso_workload(spec: &str) -> Result<cotenant_trace::Workload> {
    let spec = cotenant_trace::miso_workload::MisoSpec::parse(spec)?;
    Ok(cotenant_trace::miso_workload::generate_miso(&spec, &bundled_slice_curves()?)?)
}
