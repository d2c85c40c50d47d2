# kiln's interpreter probe. Run as `python -I -B -c <this>` with a JSON request on stdin:
#   {"imports": ["torch", "flashinfer", ...], "dists": true}
# ("dists": false leaves the distribution list out: kiln probes the imports of each component in
# an interpreter of its own and lists the distributions once, in another.)
# Prints JSON lines on stdout: {"start": module} before each import, {"result": module, "outcome":
# ...} after it (whether it ran, with the exact exception text when it did not), and last
# {"final": ...} with the interpreter, every installed distribution and torch's ABI facts.
# Standard library only; works on Python 3.8+.
import json
import os
import stat
import sys
import time
import traceback


def read_record(info):
    """kiln.json in a dist-info directory, read as kiln reads its state files (src/state.rs):
    a regular file of at most 1 MiB, opened without blocking; (record, None) or (None, why)."""
    if info is None:
        return None, None
    p = os.path.join(str(info), "kiln.json")
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return None, None
    except OSError as e:
        return None, f"cannot open it: {e}"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, "it is not a regular file"
        if st.st_size > 1 << 20:
            return None, f"it is {st.st_size} bytes, over the 1048576-byte limit"
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read((1 << 20) + 1)
    finally:
        os.close(fd)
    try:
        return json.loads(data.decode("utf-8")), None
    except Exception as e:
        return None, f"not JSON: {e}"


def dists():
    try:
        from importlib import metadata
    except ImportError:  # pragma: no cover
        return []
    out = {}
    for d in metadata.distributions():
        try:
            name = d.metadata["Name"]
        except Exception:
            name = None
        if not name:
            continue
        key = name.lower().replace("_", "-").replace(".", "-")
        path = getattr(d, "_path", None)
        direct_url = None
        try:
            text = d.read_text("direct_url.json")
            if text:
                direct_url = json.loads(text)
        except Exception:
            pass
        try:
            requires = list(d.requires or [])
        except Exception:
            requires = []
        record, unreadable = read_record(path)
        # The first distribution on sys.path wins, as it does for imports.
        out.setdefault(
            key,
            {
                "name": name,
                "version": d.version,
                "dist_info": str(path) if path else None,
                "location": str(path.parent) if path else None,
                "direct_url": direct_url,
                "requires": requires,
                "installer": (d.read_text("INSTALLER") or "").strip() or None,
                "kiln": record,
                "kiln_unreadable": unreadable,
            },
        )
    return list(out.values())


def loaded(seen, skip, keep):
    """The files loaded since the last call (module sources, shared objects mapped), the
    interpreter's own (under `skip`, the standard library, unless under `keep`, the site
    directories) left out. kiln stamps a component's imports by these files."""
    new = []
    for m in list(sys.modules.values()):
        try:
            f = getattr(m, "__file__", None)
        except Exception:
            f = None
        if isinstance(f, str) and f not in seen:
            seen.add(f)
            new.append(f)
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                i = line.find("/")
                if i > 0:
                    f = line[i:].rstrip("\n")
                    if f not in seen and not f.endswith(" (deleted)"):
                        seen.add(f)
                        new.append(f)
    except OSError:
        pass
    return [f for f in new if f.startswith(keep) or not f.startswith(skip)]


def try_import(name):
    start = time.perf_counter()
    try:
        __import__(name)
        mod = sys.modules.get(name)
        return {
            "ok": True,
            "error": None,
            "file": getattr(mod, "__file__", None),
            "seconds": round(time.perf_counter() - start, 4),
        }
    except BaseException as e:  # SystemExit and friends count as failures too
        tb = traceback.format_exception(type(e), e, e.__traceback__)
        imp = isinstance(e, ImportError)
        # The files the failing import ran through (they left sys.modules with it), and the
        # directories of the packages it looked in: a module that was not found appears there.
        files = [f.filename for f in traceback.extract_tb(e.__traceback__) if not f.filename.startswith("<")]
        path = getattr(e, "path", None) if imp else None
        missing = getattr(e, "name", None) if imp else None
        for full in (name, missing if isinstance(missing, str) else ""):
            parts = full.split(".")
            for i in range(1, len(parts)):
                try:
                    files += [str(d) for d in getattr(sys.modules.get(".".join(parts[:i])), "__path__", [])]
                except Exception:
                    pass
        return {
            "ok": False,
            "error": "".join(traceback.format_exception_only(type(e), e)).strip(),
            # What an ImportError names: the module not found or not loaded, the file it tried.
            "error_module": getattr(e, "name", None) if imp else None,
            "error_file": path,
            "traceback": "".join(tb[-6:]),
            "seconds": round(time.perf_counter() - start, 4),
            "failed_in": files + ([path] if isinstance(path, str) else []),
        }


def torch_facts():
    """What decides the ABI of an extension built against torch (only if torch was imported)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    facts = {"version": getattr(torch, "__version__", None)}
    version = getattr(torch, "version", None)
    facts["cuda"] = getattr(version, "cuda", None)
    facts["git_version"] = getattr(version, "git_version", None)
    c = getattr(torch, "_C", None)
    facts["cxx11_abi"] = getattr(c, "_GLIBCXX_USE_CXX11_ABI", None)
    try:
        flags = c._cuda_getArchFlags() if c is not None and hasattr(c, "_cuda_getArchFlags") else None
        facts["arch_list"] = flags.split() if flags else []
    except Exception as e:
        facts["arch_list"] = None
        facts["arch_list_error"] = str(e)
    return facts


def markers():
    # The PEP 508 environment markers, computed as the specification says.
    import platform

    def implementation_version():
        info = sys.implementation.version
        v = "%d.%d.%d" % info[:3]
        if info.releaselevel != "final":
            v += info.releaselevel[0] + str(info.serial)
        return v

    return {
        "implementation_name": sys.implementation.name,
        "implementation_version": implementation_version(),
        "os_name": os.name,
        "platform_machine": platform.machine(),
        "platform_python_implementation": platform.python_implementation(),
        "platform_release": platform.release(),
        "platform_system": platform.system(),
        "platform_version": platform.version(),
        "python_full_version": platform.python_version(),
        "python_version": ".".join(platform.python_version_tuple()[:2]),
        "sys_platform": sys.platform,
    }


def wheel_tags():
    # The wheel tags this interpreter supports, best first, as pip computes them (kiln never
    # re-implements the tag rules); empty when neither packaging nor pip is importable.
    try:
        try:
            from packaging.tags import sys_tags
        except ImportError:
            from pip._vendor.packaging.tags import sys_tags
        return [str(t) for t in sys_tags()]
    except Exception:
        return []


def main():
    request = json.loads(sys.stdin.read() or "{}")
    # Keep the JSON channel clean: anything a module prints goes to stderr.
    real_stdout = sys.stdout
    sys.stdout = sys.stderr

    def say(obj):
        # One JSON object per line, flushed, so kiln can tell which import hangs or crashes.
        real_stdout.write(json.dumps(obj) + "\n")
        real_stdout.flush()

    paths = {}
    try:
        import sysconfig

        paths = {k: sysconfig.get_paths().get(k) for k in ("purelib", "platlib", "scripts")}
    except Exception:
        pass
    result = {
        "python": {
            "markers": markers(),
            "executable": sys.executable,
            "version": "%d.%d.%d" % sys.version_info[:3],
            "implementation": sys.implementation.name,
            "prefix": sys.prefix,
            "base_prefix": getattr(sys, "base_prefix", sys.prefix),
            "paths": paths,
            "cwd": os.getcwd(),
            "tags": wheel_tags() if request.get("dists", True) else [],
        },
        "dists": dists() if request.get("dists", True) else [],
        "imports": {},
    }
    # The standard library goes with the interpreter; a venv's platstdlib holds site-packages.
    skip, keep = (), ()
    try:
        import sysconfig

        p = sysconfig.get_paths()
        skip = tuple(p[k] + os.sep for k in ("stdlib", "platstdlib"))
        keep = tuple(p[k] + os.sep for k in ("purelib", "platlib"))
    except Exception:
        pass
    seen = set()
    loaded(seen, skip, keep)
    for name in request.get("imports", []):
        say({"start": name})
        outcome = try_import(name)
        outcome["loaded"] = loaded(seen, skip, keep) + outcome.pop("failed_in", [])
        say({"result": name, "outcome": outcome})
    result["torch"] = torch_facts()
    say({"final": result})


main()
