"""Arch narrowing, measured: one real translation unit compiled with the exact compiler command of
its build, once per arch list, all variants side by side on the same machine; prints wall time,
peak RSS (of nvcc and the cicc/ptxas it waits for: os.wait4's rusage) and the images kiln reads
from each object.

usage: python3 narrowing.py KILN (--ninja BUILD.NINJA | --compdb compile_commands.json) UNIT \
           NAME=GENCODES [NAME=GENCODES ...]
GENCODES is a ';'-separated list of `arch=compute_X,code=Y` (each becomes `-gencode ARG`).
--ninja reads torch cpp_extension's build.ninja (flash-attn); --compdb CMake's compilation
database (vLLM). Every -gencode/-arch flag of the original command is replaced by the variant's.
"""
import json
import os
import re
import shlex
import subprocess
import sys
import time


def from_ninja(path, unit):
    text = open(path).read()
    var = dict(re.findall(r"^(\w+) = (.*)$", text, flags=re.M))
    for line in text.splitlines():
        m = re.match(r"build (\S+): cuda_compile (\S+)", line)
        if m and m.group(2).endswith(unit):
            src = m.group(2)
            cflags = shlex.split(var.get("cuda_cflags", ""))
            cmd = [var["nvcc"], *cflags, *([] if "-c" in cflags else ["-c"]), src,
                   *shlex.split(var.get("cuda_post_cflags", ""))]
            return cmd, os.path.dirname(path)
    sys.exit(f"{unit}: no cuda_compile edge in {path}")


def from_compdb(path, unit):
    for e in json.load(open(path)):
        if e["file"].endswith(unit):
            cmd = e.get("arguments") or shlex.split(e["command"])
            return cmd, e["directory"]
    sys.exit(f"{unit}: not in {path}")


def strip_archs(cmd):
    out, skip = [], False
    for a in cmd:
        if skip:
            skip = False
            continue
        if a in ("-gencode", "-o", "-MF", "--dependency-output", "-arch"):
            skip = True
            continue
        if a.startswith(("-gencode=", "--generate-code=", "-arch=", "--generate-dependencies-with-compile", "-MD", "-MMD")):
            continue
        if a.startswith("-o") and len(a) > 2:
            continue
        out.append(a)
    return out


def main():
    kiln, mode, db, unit, *variants = sys.argv[1:]
    cmd, cwd = (from_ninja if mode == "--ninja" else from_compdb)(db, unit)
    base = strip_archs(cmd)
    os.makedirs("/tmp/narrow", exist_ok=True)
    procs = {}
    for v in variants:
        name, gencodes = v.split("=", 1)
        flags = [f for g in gencodes.split(";") for f in ("-gencode", g)]
        obj = f"/tmp/narrow/{name}.o"
        argv = [*base, *flags, "-o", obj]
        log = open(f"/tmp/narrow/{name}.log", "w")
        procs[name] = (subprocess.Popen(argv, cwd=cwd, stdout=log, stderr=subprocess.STDOUT), time.time(), obj, gencodes)
    print(f"unit {unit}; {len(procs)} variants side by side; {os.cpu_count()} CPUs")
    results = {}
    while procs:
        pid, status, ru = os.wait4(-1, 0)
        for name, (p, start, obj, gencodes) in list(procs.items()):
            if p.pid == pid:
                wall = time.time() - start
                rc = os.waitstatus_to_exitcode(status)
                arch = subprocess.run([kiln, "arch", obj], capture_output=True, text=True).stdout.strip().splitlines()[1:2] if rc == 0 else []
                results[name] = {"gencodes": gencodes, "exit": rc, "wall_s": round(wall, 1),
                                 "cpu_s": round(ru.ru_utime + ru.ru_stime, 1),
                                 "peak_rss_mib": ru.ru_maxrss // 1024,
                                 "object_kib": os.path.getsize(obj) // 1024 if rc == 0 else None,
                                 "kiln_arch": arch}
                print(json.dumps({"variant": name, **results[name]}), flush=True)
                if rc != 0:
                    print(open(f"/tmp/narrow/{name}.log").read()[-2000:])
                del procs[name]
    return 0 if all(r["exit"] == 0 for r in results.values()) else 1


sys.exit(main())
