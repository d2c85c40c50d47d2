//! Build commands without the network. A build that declares its inputs has nothing left to
//! download; if it still tries, that is a recipe bug kiln should catch at once rather than let
//! the build fetch something unpinned (or fail minutes later, offline, on a node with no route
//! out). Where the platform allows it, kiln runs the `prepare` and wheel commands in a network
//! namespace of their own with only a loopback device that is down: `unshare -rn` (a user
//! namespace, so no privilege is needed where unprivileged user namespaces are enabled; the
//! command keeps kiln's process id, group and limits, since `unshare` execs it).
//!
//! Whether that works is asked once per run (`unshare -rn true`); where it does not (no
//! `unshare`, user namespaces disabled, a container without the capability) the build runs as
//! before and a failure that names a host it could not reach is still recognised from the log
//! ([`super::failure::Hint::Network`]). It deliberately ignores the build-requirements step,
//! which installs from an index or the wheelhouse.

use std::sync::OnceLock;
use std::time::Duration;

use crate::process::Cmd;

/// Whether commands can be run without the network here: `Ok`, or why not.
pub fn available() -> Result<(), String> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            let out = Cmd::new("unshare")
                .args(["-rn", "--", "true"])
                .capture(b"", Duration::from_secs(10))
                .map_err(|e| format!("cannot run unshare: {e}"))?;
            if out.success {
                Ok(())
            } else {
                let why = out.stderr.lines().next().unwrap_or("").trim().to_string();
                Err(format!("`unshare -rn` failed ({}): {why}", out.status))
            }
        })
        .clone()
}

/// `argv` run without the network where that is possible, else as it is.
pub fn wrap(argv: Vec<String>) -> Vec<String> {
    if available().is_err() || argv.is_empty() {
        return argv;
    }
    let mut out = vec!["unshare".to_string(), "-rn".to_string(), "--".to_string()];
    out.extend(argv);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrapped_command_runs_and_has_no_route_out_where_namespaces_work() {
        let argv = vec!["sh".to_string(), "-c".to_string(), "cat /proc/net/dev".to_string()];
        let wrapped = wrap(argv.clone());
        match available() {
            Ok(()) => {
                assert_eq!(wrapped[..3], ["unshare", "-rn", "--"]);
                let out = Cmd::new(wrapped[0].clone())
                    .args(wrapped[1..].iter().cloned())
                    .capture(b"", Duration::from_secs(20))
                    .unwrap();
                assert!(out.success, "{}", out.stderr);
                // Only the loopback device exists inside.
                let devices: Vec<&str> = out.stdout.lines().skip(2).filter_map(|l| l.split(':').next()).collect();
                assert_eq!(devices.iter().map(|d| d.trim()).collect::<Vec<_>>(), ["lo"]);
            }
            Err(why) => {
                assert_eq!(wrapped, argv, "unchanged where it cannot work ({why})");
            }
        }
    }
}
