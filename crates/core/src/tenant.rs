//! Tenants: who owns jobs, with a fair-share weight and GPU quotas.

/// A tenant of the cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct TenantSpec {
    pub name: String,
    /// Relative fair-share weight (> 0).
    pub weight: f64,
    /// Nominal GPU quota (guaranteed share), if the operator set one. Informational
    /// for policies that ignore quotas; quota-aware policies and metrics read it.
    pub gpu_quota: Option<u32>,
    /// Hard cap on GPUs this tenant may hold at once. The engine enforces it.
    pub gpu_limit: Option<u32>,
}

impl TenantSpec {
    pub fn new(name: impl Into<String>) -> TenantSpec {
        TenantSpec { name: name.into(), weight: 1.0, gpu_quota: None, gpu_limit: None }
    }
}
