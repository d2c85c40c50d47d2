// Bench only: the extension's Python module (the kernel units beside it need no flash_api.cpp).
#include <Python.h>

static PyObject *units(PyObject *, PyObject *) { return PyUnicode_FromString("flash-attn 2.8.3.post2 kernel units"); }

static PyMethodDef methods[] = {{"units", units, METH_NOARGS, "what the extension holds"}, {nullptr, nullptr, 0, nullptr}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, methods};

PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&module); }
