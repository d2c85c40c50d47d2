"""Compare `kiln arch --json` with `cuobjdump` (the plain listing, which keeps a/f variants) on
every file given; print one line per file and a summary. Exit 1 on any disagreement.

usage: python3 compare_cuobjdump.py KILN CUOBJDUMP FILE...
"""
import json
import re
import subprocess
import sys
import time


def cubin_images(tool, path):
    """A bare cubin (what the CuTe DSL keeps) has no fatbin listing: `cuobjdump --list-elf` names
    its one ELF image after its arch (`NAME.sm_120a.cubin`)."""
    out = subprocess.run([tool, "--list-elf", path], capture_output=True, text=True).stdout
    return set(re.findall(r"\.(sm_\d+[af]?)\.cubin$", out, flags=re.M))


def cuobjdump_images(tool, path):
    with open(path, "rb") as f:
        head = f.read(4)
    out = subprocess.run([tool, path], capture_output=True, text=True).stdout
    if head == b"\x7fELF" and "Fatbin" not in out and path.endswith(".cubin"):
        return cubin_images(tool, path)
    images, kind = set(), None
    for line in out.splitlines():
        line = line.strip()
        if line == "Fatbin elf code:":
            kind = "elf"
        elif line == "Fatbin ptx code:":
            kind = "ptx"
        elif line.startswith("Fatbin "):
            kind = None
        elif line.startswith("arch = ") and kind:
            arch = line[len("arch = "):]
            images.add(arch if kind == "elf" else arch.replace("sm_", "compute_"))
    return images


def main():
    kiln, tool, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    bad = 0
    for path in files:
        t0 = time.perf_counter()
        r = subprocess.run([kiln, "arch", "--json", path], capture_output=True, text=True)
        t1 = time.perf_counter()
        theirs = cuobjdump_images(tool, path)
        t2 = time.perf_counter()
        try:
            f = json.loads(r.stdout)["files"][0]
            ours = set(f["sass"]) | set(f["ptx"])
        except Exception as e:
            ours = {"<error %s: %s>" % (e, r.stderr.strip()[:200])}
        same = ours == theirs
        bad += not same
        print("%s %s kiln=%.0fms cuobjdump=%.0fms images=%d%s" % (
            "SAME" if same else "DIFF", path, (t1 - t0) * 1e3, (t2 - t1) * 1e3, len(theirs),
            "" if same else " kiln-only=%s cuobjdump-only=%s" % (sorted(ours - theirs), sorted(theirs - ours))))
    print("%d files, %d disagree" % (len(files), bad))
    sys.exit(1 if bad else 0)


main()
