//! The JSON form of the verdicts that carry typed reasons: each keeps the fields it always had,
//! its rendered words (`evidence` of a component, a feature or a JIT verdict, `reason` of a plan
//! step, rendered by [`super::reason`]) and, beside them, the typed `reasons` they were rendered
//! from, so a script can match on `kind` instead of reading sentences. It deliberately adds
//! nothing else: every document embedding these types gets the same form.

use std::collections::BTreeMap;

use serde::{Serialize, Serializer};

use super::reason::{evidence, step};
use crate::resolve::owners::OtherDist;
use crate::resolve::status::{FeatureReport, ImportCheck};
use crate::resolve::wheel_choice::WheelDecision;
use crate::resolve::{Assessment, BuildSpec, Reason, Status, Step};
use crate::session::JitVerdict;

impl Serialize for Assessment {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Json<'a> {
            name: &'a str,
            status: Status,
            version: &'a Option<String>,
            evidence: String,
            reasons: &'a [Reason],
            want: &'a Option<String>,
            #[serde(skip_serializing_if = "Option::is_none")]
            location: &'a Option<String>,
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            imports: &'a [ImportCheck],
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            features: &'a [FeatureReport],
            #[serde(skip_serializing_if = "Option::is_none")]
            installed_as: &'a Option<OtherDist>,
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            sharing: &'a [OtherDist],
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            unavailable: &'a [crate::resolve::kernels::Lacking],
        }
        Json {
            name: &self.name,
            status: self.status,
            version: &self.version,
            evidence: evidence(&self.reasons),
            reasons: &self.reasons,
            want: &self.want,
            location: &self.location,
            imports: &self.imports,
            features: &self.features,
            installed_as: &self.installed_as,
            sharing: &self.sharing,
            unavailable: &self.unavailable,
        }
        .serialize(s)
    }
}

impl Serialize for crate::resolve::unmanaged::Unmanaged {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Json<'a> {
            dist: &'a str,
            version: &'a str,
            status: Status,
            evidence: String,
            reasons: &'a [Reason],
        }
        Json {
            dist: &self.dist,
            version: &self.version,
            status: self.status,
            evidence: evidence(&self.reasons),
            reasons: &self.reasons,
        }
        .serialize(s)
    }
}

impl Serialize for FeatureReport {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Json<'a> {
            name: &'a str,
            status: Status,
            evidence: String,
            reasons: &'a [Reason],
        }
        Json {
            name: &self.name,
            status: self.status,
            evidence: evidence(&self.reasons),
            reasons: &self.reasons,
        }
        .serialize(s)
    }
}

impl Serialize for Step {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Json<'a> {
            name: &'a str,
            action: crate::resolve::Action,
            reason: String,
            reasons: &'a [Reason],
            status: Status,
            #[serde(skip_serializing_if = "Option::is_none")]
            version: &'a Option<String>,
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            features: &'a [String],
            #[serde(flatten)]
            build: &'a Option<BuildSpec>,
            #[serde(skip_serializing_if = "BTreeMap::is_empty")]
            runtime_env: &'a BTreeMap<String, String>,
            #[serde(skip_serializing_if = "Option::is_none")]
            prebuilt: &'a Option<WheelDecision>,
        }
        Json {
            name: &self.name,
            action: self.action,
            reason: step(&self.reasons),
            reasons: &self.reasons,
            status: self.status,
            version: &self.version,
            features: &self.features,
            build: &self.build,
            runtime_env: &self.runtime_env,
            prebuilt: &self.prebuilt,
        }
        .serialize(s)
    }
}

impl Serialize for JitVerdict {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Json<'a> {
            name: &'a str,
            archs: &'a [crate::arch::Arch],
            status: crate::session::JitStatus,
            evidence: String,
            reasons: &'a [Reason],
            #[serde(skip_serializing_if = "Option::is_none")]
            proof: &'a Option<crate::probe::jit::JitOutcome>,
        }
        Json {
            name: &self.name,
            archs: &self.archs,
            status: self.status,
            evidence: evidence(std::slice::from_ref(&self.reason)),
            reasons: std::slice::from_ref(&self.reason),
            proof: &self.proof,
        }
        .serialize(s)
    }
}
