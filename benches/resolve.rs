//! Resolution speed on synthetic recipe sets (issue: resolver; goal: 10k components < 100 ms).
//!
//! Each component has three versions (3.0.0, 2.0.0, 1.0.0) and depends on 1-5 components with
//! lower numbers, with ranges `>=1.0`, `>=2.0,<4`, and caps `<3` / `==2.*` that force the solver
//! below the newest version. Three mixes: "realistic" (one dependency in 50 capped: most newest
//! versions fit, as in real stacks), "adversarial" (two in seven capped: half the components end
//! below their newest version, though deciding dependents first means every cap is known in time,
//! so nothing conflicts), and "conflicting" (as adversarial, and the newest version of one
//! component in 20 pins a dependency to `==1.*`, which clashes with what other dependents need:
//! PubGrub itself must backtrack, the fast path cannot answer).
//! Run: `cargo bench --bench resolve` (prints one line per size; no GPU, no Python).

use std::time::Instant;

use kiln::probe::python::PythonFacts;
use kiln::recipe::RecipeSet;
use kiln::resolve::solve::{Request, solve};

/// `caps_in`: one dependency in `caps_in` is capped (`<3` or `==2.*`), forcing the solver below the
/// newest version of that dependency. `pins_in`: the newest version of one component in `pins_in`
/// (0: none) pins its first dependency to `==1.*`, which other dependents' ranges exclude.
fn synthetic(n: usize, caps_in: u64, pins_in: u64) -> Vec<(String, String)> {
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    (0..n)
        .map(|i| {
            let mut deps = String::new();
            let mut first = None;
            if i > 0 {
                let fan = 1 + (next() % 5) as usize;
                let mut seen = std::collections::BTreeSet::new();
                for _ in 0..fan.min(i) {
                    let j = (next() as usize) % i;
                    if !seen.insert(j) {
                        continue;
                    }
                    let range = match next() % caps_in {
                        0 => "<3",
                        1 => "==2.*",
                        2..=4 => ">=2.0,<4",
                        _ => ">=1.0",
                    };
                    deps += &format!("c{j} = \"{range}\"\n");
                    first.get_or_insert(j);
                }
            }
            let pin = first.filter(|_| pins_in > 0 && next() % pins_in == 0);
            let mut text = format!("[package]\nname = \"c{i}\"\n[depends]\n{deps}");
            for v in ["3.0.0", "2.0.0", "1.0.0"] {
                text += &format!("[[versions]]\nversion = \"{v}\"\nwheel = \"c{i}=={v}\"\n");
                if let (Some(j), "3.0.0") = (pin, v) {
                    text += &format!("[versions.depends]\nc{j} = \"==1.*\"\n");
                }
            }
            (format!("c{i}.toml"), text)
        })
        .collect()
}

fn main() {
    let facts = PythonFacts::nothing_installed("python3", "3.11.7");
    for (mix, caps_in, pins_in, sizes) in [
        ("realistic", 50, 0, &[1_000usize, 10_000][..]),
        ("adversarial", 7, 0, &[1_000usize, 10_000][..]),
        ("conflicting", 7, 20, &[1_000usize, 10_000][..]),
    ] {
        for &n in sizes {
            let files = synthetic(n, caps_in, pins_in);
            // Loading, best of 5 like the resolves (the first run pays for cold caches and pages).
            let mut parse_ms = f64::MAX;
            let mut loaded = None;
            for _ in 0..5 {
                let texts = files.clone();
                let t0 = Instant::now();
                let set = RecipeSet::from_texts(texts, "synthetic").expect("synthetic recipes are valid");
                parse_ms = parse_ms.min(t0.elapsed().as_secs_f64() * 1e3);
                loaded = Some(set);
            }
            let set = loaded.expect("loaded five times");
            // Ask for the 20 highest-numbered components (each pulls in a large part of the graph),
            // and separately for every component.
            for (label, targets) in [
                (
                    "20 targets",
                    (n - 20..n).map(|i| (format!("c{i}"), Vec::new())).collect::<Vec<_>>(),
                ),
                ("all targets", (0..n).map(|i| (format!("c{i}"), Vec::new())).collect()),
            ] {
                let req = Request {
                    targets,
                    ..Request::default()
                };
                let mut best = f64::MAX;
                let mut chosen = 0;
                let mut older = 0;
                for _ in 0..5 {
                    let t = Instant::now();
                    let sol = solve(&set, &facts, &req);
                    best = best.min(t.elapsed().as_secs_f64() * 1e3);
                    if let Ok(s) = sol {
                        chosen = s.chosen.len();
                        older = s.chosen.values().filter(|v| v.as_str() != "3.0.0").count();
                    }
                }
                println!(
                    "{mix}: {n} components, {label}: resolve {best:.1} ms (best of 5; {chosen} chosen, {older} below newest); parse {parse_ms:.1} ms (best of 5)"
                );
            }
        }
    }
}
