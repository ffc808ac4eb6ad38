//! Elastic jobs: a job that may run on any GPU count in `[min, max]` (EDL).
//!
//! `JobSpec::gpus` stays the job's reference size: the count at which it runs at
//! its reference speed (rate 1.0) and the count rigid policies start it with. An
//! elastic job may also start with any count in its range, and a running one may
//! be resized with [`crate::Action::Resize`]: the engine checks the new count
//! against the range, the added GPUs against the cluster and the tenant's limit,
//! and tells the world with [`crate::Command::Resize`], which charges the
//! scaling pause (stop-free scale-out, graceful scale-in or stop-resume).

/// The GPU counts an elastic job accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Elastic {
    pub min: u32,
    pub max: u32,
}

/// An elastic range that cannot hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ElasticError {
    #[error("elastic range [{min}, {max}]: min must be at least 1 and at most max")]
    Empty { min: u32, max: u32 },
    #[error("elastic range [{min}, {max}] does not contain the job's {gpus} requested GPUs")]
    ExcludesRequest { min: u32, max: u32, gpus: u32 },
}

impl Elastic {
    /// The range `[min, max]` for a job that requests `gpus`; it must contain `gpus`.
    pub fn new(min: u32, max: u32, gpus: u32) -> Result<Elastic, ElasticError> {
        if min == 0 || min > max {
            return Err(ElasticError::Empty { min, max });
        }
        if gpus < min || gpus > max {
            return Err(ElasticError::ExcludesRequest { min, max, gpus });
        }
        Ok(Elastic { min, max })
    }

    pub fn allows(&self, gpus: u32) -> bool {
        (self.min..=self.max).contains(&gpus)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_must_hold_the_request() {
        assert_eq!(Elastic::new(1, 8, 4), Ok(Elastic { min: 1, max: 8 }));
        assert_eq!(Elastic::new(0, 8, 4), Err(ElasticError::Empty { min: 0, max: 8 }));
        assert_eq!(Elastic::new(4, 2, 4), Err(ElasticError::Empty { min: 4, max: 2 }));
        assert_eq!(Elastic::new(2, 4, 8), Err(ElasticError::ExcludesRequest { min: 2, max: 4, gpus: 8 }));
        let e = Elastic::new(2, 4, 2).unwrap();
        assert!(e.allows(2) && e.allows(4) && !e.allows(1) && !e.allows(5));
    }
}
