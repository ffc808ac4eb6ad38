//! Stand-in with the contract's public signatures (docs: /work/golden/live-contract.md);
//! the agent helper's module replaces this file at merge.

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use crate::agent_api;

#[derive(Debug)]
pub struct AgentConfig {
    pub server: String,
    pub token: String,
    pub name: String,
    pub gpus: GpuSource,
    pub gpu_type: Option<String>,
    pub state_dir: PathBuf,
    pub poll_wait: Duration,
}

#[derive(Clone, Debug)]
pub enum GpuSource {
    Fake(String),
    Nvml,
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("agent stand-in: not implemented")]
    Unimplemented,
}

pub trait GpuDiscovery {
    fn gpus(&self) -> Result<Vec<agent_api::GpuInfo>, AgentError>;
    fn stats(&self) -> Vec<agent_api::GpuStat>;
}

pub async fn run(
    _config: AgentConfig,
    _shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), AgentError> {
    Err(AgentError::Unimplemented)
}
