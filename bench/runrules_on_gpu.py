"""On a machine with a GPU: load fatbins with the CUDA driver (cuModuleLoadData) and compare the
result with `kiln arch --arch <device CC>`'s verdict. usage: python3 runrules_on_gpu.py KILN FILE..."""
import ctypes
import json
import subprocess
import sys

cuda = ctypes.CDLL("libcuda.so.1")
assert cuda.cuInit(0) == 0
dev = ctypes.c_int()
assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
major, minor = ctypes.c_int(), ctypes.c_int()
cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, dev)
cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev)
ctx = ctypes.c_void_p()
assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
assert cuda.cuCtxSetCurrent(ctx) == 0
arch = "%d.%d" % (major.value, minor.value)
bad = 0
for path in sys.argv[2:]:
    data = open(path, "rb").read()
    mod = ctypes.c_void_p()
    rc = cuda.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(data))
    if rc == 0:
        cuda.cuModuleUnload(mod)
    out = subprocess.run([sys.argv[1], "arch", "--json", "--arch", arch, path], capture_output=True, text=True).stdout
    f = json.loads(out)["files"][0]
    usable = f["runs_on"][0]["usable"]
    same = usable == (rc == 0)
    bad += not same
    print("%s %s driver=%d kiln=%s (%s)" % ("SAME" if same else "DIFF", path, rc, usable, f["runs_on"][0]["why"]))
print("%d files, %d disagree, device %s" % (len(sys.argv) - 2, bad, arch))
