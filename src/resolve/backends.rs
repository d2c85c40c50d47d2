//! Backend verdicts: for each runtime backend a consumer declares (SGLang's
//! `--moe-runner-backend`, vLLM's `--moe-backend`), does it work on the target arch here?
//!
//! Order of the checks: an arch the backend's kernels cannot run on makes it `unsupported` (say
//! *no* early, with the reason and its source); a toolkit it needs and kiln does not install makes
//! it `blocked`, with the fix; a component it needs that is not `ok` makes it `missing`, naming
//! what `kiln install` would add; otherwise `ok`. It deliberately does not run the backend.

use std::collections::BTreeMap;

use serde::Serialize;

use super::status::{Assessment, Status};
use crate::arch::Arch;
use crate::probe::MachineFacts;
use crate::recipe::RecipeSet;

/// The verdict for one backend value.
#[derive(Debug, Clone, Serialize)]
pub struct BackendVerdict {
    pub component: String,
    pub flag: String,
    pub value: String,
    pub status: Status,
    pub why: String,
}

/// Verdicts for the backends of every consumer in `scope`, for every arch in `archs`.
pub fn verdicts(
    set: &RecipeSet,
    machine: &MachineFacts,
    assessments: &[Assessment],
    scope: &[(String, Vec<String>)],
    archs: &[Arch],
) -> Vec<BackendVerdict> {
    let by_name: BTreeMap<&str, &Assessment> = assessments.iter().map(|a| (a.name.as_str(), a)).collect();
    let mut out = Vec::new();
    for (name, _) in scope {
        let Some(r) = set.get(name) else { continue };
        for b in &r.backends {
            let verdict = |status, why: String| BackendVerdict {
                component: r.name.clone(),
                flag: b.flag.clone(),
                value: b.value.clone(),
                status,
                why,
            };
            if archs.is_empty() {
                out.push(verdict(
                    Status::Blocked,
                    "no target arch: no GPU found and no --arch given".into(),
                ));
                continue;
            }
            if let Some(allowed) = &b.arch
                && let Some(bad) = archs.iter().find(|a| !allowed.contains(a))
            {
                let list: Vec<String> = allowed.iter().map(|a| a.to_string()).collect();
                let on = if list.is_empty() {
                    "no NVIDIA GPU".to_string()
                } else {
                    list.join(", ")
                };
                out.push(verdict(
                    Status::Unsupported,
                    format!("not on {bad} (runs on {on}): {}", b.why),
                ));
                continue;
            }
            if let Some(req) = &b.cuda_req {
                let fix = match &machine.cuda_toolkit {
                    None => Some(format!(
                        "needs a CUDA toolkit {req}, none found; install one and set CUDA_HOME"
                    )),
                    Some(tk) if !req.matches(&tk.version) => Some(format!(
                        "needs CUDA {req}, the toolkit is {}; install a newer one",
                        tk.version
                    )),
                    _ => None,
                };
                if let Some(fix) = fix {
                    out.push(verdict(Status::Blocked, format!("{fix} ({})", b.why)));
                    continue;
                }
            }
            let mut pieces: Vec<(String, Vec<String>)> = vec![(r.name.clone(), Vec::new())];
            pieces.extend(b.needs.iter().cloned());
            let mut missing = Vec::new();
            for (need, feats) in &pieces {
                let label = if feats.is_empty() {
                    need.clone()
                } else {
                    format!("{need}[{}]", feats.join(","))
                };
                match by_name.get(need.as_str()) {
                    Some(a) if a.status == Status::Ok => {
                        let bad_feature = feats
                            .iter()
                            .any(|f| a.features.iter().any(|x| &x.name == f && x.status != Status::Ok));
                        if bad_feature {
                            missing.push(format!("{label} (feature imports fail)"));
                        }
                    }
                    Some(a) => missing.push(format!("{label} ({})", a.status.as_str())),
                    None => missing.push(format!("{label} (not assessed)")),
                }
            }
            if missing.is_empty() {
                out.push(verdict(Status::Ok, format!("all it needs is ok; {}", b.why)));
            } else {
                let add: Vec<String> = missing
                    .iter()
                    .map(|m| m.split(' ').next().unwrap_or("").to_string())
                    .collect();
                out.push(verdict(
                    Status::Missing,
                    format!(
                        "needs {}; `kiln install {}` would add it",
                        missing.join(", "),
                        add.join(" ")
                    ),
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::machine::{MachineFacts, Toolkit};

    fn assessed(name: &str, status: Status) -> Assessment {
        Assessment {
            name: name.into(),
            status,
            version: None,
            evidence: String::new(),
            want: None,
            location: None,
            imports: Vec::new(),
            features: Vec::new(),
            installed_as: None,
            sharing: Vec::new(),
            unavailable: Vec::new(),
        }
    }

    fn machine(cuda: Option<(u64, u64)>) -> MachineFacts {
        MachineFacts {
            gpus: Vec::new(),
            gpu_source: "test".into(),
            driver: None,
            driver_cuda: None,
            host_compiler: None,
            cuda_toolkit: cuda.map(|(a, b)| Toolkit {
                version: semver::Version::new(a, b, 0),
                nvcc: None,
                home: None,
                source: "test".into(),
            }),
            cuda_searched: Vec::new(),
            cpus: 2,
            memory_available: None,
        }
    }

    fn verdict_of<'a>(v: &'a [BackendVerdict], component: &str, value: &str) -> &'a BackendVerdict {
        v.iter().find(|b| b.component == component && b.value == value).unwrap()
    }

    #[test]
    fn sglang_moe_backends_on_sm120_with_the_real_recipes() {
        let set = RecipeSet::embedded().unwrap();
        let all_ok: Vec<Assessment> = set.recipes.keys().map(|n| assessed(n, Status::Ok)).collect();
        let scope = set.closure(&[("sglang".into(), vec![]), ("vllm".into(), vec![])]);
        let sm120 = [Arch { major: 12, minor: 0 }];
        let v = verdicts(&set, &machine(Some((13, 0))), &all_ok, &scope, &sm120);
        let cutedsl = verdict_of(&v, "sglang", "flashinfer_cutedsl");
        assert_eq!(cutedsl.status, Status::Unsupported);
        assert!(cutedsl.why.contains("grouped_gemm_nt_masked"), "{}", cutedsl.why);
        assert!(cutedsl.why.starts_with("not on 12.0 (runs on 10.0, 10.3, 10.7)"));
        assert_eq!(verdict_of(&v, "sglang", "flashinfer_cutlass").status, Status::Ok);
        assert_eq!(verdict_of(&v, "sglang", "marlin").status, Status::Ok);
        assert_eq!(verdict_of(&v, "sglang", "deep_gemm").status, Status::Unsupported);
        assert_eq!(
            verdict_of(&v, "sglang", "flashinfer_trtllm").status,
            Status::Unsupported
        );
        assert_eq!(verdict_of(&v, "vllm", "flashinfer_b12x").status, Status::Ok);
        assert_eq!(verdict_of(&v, "vllm", "flashinfer_cutedsl").status, Status::Unsupported);

        // b12x needs CUDA 13: with a 12.9 toolkit it is blocked, with the fix.
        let v = verdicts(&set, &machine(Some((12, 9))), &all_ok, &scope, &sm120);
        let b12x = verdict_of(&v, "vllm", "flashinfer_b12x");
        assert_eq!(b12x.status, Status::Blocked);
        assert!(
            b12x.why.starts_with("needs CUDA >=13, the toolkit is 12.9.0"),
            "{}",
            b12x.why
        );

        // A missing piece is named with what `kiln install` would add.
        let mut some_missing = all_ok.clone();
        some_missing.iter_mut().find(|a| a.name == "flashinfer").unwrap().status = Status::Missing;
        let v = verdicts(&set, &machine(Some((13, 0))), &some_missing, &scope, &sm120);
        let cutlass = verdict_of(&v, "sglang", "flashinfer_cutlass");
        assert_eq!(cutlass.status, Status::Missing);
        assert_eq!(
            cutlass.why,
            "needs flashinfer (missing); `kiln install flashinfer` would add it"
        );

        // On SM100 the CuTe DSL backend is fine.
        let sm100 = [Arch { major: 10, minor: 0 }];
        let v = verdicts(&set, &machine(Some((13, 0))), &all_ok, &scope, &sm100);
        assert_eq!(verdict_of(&v, "sglang", "flashinfer_cutedsl").status, Status::Ok);
    }
}
