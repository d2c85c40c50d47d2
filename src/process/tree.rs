//! The resident memory of one process and everything it started, from `/proc`: what one
//! compiler command (nvcc with the cicc, ptxas and fatbinary it runs, some at once under
//! `--threads`) holds at a moment. [`wait`](super::wait) sums a whole process group instead;
//! this follows parent links, so it sees one command among the many a build runs side by side.
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
