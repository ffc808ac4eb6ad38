//! Small copyable identifiers. Each indexes a table owned by the engine or the cluster.

use std::fmt;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub u32);

        impl $name {
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

id_type!(
    /// A job. Ids are handed out in submission order, so ordering by id is FIFO order.
    JobId,
    "job"
);
id_type!(
    /// A tenant (a virtual cluster, team or account): an index into the tenant table.
    TenantId,
    "tenant"
);
id_type!(
    /// A node (server) of the cluster.
    NodeId,
    "node"
);
id_type!(
    /// One GPU, numbered across the whole cluster; a node's GPUs are contiguous.
    GpuId,
    "gpu"
);
id_type!(
    /// A GPU model (V100, K80, H100...): an index into the cluster's GPU type table.
    GpuTypeId,
    "gputype"
);
