//! Words for a toolkit that lacks parts a build uses (`resolve::toolkit_parts`): each part with
//! where kiln looked, what it found and the upstream file that needs it, then the way out.
//!
//! It deliberately ignores how the lacks were found; it only renders them.

use crate::recipe::toolkit::ToolkitPart;
use crate::resolve::toolkit_parts::ToolkitLack;

pub fn lacks(home: &str, lacks: &[ToolkitLack]) -> String {
    let each: Vec<String> = lacks
        .iter()
        .map(|l| {
            let what = match (l.part, &l.found) {
                (_, Some(found)) => found.clone(),
                (ToolkitPart::LibraryHeaders, None) => format!("no {}", l.looked.join(", ")),
                (ToolkitPart::Lib64, None) => format!("no directory {}", l.looked.join("")),
                (_, None) => format!("none of {}", l.looked.join(", ")),
            };
            format!(
                "{} ({what}; needed by {}; from: {})",
                l.part,
                l.needed_by,
                l.part.supplied_by()
            )
        })
        .collect();
    format!(
        "cannot build: the CUDA toolkit at {home} lacks {}; point CUDA_HOME at a complete CUDA toolkit of \
         nvcc's version (NVIDIA's installer or distribution packages), or add those parts to it as said",
        each.join("; ")
    )
}
