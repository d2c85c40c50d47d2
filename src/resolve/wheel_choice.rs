//! Wheel or build: whether a prebuilt wheel a recipe offers (`wheels = [...]`) may be installed
//! instead of building the version from source.
//!
//! The wheel is picked by the interpreter's own tag list (best first, as pip picks), then judged
//! on what it holds, read before anything is installed: every required CUDA binary must hold an
//! image that loads on each target arch ([`super::kernels`], the recipe's `[[binaries.optional]]`
//! honoured, and a binary only some backends name in `binaries` required only when the user
//! needs one of them, `--need`), the driver here must run the CUDA runtime it links
//! ([`super::driver`]), and each of its `Requires-Dist` pins on a component of the plan must
//! accept the version the plan chose. Anything short of that builds from source, and the
//! decision says why, naming the binaries and archs, and which kinds of refusal ([`Refusal`]) it
//! rests on: a wheel refused only for its pins ([`UnmetPin`]) is what the session's second
//! solve tries to fit. A wheel that qualifies while a binary only unneeded backends use lacks an
//! arch names it (`binaries.unavailable`). It deliberately does no I/O: the session fetches and
//! reads the wheel.

use std::collections::BTreeMap;
use std::str::FromStr;

use pep440_rs::{Version, VersionSpecifiers};
use pep508_rs::{MarkerEnvironment, Requirement, VerbatimUrl, VersionOrUrl};
use serde::Serialize;

use super::driver;
use super::kernels::{self, KernelCheck, Rules};
use super::need::Need;
use crate::arch::Arch;
use crate::probe::machine::Sourced;
use crate::probe::normalize;
use crate::probe::wheel::WheelFacts;
use crate::recipe::Recipe;
use crate::recipe::binaries::PrebuiltWheel;

/// The wheel of `offered` whose tags rank best in `supported` (the interpreter's list, best first).
pub fn pick<'a>(offered: &'a [PrebuiltWheel], supported: &[String]) -> Option<&'a PrebuiltWheel> {
    let rank: BTreeMap<&str, usize> = supported.iter().enumerate().map(|(i, t)| (t.as_str(), i)).collect();
    offered
        .iter()
        .filter_map(|w| {
            w.tags
                .iter()
                .filter_map(|t| rank.get(t.as_str()))
                .min()
                .map(|r| (*r, w))
        })
        .min_by_key(|(r, _)| *r)
        .map(|(_, w)| w)
}

/// What was decided for one step, and on what evidence (`plan --json` carries it).
#[derive(Debug, Clone, Serialize)]
pub struct WheelDecision {
    /// `true`: install the wheel; `false`: build from source.
    pub install: bool,
    /// The decision in words, naming the binaries and archs behind it.
    pub reason: String,
    /// The wheel judged (absent when none fits this interpreter).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wheel: Option<Offered>,
    /// The per-binary verdict of its CUDA binaries for the target archs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binaries: Option<KernelCheck>,
    /// `Requires-Dist` pins on components of the plan that the plan's versions do not meet.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pins: Vec<UnmetPin>,
    /// What the refusal rests on, by kind (empty when it installs or was not read).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<Refusal>,
    /// The CUDA runtime its binaries link, when known (`13`, `13.0`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuda: Option<String>,
    /// Seconds spent fetching (0 when it came from the cache) and reading the wheel.
    pub fetch_seconds: f64,
    pub read_seconds: f64,
    /// Why neither the wheel nor a build of this version can be proven on this machine (its
    /// binaries link the NVIDIA driver, and there is none: [`super::provable`]); the step is
    /// then `blocked`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unprovable: Option<String>,
}

/// Why a read wheel does not qualify, by kind (the decision's `reason` has the words).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Refusal {
    /// A required CUDA binary lacks a target arch.
    Binaries,
    /// A binary or a `Requires-Dist` line could not be read.
    Unreadable,
    /// The driver here cannot run the CUDA runtime it links.
    Driver,
    /// A `Requires-Dist` pin does not accept the plan's version of a component.
    Pins,
}

/// A `Requires-Dist` pin on a component of the plan that the plan's version does not meet.
#[derive(Debug, Clone, Serialize)]
pub struct UnmetPin {
    pub component: String,
    /// The requirement as written, without its marker (`torch==2.14.0`).
    pub requires: String,
    #[serde(skip)]
    pub spec: VersionSpecifiers,
    /// The plan's version of the component.
    pub planned: String,
}

/// The chosen wheel as the plan shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Offered {
    pub file: String,
    pub url: String,
    pub sha256: String,
}

impl From<&PrebuiltWheel> for Offered {
    fn from(w: &PrebuiltWheel) -> Offered {
        Offered {
            file: w.file.clone(),
            url: w.url.clone(),
            sha256: w.sha256.clone(),
        }
    }
}

impl WheelDecision {
    /// A decision to build made before the wheel could be read (none fits, fetch failed).
    pub fn build(reason: String, wheel: Option<&PrebuiltWheel>) -> WheelDecision {
        WheelDecision {
            install: false,
            reason,
            wheel: wheel.map(Offered::from),
            binaries: None,
            pins: Vec::new(),
            refused: Vec::new(),
            cuda: None,
            fetch_seconds: 0.0,
            read_seconds: 0.0,
            unprovable: None,
        }
    }
}

/// What the judgement looks at besides the wheel.
pub struct Context<'a> {
    pub recipe: &'a Recipe,
    pub version: Option<&'a Version>,
    pub archs: &'a [Arch],
    pub driver: Option<&'a Sourced<semver::Version>>,
    /// The toolkit builds in this plan use (a wheel of another CUDA major is flagged).
    pub toolkit: Option<&'a semver::Version>,
    /// The plan's version of each component, by normalized distribution name: (component, version).
    pub planned: &'a BTreeMap<String, (String, String)>,
    pub markers: Option<&'a MarkerEnvironment>,
    /// The backends the user needs (`--need`).
    pub needs: &'a [Need],
}

/// Judges the read wheel `facts` of `wheel`.
pub fn judge(wheel: &PrebuiltWheel, facts: &WheelFacts, cx: &Context) -> WheelDecision {
    let files: Vec<(String, &crate::fatbin::FileReport)> = facts.cuda.iter().map(|(p, r)| (p.clone(), r)).collect();
    let driver_cuda = cx.driver.map(|d| &d.value);
    let rules = Rules::of(cx.recipe, cx.version, cx.needs);
    let mut check = kernels::check(&files, cx.archs, driver_cuda, &rules);
    check.unreadable = facts.unreadable.clone();
    let mut refusals: Vec<String> = Vec::new();
    let mut refused = Vec::new();
    if !cx.archs.is_empty() && !check.ok() {
        refusals.push(check.evidence());
        refused.push(Refusal::Binaries);
    }
    if !facts.unreadable.is_empty() {
        refusals.push(format!(
            "binaries it holds could not be read: {}",
            facts.unreadable.join("; ")
        ));
        refused.push(Refusal::Unreadable);
    }
    let runtime = crate::recipe::binaries::parse_wheel_name(&wheel.file)
        .ok()
        .and_then(|n| driver::Runtime::from_label(&n.version.to_string()))
        .or_else(|| {
            facts.cudart.map(|m| driver::Runtime {
                major: m,
                minor: None,
                source: format!("its binaries link libcudart.so.{m}"),
            })
        });
    let mut notes = Vec::new();
    if let (Some(rt), Some(d)) = (&runtime, cx.driver) {
        match driver::judge(&wheel.file, rt, d) {
            Err(why) => {
                refusals.push(why);
                refused.push(Refusal::Driver);
            }
            Ok(Some(note)) => notes.push(note),
            Ok(None) => {}
        }
    }
    if let (Some(rt), Some(tk)) = (&runtime, cx.toolkit)
        && rt.major != tk.major
    {
        notes.push(format!(
            "built for CUDA {}, while builds here use the CUDA {tk} toolkit: an extension built here against it would mix CUDA majors",
            rt.shown()
        ));
    }
    let (pins, unread) = pins_unmet(&facts.requires, cx);
    if !unread.is_empty() {
        refusals.push(unread.join("; "));
        refused.push(Refusal::Unreadable);
    }
    if !pins.is_empty() {
        let said: Vec<String> = pins
            .iter()
            .map(|p| {
                format!(
                    "Requires-Dist `{}`, the plan has {} {}",
                    p.requires, p.component, p.planned
                )
            })
            .collect();
        refusals.push(format!("its pins do not fit the plan: {}", said.join("; ")));
        refused.push(Refusal::Pins);
    }
    let install = refusals.is_empty();
    let mut reason = if install {
        let held = if cx.archs.is_empty() {
            "no target arch to check".to_string()
        } else {
            check.evidence()
        };
        format!(
            "the prebuilt wheel {} qualifies: {held}; its pins fit the plan",
            wheel.file
        )
    } else {
        format!(
            "builds from source: the prebuilt wheel {} does not qualify: {}",
            wheel.file,
            refusals.join("; ")
        )
    };
    for n in notes {
        reason += &format!("; {n}");
    }
    WheelDecision {
        install,
        reason,
        wheel: Some(Offered::from(wheel)),
        binaries: (!cx.archs.is_empty()).then_some(check),
        pins,
        refused,
        cuda: runtime.map(|r| r.shown()),
        fetch_seconds: 0.0,
        read_seconds: 0.0,
        unprovable: None,
    }
}

/// Each `Requires-Dist` that applies here and names a component of the plan whose planned
/// version it does not accept (`torch==2.14.0` while the plan has torch 2.14.1); and the lines
/// that could not be read.
fn pins_unmet(requires: &[String], cx: &Context) -> (Vec<UnmetPin>, Vec<String>) {
    let (mut out, mut unread) = (Vec::new(), Vec::new());
    for text in requires {
        let Ok(req) = Requirement::<VerbatimUrl>::from_str(text) else {
            unread.push(format!("cannot read Requires-Dist `{text}`"));
            continue;
        };
        // With the interpreter's markers, only what applies here (no extras); without them,
        // every requirement outside an extra.
        if !req.marker.evaluate_optional_environment(cx.markers, &[]) {
            continue;
        }
        let Some((component, version)) = cx.planned.get(&normalize(req.name.as_ref())) else {
            continue;
        };
        let Some(VersionOrUrl::VersionSpecifier(spec)) = &req.version_or_url else {
            continue;
        };
        let fits = Version::from_str(version).is_ok_and(|v| spec.contains(&v));
        if !fits {
            out.push(UnmetPin {
                component: component.clone(),
                requires: text.split(';').next().unwrap_or(text).trim().to_string(),
                spec: spec.clone(),
                planned: version.clone(),
            });
        }
    }
    (out, unread)
}

impl WheelDecision {
    /// The wheel was read and refused for its pins alone: a plan with the versions it pins
    /// would install it.
    pub fn refused_for_pins_only(&self) -> bool {
        !self.install && self.refused == [Refusal::Pins]
    }
}
