//! The JIT verdict of a component whose kernels are compiled at run time: `ok` for the target
//! archs only when its JIT proof compiled real kernels whose images run there (by the run
//! rules); `blocked` when the proof could not run here (no toolkit), `broken` when it failed,
//! `wrong-arch` when it compiled for something else. It deliberately ignores how the proof ran
//! (`probe::jit`, `session`) and never touches the disk.

use crate::probe::binaries::runs_on;
use crate::probe::jit::JitOutcome;
use crate::recipe::Recipe;

use super::reason::{JitArch, JitKernel, Reason};
use super::status::Evidence;

/// `None` when there is nothing to say: no `[verify] jit`, no target arch, or no proof ran
/// (the component is missing or does not import, which other checks report). Otherwise one
/// reason: [`Reason::JitProven`] (`ok`), [`Reason::JitNotProven`] (`blocked`: the proof could not
/// run; such a component is installed and imports, so an install still goes ahead and says
/// afterwards that it is not proven), [`Reason::JitFailed`] (`broken`) or
/// [`Reason::JitWrongArch`] (`wrong-arch`, naming the first target arch without an image).
pub fn verdict(r: &Recipe, ev: &Evidence) -> Option<Reason> {
    let jit = r.jit.as_ref()?;
    if ev.archs.is_empty() {
        return None;
    }
    let script = jit.path.clone();
    let proof = match ev.jit.get(&r.name)? {
        JitOutcome::Blocked { reason } => return Some(Reason::JitNotProven { why: reason.clone() }),
        JitOutcome::Ran(p) if !p.ok => {
            return Some(Reason::JitFailed {
                script,
                error: p.error.clone(),
            });
        }
        JitOutcome::Ran(p) => p,
    };
    let driver = ev.machine.driver_cuda.as_ref().map(|d| &d.value);
    // Each target arch needs a kernel with an image that loads there (a script may compile one
    // binary for all archs, or one per arch); the reason names the images that would load.
    let mut proven = Vec::new();
    for &arch in ev.archs {
        let mut kernels = Vec::new();
        for k in &proof.kernels {
            let images: Vec<String> = k
                .files
                .iter()
                .map(|f| runs_on(f, arch, driver))
                .filter(|v| v.usable)
                .flat_map(|v| v.images)
                .collect();
            if !images.is_empty() {
                kernels.push(JitKernel {
                    kernel: k.kernel.clone(),
                    images,
                    seconds: k.seconds,
                });
            }
        }
        if kernels.is_empty() {
            let held: Vec<String> = proof
                .kernels
                .iter()
                .flat_map(|k| k.files.iter().flat_map(|f| f.sass.iter().chain(&f.ptx).cloned()))
                .collect();
            return Some(Reason::JitWrongArch { script, held, arch });
        }
        // Compiled and read back is what this node can prove; that the kernels run takes a GPU
        // of the arch.
        proven.push(JitArch {
            arch,
            kernels,
            gpu_here: ev.machine.gpus.iter().any(|g| g.arch == arch),
        });
    }
    Some(Reason::JitProven { script, archs: proven })
}
