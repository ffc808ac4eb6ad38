//! Stand-in with the contract's public signatures (docs: /work/golden/live-contract.md);
//! the controller helper's module replaces this file at merge.

use std::path::PathBuf;
use std::time::Duration;

use crate::setup::{Refusal, ServerSetup};
use crate::{agent_api, api, journal};

#[derive(Debug)]
pub struct ControllerConfig {
    pub db: String,
    pub setup: ServerSetup,
    pub heartbeat_timeout: Duration,
    pub log_dir: PathBuf,
}

#[derive(Clone, Debug)]
pub struct Controller {
    _private: (),
}

#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error("controller stand-in: not implemented")]
    Unimplemented,
}

#[derive(Debug)]
pub enum LogRefusal {
    Have(u64),
    Bad(Refusal),
}

impl Controller {
    pub async fn start(_config: ControllerConfig) -> Result<Controller, ControllerError> {
        Err(ControllerError::Unimplemented)
    }
    pub fn db(&self) -> &journal::Db {
        unimplemented!()
    }
    pub fn health(&self) -> api::Health {
        unimplemented!()
    }
    pub fn now_us(&self) -> u64 {
        unimplemented!()
    }
    pub async fn add_tenant(&self, _req: api::TenantRequest) -> Result<api::TenantView, Refusal> {
        unimplemented!()
    }
    pub fn tenants(&self) -> Vec<api::TenantView> {
        unimplemented!()
    }
    pub fn tenant_id(&self, _name: &str) -> Option<u32> {
        unimplemented!()
    }
    pub async fn submit(&self, _tenant: u32, _req: api::SubmitRequest) -> Result<api::JobView, Refusal> {
        unimplemented!()
    }
    pub async fn cancel(&self, _job: u32) -> Result<api::JobView, Refusal> {
        unimplemented!()
    }
    pub fn job(&self, _id: u32) -> Option<(u32, api::JobView)> {
        unimplemented!()
    }
    pub fn job_events(&self, _id: u32) -> Option<Vec<api::JobEvent>> {
        unimplemented!()
    }
    #[allow(clippy::too_many_arguments)]
    pub fn list_jobs(
        &self,
        _tenant: Option<u32>,
        _status: Option<api::JobStatus>,
        _since: u64,
        _until: u64,
        _after: Option<(u64, u32)>,
        _limit: usize,
    ) -> (Vec<api::JobView>, Option<(u64, u32)>) {
        unimplemented!()
    }
    pub fn queue(&self) -> Vec<(u32, api::QueueEntry)> {
        unimplemented!()
    }
    pub fn nodes(&self) -> Vec<api::NodeView> {
        unimplemented!()
    }
    pub fn usage(&self, _since: u64, _until: u64) -> Vec<(u32, api::UsageRow)> {
        unimplemented!()
    }
    pub async fn register(&self, _req: agent_api::Register) -> Result<agent_api::Registered, Refusal> {
        unimplemented!()
    }
    pub async fn desired(&self, _q: agent_api::DesiredQuery) -> Result<agent_api::Desired, Refusal> {
        unimplemented!()
    }
    pub async fn report(&self, _r: agent_api::Report) -> Result<(), Refusal> {
        unimplemented!()
    }
    pub async fn log_chunk(&self, _c: agent_api::LogChunk) -> Result<(), LogRefusal> {
        unimplemented!()
    }
    pub fn log_path(&self, _job: u32, _attempt: u32, _stream: &str) -> PathBuf {
        unimplemented!()
    }
    pub async fn shutdown(&self) {}
}
