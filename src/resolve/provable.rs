//! Whether a component's proof can run on this machine at all. kiln installs nothing it cannot
//! prove, and the proof of a Python component is importing it; an extension module that links
//! the NVIDIA driver's library (`libcuda.so.1`, read from its `DT_NEEDED` entries by
//! `probe::needed`) cannot even load where no NVIDIA driver is installed. Such a component is
//! `blocked` at plan time, naming the binaries and what was looked for, instead of being
//! installed, failing its import and being rolled back (a source build would link the same).
//!
//! It deliberately ignores which binaries the imports load (any one that links the driver may
//! be loaded by them: sgl_kernel's `__init__` loads `sm100/common_ops`, which does) and a
//! driver of the wrong version (that is [`super::driver`]).

use super::reason::Reason;
use crate::probe::MachineFacts;

/// Why the binaries `links_driver` (paths inside the wheel) cannot be proven here
/// ([`Reason::NeedsDriver`], naming them all), or `None` when they can (no such binary, or an
/// NVIDIA driver is present).
pub fn driver_needed(links_driver: &[String], machine: &MachineFacts) -> Option<Reason> {
    if links_driver.is_empty() || machine.driver.is_some() || machine.driver_cuda.is_some() {
        return None;
    }
    Some(Reason::NeedsDriver {
        binaries: links_driver.to_vec(),
        library: crate::probe::needed::DRIVER_LIBRARY,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::machine::Sourced;

    #[test]
    fn only_a_binary_that_links_the_driver_on_a_machine_without_one_is_unprovable() {
        let mut m = MachineFacts {
            gpus: Vec::new(),
            gpu_source: "none".into(),
            driver: None,
            driver_cuda: None,
            host_compiler: None,
            cuda_toolkit: None,
            cuda_searched: Vec::new(),
            cpus: 2,
            memory_available: None,
        };
        let linked = vec!["sgl_kernel/sm100/common_ops.abi3.so".to_string()];
        assert_eq!(driver_needed(&[], &m), None);
        let why = driver_needed(&linked, &m).unwrap();
        assert_eq!(
            why,
            Reason::NeedsDriver {
                binaries: linked.clone(),
                library: "libcuda.so.1"
            }
        );
        m.driver = Some(Sourced {
            value: "580.95".into(),
            source: "nvidia-smi".into(),
        });
        assert_eq!(driver_needed(&linked, &m), None);
    }
}
