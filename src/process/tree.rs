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

/// The summed RSS, in bytes, of `pid` and its descendants now (0 when it is gone).
pub fn resident(pid: u32) -> u64 {
    // SAFETY: sysconf has no preconditions.
    let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let rss = |p: u32| super::group::stat(p).and_then(|f| f.get(20).copied()).unwrap_or(0) * page;
    // The kernel's list of each thread's children (CONFIG_PROC_CHILDREN) reads a compiler's few
    // processes; without it, every process's parent is read from all of /proc.
    let Some(mut stack) = children(pid) else {
        return scanned(pid, page);
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
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let all: Vec<(u64, Vec<u64>)> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|p| Some((u64::from(p), super::group::stat(p)?)))
        .collect();
    let mut by_parent: HashMap<u64, Vec<usize>> = HashMap::new();
    for (i, (_, f)) in all.iter().enumerate() {
        by_parent.entry(f.first().copied().unwrap_or(0)).or_default().push(i);
    }
    let in_groups = |f: &Vec<u64>| f.get(1).is_some_and(|g| pgids.iter().any(|&p| u64::from(p) == *g));
    let mut taken = vec![false; all.len()];
    let mut stack: Vec<usize> = (0..all.len()).filter(|&i| in_groups(&all[i].1)).collect();
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

/// [`resident`] from one pass over all of `/proc`.
fn scanned(pid: u32, page: u64) -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    // Index 0 of the stat fields is the parent, 20 the resident pages (fields 4 and 24).
    let mut children: HashMap<u64, Vec<(u64, u64)>> = HashMap::new();
    let mut own = 0;
    for p in dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()) {
        let Some(f) = super::group::stat(p) else { continue };
        let rss = f.get(20).copied().unwrap_or(0) * page;
        if p == pid {
            own = rss;
        }
        children
            .entry(f.first().copied().unwrap_or(0))
            .or_default()
            .push((u64::from(p), rss));
    }
    let mut total = own;
    let mut stack = vec![u64::from(pid)];
    while let Some(p) = stack.pop() {
        for &(child, rss) in children.get(&p).map_or(&[][..], Vec::as_slice) {
            total += rss;
            stack.push(child);
        }
    }
    total
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
        let _ = std::process::Command::new("pkill")
            .args(["-P", &pid.to_string()])
            .status();
        let _ = sh.kill();
        let _ = sh.wait();
        assert!(seen >= 64 << 20, "saw {seen} bytes");
        assert_eq!(super::resident(u32::MAX - 1), 0, "no such process");
        assert!(
            super::scanned(std::process::id(), 4096) > 0,
            "the scan sees this process"
        );
    }
}
