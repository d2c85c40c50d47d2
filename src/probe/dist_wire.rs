//! A distribution as the probe (`probe.py`) and the probe cache write it, read into
//! [`Dist`]: its `kiln.json` comes as any JSON and is read into a [`BuildRecord`] here, so that
//! one record of an unexpected shape makes that distribution's record unreadable (named, with
//! why) instead of failing the probe of the whole environment (issue 23 F14). It deliberately
//! ignores what the record means (`resolve::status` judges it).

use serde::Deserialize;

use super::python::{BuildRecord, Dist};

/// A distribution as the probe (or the probe cache) writes it: its `kiln.json` as any JSON,
/// read into a [`BuildRecord`] here.
#[derive(Deserialize)]
pub(super) struct DistWire {
    name: String,
    version: String,
    location: Option<String>,
    dist_info: Option<String>,
    direct_url: Option<serde_json::Value>,
    #[serde(default)]
    requires: Vec<String>,
    installer: Option<String>,
    #[serde(default)]
    kiln: Option<serde_json::Value>,
    #[serde(default)]
    kiln_unreadable: Option<String>,
}

impl From<DistWire> for Dist {
    fn from(w: DistWire) -> Dist {
        let (kiln, kiln_unreadable) = match w.kiln {
            None => (None, w.kiln_unreadable),
            Some(v) => match serde_json::from_value::<BuildRecord>(v) {
                Ok(r) => (Some(r), None),
                Err(e) => (None, Some(format!("not what kiln writes there: {e}"))),
            },
        };
        Dist {
            name: w.name,
            version: w.version,
            location: w.location,
            dist_info: w.dist_info,
            direct_url: w.direct_url,
            requires: w.requires,
            installer: w.installer,
            kiln,
            kiln_unreadable,
        }
    }
}
