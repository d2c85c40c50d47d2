//! What runs side by side in a probe: a small pool that runs tasks at most `n` at once, the
//! first of the list first, answers in the list's order; and the choice of which components
//! share an interpreter when CPUs are fewer than components. It deliberately ignores what the
//! tasks are (`probe::gather` makes them).

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::gather::Unit;

/// How many interpreters may import side by side: one per CPU kiln may use, and no more than
/// one per GiB of available memory (an interpreter that imports torch and vLLM holds about that).
pub fn interpreters(cpus: usize, memory_available: Option<u64>) -> usize {
    let by_memory = memory_available.map_or(usize::MAX, |m| (m >> 30) as usize);
    cpus.min(by_memory).max(1)
}

/// Runs `f` on each of `tasks`, at most `n` at once, taking them in the list's order; the
/// answers come back in the same order.
pub fn run_all<T: Sync, R: Send>(tasks: &[T], n: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    if n <= 1 || tasks.len() <= 1 {
        return tasks.iter().map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<R>>> = Mutex::new(tasks.iter().map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..n.min(tasks.len()) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(t) = tasks.get(i) else { break };
                    let r = f(t);
                    out.lock().unwrap()[i] = Some(r);
                }
            });
        }
    });
    out.into_inner()
        .unwrap()
        .into_iter()
        .map(|r| r.expect("every task ran"))
        .collect()
}

/// The interpreters for `units` (in dependency order), at most `n`, the slowest first. With
/// CPUs enough each component gets an interpreter of its own: the probe then costs about its
/// slowest import. With fewer, no CPU goes to importing one thing twice: components linked by
/// dependencies (directly or through others) share one interpreter, in dependency order (vllm
/// after torch: importing vllm imports torch anyway), and these independent sets are spread
/// over the `n` interpreters, the heaviest first onto the least loaded.
pub fn groups<'a>(units: Vec<&'a Unit>, n: usize, estimate: &dyn Fn(&Unit) -> f64) -> Vec<Vec<&'a Unit>> {
    let load = |g: &[&Unit]| g.iter().map(|u| estimate(u)).sum::<f64>();
    let mut sets: Vec<Vec<&'a Unit>> = if units.len() <= n.max(1) {
        units.into_iter().map(|u| vec![u]).collect()
    } else {
        // Union-find over the dependency links among these units.
        let mut root: Vec<usize> = (0..units.len()).collect();
        fn find(root: &mut [usize], i: usize) -> usize {
            let mut i = i;
            while root[i] != i {
                root[i] = root[root[i]];
                i = root[i];
            }
            i
        }
        for (i, u) in units.iter().enumerate() {
            for (j, v) in units.iter().enumerate() {
                if u.after.contains(&v.name) {
                    let (a, b) = (find(&mut root, i), find(&mut root, j));
                    root[a] = b;
                }
            }
        }
        let mut by_root: Vec<(usize, Vec<&'a Unit>)> = Vec::new();
        for (i, u) in units.iter().enumerate() {
            let r = find(&mut root, i);
            match by_root.iter_mut().find(|(k, _)| *k == r) {
                Some((_, g)) => g.push(u),
                None => by_root.push((r, vec![u])),
            }
        }
        let mut sets: Vec<Vec<&'a Unit>> = by_root.into_iter().map(|(_, g)| g).collect();
        sets.sort_by(|a, b| load(b).total_cmp(&load(a)));
        let mut bins: Vec<Vec<&'a Unit>> = Vec::new();
        for set in sets {
            if bins.len() < n.max(1) {
                bins.push(set);
            } else if let Some(least) = bins.iter_mut().min_by(|a, b| load(a).total_cmp(&load(b))) {
                least.extend(set);
            }
        }
        bins
    };
    sets.sort_by(|a, b| load(b).total_cmp(&load(a)));
    sets
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(name: &str, after: &[&str]) -> Unit {
        Unit {
            name: name.into(),
            imports: vec![name.into()],
            dists: Vec::new(),
            after: after.iter().map(|s| s.to_string()).collect(),
            smoke: None,
        }
    }

    fn names(gs: &[Vec<&Unit>]) -> Vec<Vec<String>> {
        gs.iter().map(|g| g.iter().map(|u| u.name.clone()).collect()).collect()
    }

    #[test]
    fn each_component_alone_with_cpus_enough_else_each_independent_set_in_one_interpreter() {
        // Dependency order, as a session's scope is.
        let units = [
            unit("cutlass", &[]),
            unit("torch", &[]),
            unit("flashinfer", &["torch", "cutlass"]),
            unit("vllm", &["torch", "flashinfer", "cutlass"]),
            unit("router", &[]),
        ];
        let all: Vec<&Unit> = units.iter().collect();
        let one = |_: &Unit| 1.0;
        assert_eq!(names(&groups(all.clone(), 5, &one)).len(), 5);
        assert_eq!(
            names(&groups(all.clone(), 3, &one)),
            [vec!["cutlass", "torch", "flashinfer", "vllm"], vec!["router"]]
        );
        assert_eq!(
            names(&groups(all.clone(), 1, &one)),
            [vec!["cutlass", "torch", "flashinfer", "vllm", "router"]]
        );
        // Known times: the slowest interpreter starts first.
        let slow_torch = |u: &Unit| if u.name == "torch" { 9.0 } else { 1.0 };
        assert_eq!(names(&groups(all, 5, &slow_torch))[0], ["torch"]);
    }
}
