//! The JIT verdict of a component whose kernels are compiled at run time: `ok` for the target
//! archs only when its JIT proof compiled real kernels whose images run there (by the run
//! rules); `blocked` when the proof could not run here (no toolkit), `broken` when it failed,
//! `wrong-arch` when it compiled for something else. It deliberately ignores how the proof ran
//! (`probe::jit`, `session`) and never touches the disk.

use crate::probe::binaries::runs_on;
use crate::probe::jit::JitOutcome;
use crate::recipe::Recipe;

use super::status::{Evidence, Status};

/// How a JIT verdict that could not run begins: such a component is installed and imports, so
/// an install still goes ahead and says afterwards that it is not proven.
pub const NOT_PROVEN: &str = "JIT not proven";

/// `None` when there is nothing to say: no `[verify] jit`, no target arch, or no proof ran
/// (the component is missing or does not import, which other checks report).
pub fn verdict(r: &Recipe, ev: &Evidence) -> Option<(Status, String)> {
    let jit = r.jit.as_ref()?;
    if ev.archs.is_empty() {
        return None;
    }
    let proof = match ev.jit.get(&r.name)? {
        JitOutcome::Blocked { reason } => {
            return Some((Status::Blocked, format!("{NOT_PROVEN}: {reason}")));
        }
        JitOutcome::Ran(p) if !p.ok => {
            return Some((
                Status::Broken,
                format!("JIT proof {} failed: {}", jit.path, p.error.as_deref().unwrap_or("?")),
            ));
        }
        JitOutcome::Ran(p) => p,
    };
    let driver = ev.machine.driver_cuda.as_ref().map(|d| &d.value);
    // Each target arch needs a kernel with an image that loads there (a script may compile one
    // binary for all archs, or one per arch); the evidence names the image that would load.
    let mut proven = Vec::new();
    for &arch in ev.archs {
        let mut here = Vec::new();
        for k in &proof.kernels {
            let loads: Vec<String> = k
                .files
                .iter()
                .map(|f| runs_on(f, arch, driver))
                .filter(|v| v.usable)
                .flat_map(|v| v.images)
                .collect();
            if !loads.is_empty() {
                here.push(format!("{} → {} ({:.1} s)", k.kernel, loads.join(" "), k.seconds));
            }
        }
        if here.is_empty() {
            let held: Vec<String> = proof
                .kernels
                .iter()
                .flat_map(|k| k.files.iter().flat_map(|f| f.sass.iter().chain(&f.ptx).cloned()))
                .collect();
            let held = if held.is_empty() {
                "nothing".to_string()
            } else {
                held.join(" ")
            };
            return Some((
                Status::WrongArch,
                format!("JIT proof {} compiled {held}: no image for {arch}", jit.path),
            ));
        }
        // Compiled and read back is what this node can prove; that the kernels run takes a GPU
        // of the arch.
        let untried = if ev.machine.gpus.iter().any(|g| g.arch == arch) {
            ""
        } else {
            " (not run: no GPU of this arch here)"
        };
        proven.push(format!("for {arch}: {}{untried}", here.join(", ")));
    }
    Some((
        Status::Ok,
        format!("JIT proof {} compiled {}", jit.path, proven.join("; ")),
    ))
}
