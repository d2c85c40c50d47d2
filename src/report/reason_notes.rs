//! The words of two notes [`super::reason`] hands over: a library API's limits on an arch
//! (`[[limits]]`) and a distribution no recipe manages. It deliberately renders nothing else.

use crate::resolve::Reason;

/// The note's words; empty for any other reason (the caller never asks).
pub fn text(r: &Reason) -> String {
    match r {
        Reason::ArchLimits {
            component,
            version,
            archs,
            lacks,
            source,
        } => {
            let archs: Vec<String> = archs.iter().map(|a| a.to_string()).collect();
            let lacks: Vec<&str> = lacks.iter().map(|c| c.as_str()).collect();
            format!(
                "on {} {component} {version} has no {} ({source})",
                archs.join(", "),
                lacks.join(", ")
            )
        }
        Reason::NotManaged { dist, version } => {
            format!("{dist} {version} is installed and no recipe manages it: judged by its CUDA binaries alone")
        }
        _ => String::new(),
    }
}
