//! Whether the CUDA toolkit a build will use holds the parts its recipe names (`[requires]
//! toolkit`): each part the recipe needs is looked up in what the probe read of the toolkit's
//! home, and each one it lacks becomes a typed [`ToolkitLack`] that blocks the build before it
//! starts, with where kiln looked and what it found.
//!
//! It deliberately ignores a toolkit whose home was not read (facts from another node that
//! carry no layout, a version given only by `KILN_CUDA_VERSION`): there is nothing to judge, and
//! the build's own configure says what it lacks.

use serde::Serialize;

use crate::probe::machine::Toolkit;
use crate::probe::toolkit_layout::ToolkitLayout;
use crate::recipe::toolkit::ToolkitPart;

/// One part the toolkit lacks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolkitLack {
    pub part: ToolkitPart,
    /// The paths kiln looked at.
    pub looked: Vec<String>,
    /// What it found instead (the headers' CUDA version against nvcc's, the headers missing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub found: Option<String>,
    /// The upstream file that needs the part.
    pub needed_by: &'static str,
}

/// The plan-time block for a build needing `needs` from `tk`, when the toolkit's layout was read
/// and some part is missing (no layout read: nothing is claimed).
pub fn blocker(needs: &[ToolkitPart], tk: &Toolkit) -> Option<super::reason::Reason> {
    let home = tk.layout.as_ref()?.home.display().to_string();
    let lacks = lacking(needs, tk);
    (!lacks.is_empty()).then_some(super::reason::Reason::BuildNeedsToolkitParts { home, lacks })
}

/// The parts of `needs` the toolkit lacks; empty when it holds them all or was not read.
pub fn lacking(needs: &[ToolkitPart], tk: &Toolkit) -> Vec<ToolkitLack> {
    let Some(layout) = tk.layout.as_ref() else {
        return Vec::new();
    };
    needs.iter().filter_map(|&part| lack(part, layout, tk)).collect()
}

fn lack(part: ToolkitPart, l: &ToolkitLayout, tk: &Toolkit) -> Option<ToolkitLack> {
    let shown = |p: &std::path::Path| p.display().to_string();
    let places = |rel: &str| {
        ToolkitLayout::lib_places(&l.home, rel)
            .iter()
            .map(|p| shown(p))
            .collect()
    };
    let (looked, found) = match part {
        ToolkitPart::Lib64 if !l.lib64 => (vec![shown(&l.home.join("lib64"))], None),
        ToolkitPart::Cudart if l.cudart.is_none() => (places("libcudart.so"), None),
        ToolkitPart::Nvrtc if l.nvrtc.is_none() => (places("libnvrtc.so"), None),
        ToolkitPart::DriverStub if l.driver_stub.is_none() => (places("stubs/libcuda.so"), None),
        ToolkitPart::LibraryHeaders if !l.headers_missing.is_empty() => (
            l.headers_missing
                .iter()
                .map(|h| shown(&l.home.join("include").join(h)))
                .collect(),
            None,
        ),
        ToolkitPart::HeaderVersion => {
            let nvcc = format!("{}.{}", tk.version.major, tk.version.minor);
            if l.header_version.as_deref() == Some(nvcc.as_str()) {
                return None;
            }
            let found = match &l.header_version {
                Some(h) => format!("headers of CUDA {h}, nvcc {nvcc}"),
                None => format!("no CUDA_VERSION in cuda.h, nvcc {nvcc}"),
            };
            (vec![shown(&l.home.join("include/cuda.h"))], Some(found))
        }
        _ => return None,
    };
    Some(ToolkitLack {
        part,
        looked,
        found,
        needed_by: part.needed_by(),
    })
}
