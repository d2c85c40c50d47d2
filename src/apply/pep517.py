"""kiln's PEP 517 front end: builds one wheel by calling the build backend's build_wheel hook
once, in this interpreter, as `pip wheel --no-build-isolation` would but without asking for the
metadata first (https://peps.python.org/pep-0517/#build-wheel: the metadata hook is optional,
and for a setup.py it runs the whole script a second time).

usage: python kiln_build_wheel.py WHEEL_DIR SRC [-C KEY=VALUE ...]

The backend comes from SRC/pyproject.toml's [build-system] (build-backend, backend-path), else
setuptools' legacy backend (PEP 517's fallback); it runs in SRC with this interpreter's path
(the environment's packages and the build requirements on PYTHONPATH), and whatever it prints
reaches kiln's step log as it comes. -C passes config settings as pip's --config-settings does.
"""

import importlib
import os
import sys


def _toml(path):
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        try:
            import tomli as tomllib
        except ImportError:
            from pip._vendor import tomli as tomllib
    with open(path, "rb") as f:
        return tomllib.load(f)


def backend(src):
    pyproject = os.path.join(src, "pyproject.toml")
    system = _toml(pyproject).get("build-system", {}) if os.path.exists(pyproject) else {}
    name = system.get("build-backend") or "setuptools.build_meta:__legacy__"
    for p in reversed(system.get("backend-path", [])):
        sys.path.insert(0, os.path.abspath(os.path.join(src, p)))
    module, _, attrs = name.partition(":")
    obj = importlib.import_module(module.strip())
    for a in filter(None, attrs.strip().split(".")):
        obj = getattr(obj, a)
    return obj


def config_settings(args):
    settings = {}
    it = iter(args)
    for a in it:
        if a in ("-C", "--config-settings"):
            a = next(it, "")
        elif a.startswith("--config-settings="):
            a = a.split("=", 1)[1]
        else:
            sys.exit("kiln_build_wheel.py: unexpected argument %r" % a)
        key, _, value = a.partition("=")
        old = settings.get(key)
        settings[key] = value if old is None else (old if isinstance(old, list) else [old]) + [value]
    return settings or None


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    # Line by line into the log, in the order things happen (a pipe is block-buffered).
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(line_buffering=True)
    out, src = (os.path.abspath(a) for a in sys.argv[1:3])
    settings = config_settings(sys.argv[3:])
    # This script's directory is not the project's: the backend sees the path pip's hook
    # runner gives it.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    os.chdir(src)
    os.makedirs(out, exist_ok=True)
    wheel = backend(src).build_wheel(out, settings)
    print("kiln: built %s" % os.path.join(out, wheel))


if __name__ == "__main__":
    main()
