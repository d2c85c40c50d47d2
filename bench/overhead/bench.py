#!/usr/bin/env python3
"""kiln's overhead around builds (issue 11, item 7): N independent tiny packages, each a C
extension whose one translation unit takes ~4 s to compile, installed by `kiln install --jobs 1`
with two kiln binaries side by side in one run (interleaved, each repeated), against the ideal
schedule of the compile steps.

usage: bench.py --kiln before=PATH --kiln after=PATH [--n 2 --n 4] [--repeat 3] [--out DIR]

Each package's setup.py times its own compile (the build_ext of its one extension) and prints
`KILN_BENCH_COMPILE <start> <end>` into the step log. The ideal for a run is the makespan of
those measured compile durations, scheduled longest first on P = the CPUs kiln sees (each build
runs one job), i.e. the critical path of the compile steps given the CPUs; the ratio is kiln's
wall time (the whole `kiln install`, from start to exit, fetch/build requirements/install/verify
included) over that ideal. A second ideal takes the whole build_wheel hook of each package
(setuptools' own work around the compile, timed by an in-tree backend wrapping setuptools') in
place of the compile alone: the ratio to it is what kiln adds to the builds themselves. Every run starts from a fresh venv (Python 3.12: no setuptools in
it, so the build requirement `setuptools>=68` goes into kiln's overlay) and a fresh kiln cache
(no wheel-cache hits); pip's and uv's own caches stay warm (a warm-up run per binary first), and
kiln's uv is linked into each fresh cache (as after kiln's first run brought it), so the
download of uv itself is not timed.
"""

import argparse
import heapq
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

PY = os.environ.get("BENCH_PYTHON", "/root/.pyenv/versions/3.12.1/bin/python3")
FUNCS = int(os.environ.get("BENCH_FUNCS", "600"))

SETUP = '''import time
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class timed(build_ext):
    def build_extension(self, ext):
        start = time.time()
        super().build_extension(ext)
        print("KILN_BENCH_COMPILE %f %f" % (start, time.time()), flush=True)


setup(cmdclass={"build_ext": timed}, ext_modules=[Extension("kiln_bench_{i}._work", ["kiln_bench_{i}/_work.c"])])
'''

PYPROJECT = '''[build-system]
requires = ["setuptools>=68"]
build-backend = "timed_backend"
backend-path = ["."]

[project]
name = "kiln-bench-{i}"
version = "1.0.0"

[tool.setuptools]
packages = ["kiln_bench_{i}"]
'''

# setuptools' own backend, timed: the whole build_wheel hook (setuptools' egg_info, build_py,
# build_ext, bdist_wheel), the part of a build no front end can take away.
BACKEND = '''import time
from setuptools import build_meta as _b
from setuptools.build_meta import *  # noqa: F401,F403


def build_wheel(*args, **kwargs):
    start = time.time()
    try:
        return _b.build_wheel(*args, **kwargs)
    finally:
        print("KILN_BENCH_BUILD %f %f" % (start, time.time()), flush=True)
'''

RECIPE = '''[package]
name = "bench-{i}"
dist = "kiln-bench-{i}"
version = "1.0.0"
summary = "benchmark: one C extension with a ~4 s compile"

[source]
path = "../packages/kiln-bench-{i}"

[build]
requires = ["setuptools>=68"]

[verify]
imports = ["kiln_bench_{i}", "kiln_bench_{i}._work"]
'''


def work_c(i):
    """A translation unit gcc -O2 takes a few seconds on (FUNCS functions); its module
    exports total()."""
    out = ["#include <Python.h>"]
    for k in range(FUNCS):
        out.append(
            f"static long f{k}(long x){{long s=0;for(long j=0;j<x;j++){{s+=(j*{k + 3 + i})^(s>>{k % 7 + 1});"
            f"if(s%{k + 11}==3)s-=j;}}return s;}}"
        )
    out.append("static PyObject* total(PyObject* self, PyObject* arg){long x=PyLong_AsLong(arg);long s=0;")
    out += [f"s+=f{k}(x+{k});" for k in range(FUNCS)]
    out.append("return PyLong_FromLong(s);}")
    out.append('static PyMethodDef m[]={{"total",total,METH_O,""},{0}};')
    out.append(f'static struct PyModuleDef d={{PyModuleDef_HEAD_INIT,"_work",0,-1,m}};')
    out.append("PyMODINIT_FUNC PyInit__work(void){return PyModule_Create(&d);}")
    return "\n".join(out) + "\n"


def make_world(root, n):
    for i in range(n):
        pkg = os.path.join(root, "packages", f"kiln-bench-{i}")
        os.makedirs(os.path.join(pkg, f"kiln_bench_{i}"), exist_ok=True)
        open(os.path.join(pkg, "setup.py"), "w").write(SETUP.replace("{i}", str(i)))
        open(os.path.join(pkg, "pyproject.toml"), "w").write(PYPROJECT.replace("{i}", str(i)))
        open(os.path.join(pkg, "timed_backend.py"), "w").write(BACKEND)
        open(os.path.join(pkg, f"kiln_bench_{i}", "__init__.py"), "w").write("")
        open(os.path.join(pkg, f"kiln_bench_{i}", "_work.c"), "w").write(work_c(i))
        os.makedirs(os.path.join(root, "recipes"), exist_ok=True)
        open(os.path.join(root, "recipes", f"bench-{i}.toml"), "w").write(RECIPE.replace("{i}", str(i)))


def ideal(durations, cpus):
    """Makespan of the durations, longest first, each on the CPU that frees first."""
    slots = [0.0] * max(1, min(cpus, len(durations)))
    for d in sorted(durations, reverse=True):
        heapq.heapreplace(slots, slots[0] + d)
    return max(slots)


def run_once(kiln, root, n, uv, cpus):
    with tempfile.TemporaryDirectory(dir=root) as scratch:
        venv = os.path.join(scratch, "venv")
        subprocess.run([PY, "-m", "venv", venv], check=True)
        cache = os.path.join(scratch, "cache")
        if uv:
            tools = os.path.join(cache, "tools", os.path.basename(os.path.dirname(uv)))
            os.makedirs(tools)
            os.symlink(uv, os.path.join(tools, "uv"))
        env = dict(os.environ, KILN_CPUS=str(cpus))
        argv = [kiln, "--recipes", os.path.join(root, "recipes"), "--python", os.path.join(venv, "bin", "python"),
                "--cache-dir", cache, "--no-progress", "install", "--json", "--jobs", "1"]
        argv += [f"bench-{i}" for i in range(n)]
        start = time.monotonic()
        out = subprocess.run(argv, env=env, capture_output=True, text=True)
        wall = time.monotonic() - start
        if out.returncode != 0:
            sys.exit(f"{kiln} failed:\n{out.stderr[-3000:]}")
        compiles, builds = [], []
        logs = os.path.join(cache, "logs")
        run_dir = os.path.join(logs, os.listdir(logs)[0])
        for i in range(n):
            text = open(os.path.join(run_dir, f"bench-{i}.wheel.log")).read()
            s, e = map(float, re.findall(r"KILN_BENCH_COMPILE (\S+) (\S+)", text)[-1])
            compiles.append(e - s)
            s, e = map(float, re.findall(r"KILN_BENCH_BUILD (\S+) (\S+)", text)[-1])
            builds.append(e - s)
        phases = {}
        events = [json.loads(l) for l in open(os.path.join(run_dir, "events.jsonl"))]
        for i in range(n):
            mine = [e for e in events if e["step"] == f"bench-{i}" and e["kind"] in ("phase", "finished")]
            for a, b in zip(mine, mine[1:]):
                phases.setdefault(a["phase"], []).append(b["t"] - a["t"])
        return wall, compiles, builds, phases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", action="append", required=True, help="NAME=PATH")
    ap.add_argument("--n", action="append", type=int)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cpus", type=int, default=os.cpu_count())
    ap.add_argument("--uv", help="kiln's uv binary, linked into each fresh cache")
    ap.add_argument("--out", default=tempfile.gettempdir())
    a = ap.parse_args()
    kilns = [k.split("=", 1) for k in a.kiln]
    ns = a.n or [2, 4]
    root = tempfile.mkdtemp(prefix="kiln-bench-", dir=a.out)
    make_world(root, max(ns))
    for name, k in kilns:  # warm pip's and uv's caches
        run_once(k, root, 1, a.uv, a.cpus)
    rows = []
    for n in ns:
        for r in range(a.repeat):
            for name, k in kilns:
                wall, compiles, builds, phases = run_once(k, root, n, a.uv, a.cpus)
                best = ideal(compiles, a.cpus)
                whole = ideal(builds, a.cpus)
                row = {"kiln": name, "n": n, "run": r, "wall": wall, "ideal": best, "ratio": wall / best,
                       "ideal_builds": whole, "ratio_builds": wall / whole,
                       "compiles": compiles, "builds": builds, "phases": {p: sum(v) / len(v) for p, v in phases.items()},
                       "load": os.getloadavg()[0]}
                rows.append(row)
                print(json.dumps(row), flush=True)
    print()
    print(f"| kiln | N | wall s (median of {a.repeat}) | ideal s | ratio (median) | ratios | ideal of whole backend builds s | ratio to it (median) | mean s per build: build-requires / wheel / install / verify |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in ns:
        for name, _ in kilns:
            mine = [r for r in rows if r["n"] == n and r["kiln"] == name]
            ph = lambda p: statistics.mean(r["phases"].get(p, 0.0) for r in mine)
            print(f"| {name} | {n} | {statistics.median(r['wall'] for r in mine):.1f} | "
                  f"{statistics.median(r['ideal'] for r in mine):.1f} | {statistics.median(r['ratio'] for r in mine):.2f} | "
                  f"{', '.join('%.2f' % r['ratio'] for r in mine)} | "
                  f"{statistics.median(r['ideal_builds'] for r in mine):.1f} | {statistics.median(r['ratio_builds'] for r in mine):.2f} | "
                  f"{ph('build-requires'):.2f} / {ph('wheel'):.2f} / {ph('install'):.2f} / {ph('verify'):.2f} |")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
