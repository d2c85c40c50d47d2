#!/usr/bin/env python3
"""One run of bench.py's N packages by one kiln binary, as a timeline: each event of the run's
events.jsonl and each package's build_wheel hook, in seconds since kiln was started, then the
wall time. Shows where a run's time goes beside the builds themselves.

usage: timeline.py KILN N [--uv UV] [--cpus P]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kiln")
    ap.add_argument("n", type=int)
    ap.add_argument("--uv")
    ap.add_argument("--cpus", type=int, default=os.cpu_count())
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="kiln-timeline-")
    bench.make_world(root, a.n)
    bench.run_once(a.kiln, root, 1, a.uv, a.cpus)  # warm pip's and uv's caches
    venv = os.path.join(root, "venv")
    subprocess.run([bench.PY, "-m", "venv", venv], check=True)
    cache = os.path.join(root, "cache")
    if a.uv:
        tools = os.path.join(cache, "tools", os.path.basename(os.path.dirname(a.uv)))
        os.makedirs(tools)
        os.symlink(a.uv, os.path.join(tools, "uv"))
    argv = [a.kiln, "--recipes", os.path.join(root, "recipes"), "--python", os.path.join(venv, "bin", "python"),
            "--cache-dir", cache, "--no-progress", "install", "--json", "--jobs", "1"]
    argv += [f"bench-{i}" for i in range(a.n)]
    start = time.time()
    out = subprocess.run(argv, env=dict(os.environ, KILN_CPUS=str(a.cpus)), capture_output=True, text=True)
    wall = time.time() - start
    logs = os.path.join(cache, "logs")
    run_dir = os.path.join(logs, os.listdir(logs)[0])
    rows = []
    for line in open(os.path.join(run_dir, "events.jsonl")):
        e = json.loads(line)
        rows.append((e["t"], f"event {e.get('step')} {e.get('kind')} {e.get('phase', '')} {(e.get('detail') or '')[:50]}"))
    # events.jsonl counts from the run's start; the hooks print wall-clock times.
    hooks = []
    for i in range(a.n):
        text = open(os.path.join(run_dir, f"bench-{i}.wheel.log")).read()
        s, e = map(float, re.findall(r"KILN_BENCH_BUILD (\S+) (\S+)", text)[-1])
        hooks.append((s - start, e - start))
    for t, what in rows:
        print(f"{t:7.3f} (run clock) {what}")
    for i, (s, e) in enumerate(hooks):
        print(f"hook bench-{i}: {s:.3f} -> {e:.3f} (since kiln started)")
    print(f"first hook starts {min(s for s, _ in hooks):.3f}, last ends {max(e for _, e in hooks):.3f}, "
          f"wall {wall:.3f}, exit {out.returncode}")


if __name__ == "__main__":
    main()
