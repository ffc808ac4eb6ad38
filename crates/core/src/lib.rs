//! cotenant-core: time, cluster, tenants and jobs; the scheduling [`Engine`]; the
//! [`Policy`] trait; and the placement kit policies build on.
//!
//! This crate must never do I/O, read a clock or draw OS randomness: time and a
//! seeded random stream are passed in, so that the simulator and a live
//! controller drive the very same engine and a run replays from its inputs.

pub mod cluster;
pub mod elastic;
pub mod engine;
pub mod eval;
pub mod host;
pub mod ids;
pub mod job;
pub mod job_set;
pub mod limits;
pub mod mig;
pub mod placement;
pub mod policy;
pub mod sharing;
pub mod tenant;
pub mod time;
pub mod topology;
mod topology_place;
pub mod variability;

pub use cluster::{Cluster, ClusterError, ClusterSpec, Departure, NodeSpec};
pub use elastic::{Elastic, ElasticError};
pub use engine::{Command, Engine, EngineStats, Input, StopReason, Violation};
pub use eval::{EvalHistory, Evaluation};
pub use host::{HostAlloc, HostResource};
pub use ids::{GpuId, GpuTypeId, JobId, NodeId, TenantId};
pub use job::{CommPattern, EndReason, JobKind, JobProfile, JobSpec, Layout, SpecRef, SpecTable};
pub use job_set::JobSet;
pub use policy::{
    Action, ClusterView, Decision, JobChange, JobState, Phase, Policy, PolicyCx, Progress, RemainingInputs,
    Trigger, WaitReason,
};
pub use sharing::{GpuMemory, Share, ShareRefusal, Sharing, SharingMode};
pub use tenant::TenantSpec;
pub use time::{Span, Time, MICROS_PER_SECOND};
