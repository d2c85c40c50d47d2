//! The words of the typed reasons: the sentences kiln printed before reasons were typed, and
//! the two texts `resolve` still writes for the wheel decision, held equal to the rendering.

use super::*;
use crate::arch::Arch;
use crate::probe::machine::Sourced;
use crate::resolve::driver::{self, Runtime};
use crate::resolve::kernels;
use crate::resolve::reason::Ran;
use crate::resolve::reason::status_of;
use crate::resolve::{Reason, Status};

use crate::fatbin::test_sass as sass;

fn a(s: &str) -> Arch {
    s.parse().unwrap()
}

#[test]
fn the_binaries_verdict_reads_as_the_wheel_decision_writes_it() {
    let (core, fa3, qutlass) = (sass(120, 0x20_0000), sass(90, 0x10_0000), sass(100, 0x10_0000));
    let files = vec![
        ("vllm/_C.abi3.so".to_string(), &core),
        ("vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so".to_string(), &fa3),
        ("vllm/_qutlass_C.abi3.so".to_string(), &qutlass),
    ];
    let optional = crate::recipe::binaries::OptionalBinaries {
        files: vec!["vllm/vllm_flash_attn/_vllm_fa3_C*.so".into()],
        matcher: crate::recipe::binaries::glob_set(&["vllm/vllm_flash_attn/_vllm_fa3_C*.so"]).unwrap(),
        arch: vec![a("12.0")],
        versions: None,
        versions_spec: None,
        why: "FA3 is Hopper-only".into(),
        span: None,
    };
    let wrong = kernels::check(&files, &[a("12.0")], None, &rules(&[]));
    assert_eq!(
        text(&wrong.reason()),
        "2 of 3 required CUDA binaries lack a kernel image: \
         vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so for 12.0: no usable image (holds sm_90a; CUDA error 209, no kernel image); \
         vllm/_qutlass_C.abi3.so for 12.0: no usable image (holds sm_100a; CUDA error 209, no kernel image)"
    );
    assert_eq!(wrong.reason().status(), Status::WrongArch);
    let mut cases = vec![
        wrong,
        kernels::check(
            &files,
            &[a("12.0"), a("9.0")],
            None,
            &rules(std::slice::from_ref(&optional)),
        ),
        kernels::check(&files[..2], &[a("12.0")], None, &rules(std::slice::from_ref(&optional))),
        kernels::check(&files[..1], &[a("12.0")], None, &rules(&[])),
    ];
    cases[3].unreadable = vec!["x.so: truncated".into()];
    for c in &cases {
        assert_eq!(text(&c.reason()), c.evidence(), "{c:?}");
    }
    assert_eq!(cases[2].reason().status(), Status::Ok);
}

#[test]
fn a_long_list_of_binaries_without_an_image_names_a_few_and_counts_the_rest() {
    // flashinfer-cubin 0.6.8.post1: 10560 SM100-family cubins, none for 9.0, all optional; its
    // verdict was one 4.8 MB line on the H200 (docs/gpu-proof.md §16).
    let cubin = sass(100, 0x10_0000);
    let files: Vec<(String, &_)> = (0..12)
        .map(|i| (format!("flashinfer_cubin/cubins/k{i:02}.cubin"), &cubin))
        .collect();
    let optional = crate::recipe::binaries::OptionalBinaries {
        files: vec!["flashinfer_cubin/cubins/**".into()],
        matcher: crate::recipe::binaries::glob_set(&["flashinfer_cubin/cubins/**"]).unwrap(),
        arch: vec![a("9.0")],
        versions: None,
        versions_spec: None,
        why: "SM100 family only".into(),
        span: None,
    };
    let c = kernels::check(&files, &[a("9.0")], None, &rules(std::slice::from_ref(&optional)));
    let said = text(&c.reason());
    assert_eq!(said, c.evidence());
    assert!(
        said.contains("k00.cubin for 9.0") && said.contains("k04.cubin for 9.0"),
        "{said}"
    );
    assert!(!said.contains("k05.cubin"), "{said}");
    assert!(said.ends_with("; and 7 more (`--json` names each)"), "{said}");
    let Reason::ImagesHeld { optional, .. } = c.reason() else {
        panic!("{:?}", c.reason())
    };
    assert_eq!(optional.len(), 12, "the data keeps every binary");
}

#[test]
fn the_driver_verdict_reads_as_the_wheel_decision_writes_it() {
    let driver = |v: &str| Sourced {
        value: semver::Version::parse(v).unwrap(),
        source: "KILN_DRIVER_CUDA".into(),
    };
    let cu132 = Runtime::from_label("2.15.0+cu132").unwrap();
    for d in ["12.8.0", "13.0.0", "13.2.0"] {
        let typed = driver::verdict("torch 2.15.0+cu132", &cu132, &driver(d)).map(|r| text(&r));
        let words = match driver::judge("torch 2.15.0+cu132", &cu132, &driver(d)) {
            Err(why) => Some(why),
            Ok(note) => note,
        };
        assert_eq!(typed, words, "driver {d}");
    }
    let refused = driver::verdict("torch 2.15.0+cu132", &cu132, &driver("12.8.0")).unwrap();
    assert!(
        text(&refused).starts_with(
            "torch 2.15.0+cu132 is built for CUDA 13.2 (the version label +cu132); the driver supports CUDA 12.8 (KILN_DRIVER_CUDA)"
        ),
        "{}",
        text(&refused)
    );
}

#[test]
fn the_driver_library_reason_names_the_binaries() {
    let why = Reason::NeedsDriver {
        binaries: vec!["sgl_kernel/sm100/common_ops.abi3.so".into()],
        library: "libcuda.so.1",
    };
    assert!(
        text(&why)
            .starts_with("its import needs the NVIDIA driver: sgl_kernel/sm100/common_ops.abi3.so links libcuda.so.1"),
        "{}",
        text(&why)
    );
    let many = Reason::NeedsDriver {
        binaries: (0..5).map(|i| format!("m/{i}.so")).collect(),
        library: "libcuda.so.1",
    };
    assert!(
        text(&many)
            .starts_with("its import needs the NVIDIA driver: m/0.so, m/1.so, m/2.so and 2 more link libcuda.so.1")
    );
}

fn imports_ran() -> Reason {
    Reason::ImportsRan {
        dist: "sgl-kernel".into(),
        version: "0.3.21".into(),
        imports: vec![Ran {
            module: "sgl_kernel".into(),
            seconds: 0.5,
        }],
    }
}

fn held() -> Reason {
    Reason::ImagesHeld {
        archs: vec![a("12.0")],
        checked: 2,
        required: 2,
        by_need: 0,
        optional: Vec::new(),
        unavailable: Vec::new(),
        unreadable: Vec::new(),
    }
}

#[test]
fn evidence_tells_what_falls_short_most_severe_first_and_else_what_proves_it() {
    let ok = [imports_ran(), held()];
    assert_eq!(status_of(&ok), Status::Ok);
    assert_eq!(
        evidence(&ok),
        "sgl-kernel 0.3.21; imports ran: sgl_kernel (0.50 s); every required CUDA binary holds kernels for 12.0 (2 checked)"
    );
    let outdated = Reason::VersionNotAccepted {
        component: "sglang-kernel".into(),
        have: "0.3.21".into(),
        accepts: ">=0.4".into(),
        by: Some("sglang".into()),
    };
    let stale = Reason::BuiltAgainst {
        dep: "torch".into(),
        old: "torch 2.9.0".into(),
        now: None,
    };
    let reasons = [imports_ran(), held(), stale, outdated.clone()];
    assert_eq!(status_of(&reasons), Status::Stale);
    // Every failing reason is kept and told, the most severe first.
    assert_eq!(
        evidence(&reasons),
        "built against torch 2.9.0, now torch not installed; have 0.3.21, sglang needs sglang-kernel >=0.4"
    );
    // Installed under another name: what its binaries hold is told whatever the status, once.
    let other = crate::resolve::owners::OtherDist {
        dist: "sgl-kernel".into(),
        version: "0.3.21".into(),
        via: crate::resolve::owners::Via::FormerName,
        accepted: false,
    };
    let installed_as = Reason::InstalledAs {
        component: "sglang-kernel".into(),
        other,
        accepts: ">=0.4".into(),
    };
    let head = "installed as sgl-kernel 0.3.21 (sglang-kernel's former distribution name), a version the recipe \
                does not accept (>=0.4)";
    assert_eq!(
        evidence(&[installed_as.clone(), imports_ran(), held(), outdated]),
        format!(
            "{head}; every required CUDA binary holds kernels for 12.0 (2 checked); have 0.3.21, sglang needs sglang-kernel >=0.4"
        )
    );
    assert_eq!(
        evidence(&[installed_as, imports_ran(), held()]),
        format!(
            "{head}; sgl-kernel 0.3.21; imports ran: sgl_kernel (0.50 s); every required CUDA binary holds kernels for 12.0 (2 checked)"
        )
    );
}

#[test]
fn a_step_blocked_by_a_dependency_names_the_root_cause() {
    let root = vec![Reason::Assessed {
        reasons: vec![Reason::NoToolkit {
            searched: vec!["CUDA_HOME unset".into()],
            want: Some(">=12.8".into()),
        }],
    }];
    let own = Reason::NeedsBlocked {
        dep: "cuda-toolkit".into(),
        root: "cuda-toolkit".into(),
        why: root,
    };
    assert_eq!(
        step(&[own]),
        "needs cuda-toolkit: no CUDA toolkit found (CUDA_HOME unset); install CUDA >=12.8 and set CUDA_HOME (kiln does not install it)"
    );
    let through = Reason::NeedsBlocked {
        dep: "sglang-kernel".into(),
        root: "cuda-toolkit".into(),
        why: Vec::new(),
    };
    assert_eq!(
        step(&[through]),
        "needs sglang-kernel, which is blocked by cuda-toolkit"
    );
}

/// The per-binary rules with only `optional` entries.
fn rules(optional: &[crate::recipe::binaries::OptionalBinaries]) -> kernels::Rules<'_> {
    kernels::Rules {
        optional,
        version: None,
        served: Vec::new(),
    }
}
