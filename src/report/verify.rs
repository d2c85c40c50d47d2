//! `kiln verify`: each component checked, its status and evidence, then a summary line. It
//! deliberately ignores components nobody asked to check.

use serde::Serialize;

use crate::probe::cache::CacheUse;
use crate::resolve::{Assessment, Status};

/// What `kiln verify --json` prints (through [`super::json_doc`]).
#[derive(Debug, Serialize)]
pub struct Verified<'a> {
    pub components: &'a [&'a Assessment],
    pub probe_cache: CacheUse,
}

/// The components checked, for a person.
pub fn human(checked: &[&Assessment]) {
    let w = checked.iter().map(|a| a.name.len()).max().unwrap_or(4).max(4);
    for a in checked {
        println!(
            "{:w$}  {:11}  {:14}  {}",
            a.name,
            a.status.as_str(),
            a.version.as_deref().unwrap_or("-"),
            super::reason::evidence(&a.reasons)
        );
    }
    let bad = checked.iter().filter(|a| a.status != Status::Ok).count();
    if bad == 0 {
        println!(
            "verified {} component{}: every proof ran again and held",
            checked.len(),
            if checked.len() == 1 { "" } else { "s" }
        );
    } else {
        println!(
            "{bad} of {} not ok; `kiln install` rebuilds what is broken",
            checked.len()
        );
    }
}
