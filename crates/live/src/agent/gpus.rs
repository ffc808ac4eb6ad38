//! GPU discovery: NVML (the NVIDIA driver's library, loaded at run time) or a
//! fake set of GPUs from a `COUNTxTYPE` spec.

use std::fmt;

use super::{AgentError, GpuDiscovery};
use crate::agent_api::{normalize_gpu_type, GpuInfo, GpuStat};

/// Most fake GPUs one spec may declare.
const MAX_FAKE_GPUS: u32 = 1024;

/// Memory of a fake GPU when its type names none (`-80GB`) and the table does not know it.
const DEFAULT_FAKE_MEMORY_MIB: u64 = 81920;

/// Memory (MiB, as NVML reports it) of types whose names carry no size.
const KNOWN_MEMORY_MIB: &[(&str, u64)] = &[
    ("H200", 143771),
    ("H100", 81559),
    ("B200", 183359),
    ("A100", 40960),
    ("V100", 16384),
    ("A10", 23028),
    ("A40", 46068),
    ("L4", 23034),
    ("L40S", 46068),
    ("T4", 15360),
    ("P100", 16384),
    ("K80", 11441),
];

/// GPUs that do not exist: `8xA100-80GB` is eight `A100-80GB` with UUIDs
/// `FAKE-<node>-0` .. `FAKE-<node>-7`. No readings.
#[derive(Clone, Debug, PartialEq)]
pub struct FakeGpus {
    gpus: Vec<GpuInfo>,
}

impl FakeGpus {
    pub fn parse(spec: &str, node_name: &str) -> Result<FakeGpus, AgentError> {
        let bad = |reason: &str| AgentError::FakeGpus { spec: spec.to_string(), reason: reason.to_string() };
        let (count, model) =
            spec.trim().split_once(['x', 'X']).ok_or_else(|| bad("no 'x' between the count and the type"))?;
        let count: u32 = count
            .trim()
            .parse()
            .map_err(|_| bad(&format!("the count {:?} is not a whole number", count.trim())))?;
        if count == 0 || count > MAX_FAKE_GPUS {
            return Err(bad(&format!("the count must be between 1 and {MAX_FAKE_GPUS}")));
        }
        let model = model.trim();
        if model.is_empty() || !model.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(bad("the type must be a name like A100-80GB (letters, digits, '-')"));
        }
        let memory_mib = fake_memory_mib(model);
        let gpus = (0..count)
            .map(|index| GpuInfo {
                uuid: format!("FAKE-{node_name}-{index}"),
                model: model.to_string(),
                memory_mib,
                index,
            })
            .collect();
        Ok(FakeGpus { gpus })
    }
}

/// `A100-80GB` -> 80 GiB; else the table; else the default.
fn fake_memory_mib(model: &str) -> u64 {
    let name = normalize_gpu_type(model).to_ascii_uppercase();
    let sized =
        name.rsplit('-').next().and_then(|last| last.strip_suffix("GB")).and_then(|n| n.parse::<u64>().ok());
    if let Some(gib) = sized.filter(|gib| *gib > 0 && *gib <= 4096) {
        return gib * 1024;
    }
    let family = name.split('-').next().unwrap_or_default();
    KNOWN_MEMORY_MIB
        .iter()
        .find(|(known, _)| *known == family)
        .map_or(DEFAULT_FAKE_MEMORY_MIB, |(_, mib)| *mib)
}

impl GpuDiscovery for FakeGpus {
    fn gpus(&self) -> Result<Vec<GpuInfo>, AgentError> {
        Ok(self.gpus.clone())
    }

    fn stats(&self) -> Vec<GpuStat> {
        Vec::new()
    }
}

/// The NVIDIA management library. `init` fails with [`AgentError::Nvml`] where
/// the library or the driver is missing.
pub struct Nvml {
    nvml: nvml_wrapper::Nvml,
}

impl fmt::Debug for Nvml {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Nvml").finish_non_exhaustive()
    }
}

const MIB: u64 = 1024 * 1024;

impl Nvml {
    pub fn init() -> Result<Nvml, AgentError> {
        // nvml-wrapper loads libnvidia-ml with dlopen; a missing library or driver is an error value.
        let nvml = nvml_wrapper::Nvml::init().map_err(|error| AgentError::Nvml(error.to_string()))?;
        Ok(Nvml { nvml })
    }

    fn nvml_error(what: &str, error: nvml_wrapper::error::NvmlError) -> AgentError {
        AgentError::Nvml(format!("{what}: {error}"))
    }
}

impl GpuDiscovery for Nvml {
    fn gpus(&self) -> Result<Vec<GpuInfo>, AgentError> {
        let count = self.nvml.device_count().map_err(|e| Nvml::nvml_error("counting devices", e))?;
        let mut gpus = Vec::with_capacity(count as usize);
        for index in 0..count {
            let what = |field: &str| format!("device {index}: {field}");
            let device = self.nvml.device_by_index(index).map_err(|e| Nvml::nvml_error(&what("open"), e))?;
            gpus.push(GpuInfo {
                uuid: device.uuid().map_err(|e| Nvml::nvml_error(&what("uuid"), e))?,
                model: device.name().map_err(|e| Nvml::nvml_error(&what("name"), e))?,
                memory_mib: device.memory_info().map_err(|e| Nvml::nvml_error(&what("memory"), e))?.total
                    / MIB,
                index: device.index().unwrap_or(index),
            });
        }
        Ok(gpus)
    }

    fn stats(&self) -> Vec<GpuStat> {
        let count = self.nvml.device_count().unwrap_or(0);
        (0..count)
            .filter_map(|index| {
                let device = self.nvml.device_by_index(index).ok()?;
                Some(GpuStat {
                    uuid: device.uuid().ok()?,
                    utilization_pct: device.utilization_rates().map_or(0, |u| u.gpu),
                    memory_used_mib: device.memory_info().map_or(0, |m| m.used / MIB),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_memory_comes_from_the_name_then_the_table_then_the_default() {
        assert_eq!(fake_memory_mib("A100-80GB"), 81920);
        assert_eq!(fake_memory_mib("V100-32GB"), 32768);
        assert_eq!(fake_memory_mib("H200"), 143771);
        assert_eq!(fake_memory_mib("t4"), 15360);
        assert_eq!(fake_memory_mib("MI300X"), DEFAULT_FAKE_MEMORY_MIB);
    }
}
