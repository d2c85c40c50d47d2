#!/usr/bin/env python3
"""The probe cache, measured side by side on one environment (issue 10, item 7).

In one run, interleaved so that both sides of each comparison see the same machine load:
  1. warm `kiln doctor` (every recipe, probe cache hit) vs uv's no-op on the same environment
     (`uv pip install --offline <the installed top package>`: everything is installed, uv checks
     that it is and changes nothing) and `uv pip check`;
  2. a new target subset right after a full doctor (`kiln doctor torch`, `kiln doctor vllm`):
     the issue's case that re-probed everything;
  3. cold `kiln doctor` (empty cache) vs each component's imports alone in a fresh interpreter
     (`python -I -B`, each import in try/except, as kiln's probe tries them): the slowest of those
     and their sum. Optionally an older kiln (`--baseline`) cold and warm beside it.

Times are wall-clock (time.perf_counter around the child), with the children's CPU time
(user + sys, from getrusage) beside them; medians over the runs.

  python3 bench/probe_cache.py --kiln target/release/kiln \
      --python /work/scratch/vllm-env/bin/python --uv uv --uv-noop vllm==0.33.0 \
      --runs 21 --cold-runs 3 [--baseline OLD_KILN] [--out results.json]

KILN_CPUS in the environment limits the interpreters kiln runs side by side.
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def timed(cmd, env=None):
    """(wall seconds, cpu seconds of the child, completed process)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, p


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def ms(x):
    return "%.1f ms" % (x * 1000)


def s(x):
    return "%.2f s" % x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--python", required=True)
    ap.add_argument("--uv", default="uv")
    ap.add_argument("--uv-noop", default="vllm==0.33.0", help="what `uv pip install` is asked for")
    ap.add_argument("--recipes", help="kiln --recipes (default: the embedded ones)")
    ap.add_argument("--subsets", default="torch,vllm", help="targets for the new-subset runs")
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--cold-runs", type=int, default=3)
    ap.add_argument("--baseline", help="an older kiln binary to measure beside")
    ap.add_argument("--sections", default="warm,subset,cold")
    ap.add_argument("--cold-targets", default="", help="targets of the cold doctor (default: every recipe)")
    ap.add_argument("--out")
    a = ap.parse_args()

    work = tempfile.mkdtemp(prefix="kiln-probe-bench-")
    recipes = ["--recipes", a.recipes] if a.recipes else []

    def kiln(binary, cache, *args):
        return [binary, *recipes, "--python", a.python, "--cache-dir", cache, "--no-progress", *args]

    results = {"python": a.python, "kiln_cpus": os.environ.get("KILN_CPUS"), "cpus": os.cpu_count()}

    # The components and their imports, as kiln tries them (features' imports included).
    listed = json.loads(subprocess.run([a.kiln, *recipes, "recipes", "--json"], capture_output=True, text=True).stdout)
    units = {}
    for r in listed["recipes"]:
        imports = list(r.get("imports", []))
        for f in (r.get("features") or {}).values():
            imports += [m for m in f.get("imports", []) if m not in imports]
        if imports:
            units[r["name"]] = imports

    sections = a.sections.split(",")
    cold_targets = [t for t in a.cold_targets.split(",") if t]
    warm, subsets, hits = {}, {}, 0

    # 1. Warm doctor vs uv's no-op, interleaved.
    cache = os.path.join(work, "warm")
    base_cache = os.path.join(work, "warm-base")
    if "warm" in sections or "subset" in sections:
        timed(kiln(a.kiln, cache, "doctor", "--json"))
        if a.baseline:
            timed(kiln(a.baseline, base_cache, "doctor", "--json"))
    sides = {
        "kiln doctor (warm)": lambda: kiln(a.kiln, cache, "doctor", "--json"),
        "uv pip install --offline %s (no-op)" % a.uv_noop: lambda: [a.uv, "pip", "install", "--offline", "--python", a.python, a.uv_noop],
        "uv pip check": lambda: [a.uv, "pip", "check", "--python", a.python],
    }
    if a.baseline:
        sides["baseline kiln doctor (warm)"] = lambda: kiln(a.baseline, base_cache, "doctor", "--json")
    if "warm" in sections:
        warm = {k: {"wall": [], "cpu": [], "rc": set()} for k in sides}
    for _ in range(a.runs if "warm" in sections else 0):
        for k, cmd in sides.items():
            wall, cpu, p = timed(cmd())
            warm[k]["wall"].append(wall)
            warm[k]["cpu"].append(cpu)
            warm[k]["rc"].add(p.returncode)
            if k == "kiln doctor (warm)":
                hits += json.loads(p.stdout)["machine"]["probe_cache"] == "hit"
    results["warm"] = {
        k: {"wall_median": med(v["wall"]), "cpu_median": med(v["cpu"]), "runs": len(v["wall"]), "exit": sorted(v["rc"])}
        for k, v in warm.items()
    }
    results["warm_kiln_hits"] = hits

    # 2. A new target subset right after the full doctor (cache as the full doctor left it).
    for t in [x for x in a.subsets.split(",") if x and "subset" in sections]:
        fresh = os.path.join(work, "subset-" + t)
        shutil.copytree(cache, fresh)
        wall, cpu, p = timed(kiln(a.kiln, fresh, "doctor", "--json", t))
        src = json.loads(p.stdout)["machine"].get("probe_sources", {})
        subsets[t] = {"wall": wall, "cpu": cpu, "probe_cache": json.loads(p.stdout)["machine"]["probe_cache"], "interpreters": src.get("interpreters")}
        if a.baseline:
            fresh = os.path.join(work, "subset-base-" + t)
            shutil.copytree(base_cache, fresh)
            wall, cpu, p = timed(kiln(a.baseline, fresh, "doctor", "--json", t))
            subsets[t]["baseline_wall"] = wall
    results["subset_after_full"] = subsets

    # 3. Cold doctor vs each component's imports alone, interleaved round by round.
    probe = (
        "import sys\n"
        "for m in sys.argv[1:]:\n"
        "    try:\n"
        "        __import__(m)\n"
        "    except BaseException:\n"
        "        pass\n"
    )
    cold = {"kiln doctor (cold)": [], "baseline kiln doctor (cold)": []}
    alone = {u: [] for u in units}
    alone_cpu = {u: [] for u in units}
    cold_cpu = []
    sources = None
    for i in range(a.cold_runs if "cold" in sections else 0):
        c = os.path.join(work, "cold-%d" % i)
        wall, cpu, p = timed(kiln(a.kiln, c, "doctor", "--json", *cold_targets))
        cold["kiln doctor (cold)"].append(wall)
        cold_cpu.append(cpu)
        v = json.loads(p.stdout)
        sources = v["machine"].get("probe_sources")
        in_scope = {c["name"] for c in v["components"]}
        if a.baseline:
            wall, _, _ = timed(kiln(a.baseline, os.path.join(work, "cold-base-%d" % i), "doctor", "--json", *cold_targets))
            cold["baseline kiln doctor (cold)"].append(wall)
        for u, imports in units.items():
            if u not in in_scope:
                continue
            wall, cpu, _ = timed([a.python, "-I", "-B", "-c", probe, *imports])
            alone[u].append(wall)
            alone_cpu[u].append(cpu)
    per = {u: med(v) for u, v in alone.items() if v}
    slowest = max(per, key=per.get) if per else None
    results["cold"] = {
        "kiln_wall_runs": cold["kiln doctor (cold)"],
        "kiln_wall_median": med(cold["kiln doctor (cold)"]),
        "kiln_cpu_median": med(cold_cpu),
        "alone_cpu_median": {u: med(v) for u, v in alone_cpu.items() if v},
        "baseline_wall_runs": cold["baseline kiln doctor (cold)"],
        "alone_median": per,
        "slowest": slowest,
        "slowest_median": per.get(slowest, float("nan")),
        "targets": cold_targets,
        "sum_of_alone": sum(per.values()),
        "interpreters": sources and sources.get("interpreters"),
        "side_by_side": sources and sources.get("side_by_side"),
    }
    shutil.rmtree(work, ignore_errors=True)

    print("machine: %s CPUs (os); KILN_CPUS=%s" % (results["cpus"], results["kiln_cpus"]))
    print("\n| warm, %d runs interleaved | wall (median) | CPU (median) | exit |" % a.runs)
    print("|---|---|---|---|")
    for k, v in results["warm"].items():
        print("| %s | %s | %s | %s |" % (k, ms(v["wall_median"]), ms(v["cpu_median"]), ",".join(map(str, v["exit"]))))
    print("(kiln's warm runs that were probe-cache hits: %d of %d)" % (hits, a.runs))
    print("\n| new target right after a full doctor | wall | probe cache | interpreters started |")
    print("|---|---|---|---|")
    for t, v in subsets.items():
        extra = " (baseline: %s)" % s(v["baseline_wall"]) if "baseline_wall" in v else ""
        print("| doctor %s | %s%s | %s | %s |" % (t, ms(v["wall"]), extra, v["probe_cache"], v["interpreters"]))
    c = results["cold"]
    if "cold" not in sections:
        return write(a, results)
    print("\n| cold (%s), %d runs | wall (median) | runs |" % (" ".join(cold_targets) or "every recipe", a.cold_runs))
    print("|---|---|---|")
    print("| kiln doctor (empty cache, %s interpreters) | %s | %s (CPU %s) |" % (c["interpreters"], s(c["kiln_wall_median"]), ", ".join(s(x) for x in c["kiln_wall_runs"]), s(c["kiln_cpu_median"])))
    if a.baseline:
        print("| baseline kiln doctor | %s | %s |" % (s(med(c["baseline_wall_runs"])), ", ".join(s(x) for x in c["baseline_wall_runs"])))
    print("| slowest component alone (%s) | %s | |" % (slowest, s(c["slowest_median"])))
    print("| sum of the components alone | %s | (CPU %s) |" % (s(c["sum_of_alone"]), s(sum(c["alone_cpu_median"].values()))))
    for u, v in sorted(per.items(), key=lambda x: -x[1]):
        print("|   %s alone (%s) | %s | |" % (u, ", ".join(units[u]), s(v)))
    write(a, results)


def write(a, results):
    if a.out:
        with open(a.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
