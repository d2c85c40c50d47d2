//! Processes by descent, from `/proc`: the resident memory of one process and everything it
//! started (what one compiler command, nvcc with the cicc, ptxas and fatbinary it runs, some at
//! once under `--threads`, holds at a moment: one command among the many a build runs side by
//! side), and the members of process groups with all their descendants ([`groups_with_descendants`]:
//! what [`wait`](super::wait) samples, since ninja starts each compiler in a process group of
//! its own, so a build's group alone holds only Python and ninja).
//!
//! It deliberately ignores processes that left the tree (a daemon that re-parented itself, such
//! as an sccache server): their memory is not the command's. Pages shared between members
//! count once per member, so the sum errs high.

use std::collections::HashMap;

/// The size of a memory page, which `/proc/PID/stat` counts resident memory in.
pub(super) fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
}

/// The summed RSS, in bytes, of `pid` and its descendants now (0 when it is gone).
pub fn resident(pid: u32) -> u64 {
    let page = page_size();
    // Index 20 of the stat fields is the resident pages (field 24).
    let rss = |p: u32| super::group::stat(p).and_then(|f| f.get(20).copied()).unwrap_or(0) * page;
    // The kernel's list of each thread's children (CONFIG_PROC_CHILDREN) reads a compiler's few
    // processes; without it, every process's parent is read from all of /proc.
    let Some(mut stack) = children(pid) else {
        return scanned(|p, _| p == u64::from(pid))
            .iter()
            .map(|f| f.get(20).copied().unwrap_or(0) * page)
            .sum();
    };
    let mut total = rss(pid);
    while let Some(p) = stack.pop() {
        total += rss(p);
        stack.extend(children(p).unwrap_or_default());
    }
    total
}

/// The `/proc/PID/stat` fields (as [`super::group`] reads them) of every process in the groups
/// `pgids` and of every descendant of one, in one pass over `/proc`.
pub(super) fn groups_with_descendants(pgids: &[u32]) -> Vec<Vec<u64>> {
    // Index 1 of the stat fields is the process group (field 5).
    scanned(|_, f| f.get(1).is_some_and(|g| pgids.iter().any(|&p| u64::from(p) == *g)))
}

/// The stat fields of every process that `root` picks (by pid and fields) and of every
/// descendant of one, in one pass over `/proc`.
fn scanned(root: impl Fn(u64, &[u64]) -> bool) -> Vec<Vec<u64>> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let all: Vec<(u64, Vec<u64>)> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|p| Some((u64::from(p), super::group::stat(p)?)))
        .collect();
    // Index 0 of the stat fields is the parent (field 4).
    let mut by_parent: HashMap<u64, Vec<usize>> = HashMap::new();
    for (i, (_, f)) in all.iter().enumerate() {
        by_parent.entry(f.first().copied().unwrap_or(0)).or_default().push(i);
    }
    let mut taken = vec![false; all.len()];
    let mut stack: Vec<usize> = (0..all.len()).filter(|&i| root(all[i].0, &all[i].1)).collect();
    while let Some(i) = stack.pop() {
        if std::mem::replace(&mut taken[i], true) {
            continue;
        }
        stack.extend(by_parent.get(&all[i].0).into_iter().flatten().copied());
    }
    all.into_iter()
        .zip(taken)
        .filter(|(_, t)| *t)
        .map(|((_, f), _)| f)
        .collect()
}

/// The children of every thread of `pid`; `None` where the kernel does not list them.
fn children(pid: u32) -> Option<Vec<u32>> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut out = Vec::new();
    let mut listed = false;
    for t in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(t.path().join("children")) {
            listed = true;
            out.extend(text.split_whitespace().filter_map(|c| c.parse::<u32>().ok()));
        }
    }
    (listed || !std::path::Path::new(&format!("/proc/{pid}")).exists()).then_some(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_tree_holds_what_its_children_hold() {
        // A shell whose child holds 64 MiB: the tree is at least that, the child alone too.
        let mut sh = std::process::Command::new("sh")
            .args([
                "-c",
                "python3 -c 'import time; b = bytearray(64 << 20); time.sleep(30)' & wait",
            ])
            .spawn()
            .unwrap();
        let pid = sh.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut seen = 0;
        while seen < 64 << 20 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
            seen = super::resident(pid);
        }
        // The same tree read from all of /proc (where the kernel lists no children).
        let scanned: u64 = super::scanned(|p, _| p == u64::from(pid))
            .iter()
            .map(|f| f[20] * super::page_size())
            .sum();
        let _ = std::process::Command::new("pkill")
            .args(["-P", &pid.to_string()])
            .status();
        let _ = sh.kill();
        let _ = sh.wait();
        assert!(seen >= 64 << 20, "saw {seen} bytes");
        assert_eq!(super::resident(u32::MAX - 1), 0, "no such process");
        assert!(scanned >= 64 << 20, "the scan saw {scanned} bytes");
    }
}
