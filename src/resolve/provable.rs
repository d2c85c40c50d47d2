//! Whether a component's proof can run on this machine at all. kiln installs nothing it cannot
//! prove, and the proof of a Python component is importing it; an extension module that links
//! the NVIDIA driver's library (`libcuda.so.1`, read from its `DT_NEEDED` entries by
//! `probe::needed`) cannot even load where no NVIDIA driver is installed. Such a component is
//! `blocked` at plan time, naming the binaries and what was looked for, instead of being
//! installed, failing its import and being rolled back (a source build would link the same).
//!
//! The same holds for the system libraries a binary links that neither the wheel nor Python
//! packages provide ([`SYSTEM_LIBRARIES`]: `libnuma.so.1` from Debian's `libnuma1`, which
//! sglang-kernel's wheels link): where the machine's loader cannot find one (`ldconfig -p`, this
//! machine's or the node's facts), the step is `blocked`, naming the library and the package.
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

/// Libraries the system provides (never a wheel), with the Debian package that does. CUDA's own
/// libraries are not here: NVIDIA's wheels (`nvidia-cuda-runtime`, ...) provide them.
pub const SYSTEM_LIBRARIES: &[(&str, &str)] = &[
    ("libnuma.so.1", "libnuma1"),
    ("libibverbs.so.1", "libibverbs1"),
    ("librdmacm.so.1", "librdmacm1"),
    ("libmlx5.so.1", "ibverbs-providers"),
    ("libgomp.so.1", "libgomp1"),
    ("libatomic.so.1", "libatomic1"),
];

/// The system libraries `needed` (RECORD path -> `DT_NEEDED`) names that the wheel does not ship
/// (`provides`, file names) and the machine's loader does not find (`libraries`; `None`: not
/// known, so nothing is judged), each as [`Reason::NeedsSystemLibrary`].
pub fn system_needed(
    needed: &std::collections::BTreeMap<String, Vec<String>>,
    provides: &[String],
    libraries: Option<&[String]>,
) -> Vec<Reason> {
    let Some(libraries) = libraries else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (library, package) in SYSTEM_LIBRARIES {
        if provides.iter().any(|p| p == library) || libraries.iter().any(|l| l == library) {
            continue;
        }
        let binaries: Vec<String> = needed
            .iter()
            .filter(|(_, libs)| libs.iter().any(|l| l == library))
            .map(|(path, _)| path.clone())
            .collect();
        if !binaries.is_empty() {
            out.push(Reason::NeedsSystemLibrary {
                library: (*library).to_string(),
                package: (*package).to_string(),
                binaries,
            });
        }
    }
    out
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

    #[test]
    fn a_system_library_the_loader_cannot_find_is_named_with_its_package() {
        let needed = std::collections::BTreeMap::from([
            (
                "sgl_kernel/common_ops.abi3.so".to_string(),
                vec!["libnuma.so.1".to_string(), "libc.so.6".to_string()],
            ),
            (
                "sgl_kernel/flash_ops.abi3.so".to_string(),
                vec!["libc.so.6".to_string()],
            ),
        ]);
        let here = vec!["libc.so.6".to_string()];
        assert_eq!(
            system_needed(&needed, &[], None),
            Vec::new(),
            "unknown libraries judge nothing"
        );
        assert_eq!(
            system_needed(&needed, &[], Some(&here)),
            vec![Reason::NeedsSystemLibrary {
                library: "libnuma.so.1".into(),
                package: "libnuma1".into(),
                binaries: vec!["sgl_kernel/common_ops.abi3.so".into()],
            }]
        );
        let with_numa = vec!["libc.so.6".to_string(), "libnuma.so.1".to_string()];
        assert_eq!(system_needed(&needed, &[], Some(&with_numa)), Vec::new());
        assert_eq!(
            system_needed(&needed, &["libnuma.so.1".into()], Some(&here)),
            Vec::new(),
            "shipped in the wheel"
        );
    }
}
