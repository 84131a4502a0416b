/* Compiled dispatch for the eager fast paths of the elementwise wrappers (funclib/primitives/fastpath.py).

A FastOp wraps one public wrapper (a Python function, the one definition of the operation's semantics) and the
NumPy function it calls on its fast path. Called with exactly-Tensor operands of the dtypes the wrapper takes
fast (or a Tensor and a Python float/int where the wrapper takes that fast), it calls the NumPy function and
wraps the result in a new Tensor, as the wrapper's own fast path does; in every other case (tracers, other
types, dtypes, keywords, a NumPy ValueError) it calls the wrapper. It knows nothing of tracing beyond "is this
exactly a Tensor".

FastOp has Py_TPFLAGS_METHOD_DESCRIPTOR, so installed as Tensor.__add__ it is called as op(self, other) by the
type's slot and by x.sin() without a bound method being made; __get__ gives a bound method otherwise. Only the
CPython C API is used, with no NumPy headers: NumPy is reached through Python calls, and an array's dtype read from
the head of its struct where configure() found that to agree with the .dtype attribute (ArrayHead, below).
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#define MAX_DTYPES 24

/* Dtypes one case takes fast, compared by identity; an int scalar must lie in [lo, hi] unless unbounded. */
typedef struct {
    int n;
    PyObject *dtype[MAX_DTYPES];
    long long lo[MAX_DTYPES];
    long long hi[MAX_DTYPES];
    char bounded[MAX_DTYPES];
} DtypeSet;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *wrapper; /* the Python function: every case the fast path does not take */
    PyObject *fn;      /* the NumPy function of the fast path */
    int arity;
    int swapped;       /* a reflected operator: op(self, other) computes fn(other, self) */
    DtypeSet same;     /* Tensor, Tensor of one dtype (unary: the Tensor's dtype) */
    DtypeSet flt;      /* Tensor, float */
    DtypeSet intg;     /* Tensor, int */
    DtypeSet first_flt; /* float, Tensor */
    DtypeSet first_int; /* int, Tensor */
    PyObject *sets;    /* the Python objects the sets were read from, kept alive with their dtypes */
} FastOp;

/* The head of NumPy's array struct (PyArrayObject_fields in numpy/ndarraytypes.h, unchanged since NumPy 1.7 as
   its C ABI requires). configure() checks `descr` against `.dtype` on sample arrays; where they ever disagree the
   dtype is read through the attribute instead. */
typedef struct {
    PyObject_HEAD
    char *data;
    int nd;
    Py_ssize_t *dimensions;
    Py_ssize_t *strides;
    PyObject *base;
    PyObject *descr;
} ArrayHead;

/* Set once by configure(): the Tensor class, its _value slot, NumPy's ndarray and asarray. */
static PyTypeObject *tensor_type = NULL;
static Py_ssize_t value_offset = 0;
static PyTypeObject *ndarray_type = NULL;
static PyObject *asarray_fn = NULL;
static PyObject *str_dtype = NULL;
static int read_descr = 0; /* the dtype of an exact ndarray is read from its struct */

#define VALUE(t) (*(PyObject **)((char *)(t) + value_offset))

static int
dtype_index(const DtypeSet *s, PyObject *d)
{
    for (int i = 0; i < s->n; i++)
        if (s->dtype[i] == d)
            return i;
    return -1;
}

/* The dtype of a Tensor's array (borrowed: the array holds it), or NULL with no error set to decline. */
static PyObject *
value_dtype(PyObject *value)
{
    if (read_descr && Py_TYPE(value) == ndarray_type)
        return ((ArrayHead *)value)->descr;
    PyObject *d = PyObject_GetAttr(value, str_dtype);
    if (d == NULL) {
        PyErr_Clear();
        return NULL;
    }
    Py_DECREF(d);
    return d;
}

static int
int_fits(const DtypeSet *s, int i, PyObject *v)
{
    if (!s->bounded[i])
        return 1;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0; /* out of long long: the wrapper decides */
    }
    return s->lo[i] <= x && x <= s->hi[i];
}

/* A Tensor around the result of the NumPy function (stolen), a 0-d NumPy scalar made an array first. */
static PyObject *
wrap(PyObject *r)
{
    if (Py_TYPE(r) != ndarray_type) {
        PyObject *a = PyObject_CallOneArg(asarray_fn, r);
        Py_DECREF(r);
        if (a == NULL)
            return NULL;
        r = a;
    }
    PyObject *t = tensor_type->tp_alloc(tensor_type, 0);
    if (t == NULL) {
        Py_DECREF(r);
        return NULL;
    }
    VALUE(t) = r;
    return t;
}

static PyObject *
fallback(FastOp *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return PyObject_Vectorcall(self->wrapper, args, nargsf, kwnames);
}

static PyObject *
unary_call(FastOp *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) == 1 && kwnames == NULL && Py_TYPE(args[0]) == tensor_type) {
        PyObject *a = VALUE(args[0]);
        if (a != NULL) {
            PyObject *d = value_dtype(a);
            if (d != NULL && dtype_index(&self->same, d) >= 0) {
                Py_INCREF(a); /* held for the call, as a Python local would hold it */
                PyObject *r = PyObject_Vectorcall(self->fn, &a, 1, NULL);
                Py_DECREF(a);
                return r == NULL ? NULL : wrap(r);
            }
        }
    }
    return fallback(self, args, nargsf, kwnames);
}

/* fn(operands[0], operands[1]) with both held for the call, as Python locals would hold them */
static PyObject *
call2(PyObject *fn, PyObject **operands)
{
    Py_INCREF(operands[0]);
    Py_INCREF(operands[1]);
    PyObject *r = PyObject_Vectorcall(fn, operands, 2, NULL);
    Py_DECREF(operands[0]);
    Py_DECREF(operands[1]);
    return r;
}

static PyObject *
binary_call(FastOp *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) != 2 || kwnames != NULL)
        return fallback(self, args, nargsf, kwnames);
    PyObject *x = args[self->swapped], *y = args[1 - self->swapped];
    PyObject *operands[2];
    int i;
    if (Py_TYPE(x) == tensor_type) {
        PyObject *a = VALUE(x), *d;
        if (a == NULL || (d = value_dtype(a)) == NULL)
            return fallback(self, args, nargsf, kwnames);
        operands[0] = a;
        if (Py_TYPE(y) == tensor_type) {
            PyObject *b = VALUE(y);
            if (b == NULL || value_dtype(b) != d || dtype_index(&self->same, d) < 0)
                return fallback(self, args, nargsf, kwnames);
            operands[1] = b;
            PyObject *r = call2(self->fn, operands);
            if (r == NULL) {
                if (!PyErr_ExceptionMatches(PyExc_ValueError))
                    return NULL;
                /* shapes that do not broadcast: the wrapper raises the error that names the operation */
                PyErr_Clear();
                return fallback(self, args, nargsf, kwnames);
            }
            return wrap(r);
        }
        if (PyFloat_CheckExact(y)) {
            if (dtype_index(&self->flt, d) < 0)
                return fallback(self, args, nargsf, kwnames);
        }
        else if (PyLong_CheckExact(y)) {
            if ((i = dtype_index(&self->intg, d)) < 0 || !int_fits(&self->intg, i, y))
                return fallback(self, args, nargsf, kwnames);
        }
        else
            return fallback(self, args, nargsf, kwnames);
        operands[1] = y;
    }
    else if (Py_TYPE(y) == tensor_type) {
        PyObject *b = VALUE(y), *d;
        if (b == NULL || (d = value_dtype(b)) == NULL)
            return fallback(self, args, nargsf, kwnames);
        if (PyFloat_CheckExact(x)) {
            if (dtype_index(&self->first_flt, d) < 0)
                return fallback(self, args, nargsf, kwnames);
        }
        else if (PyLong_CheckExact(x)) {
            if ((i = dtype_index(&self->first_int, d)) < 0 || !int_fits(&self->first_int, i, x))
                return fallback(self, args, nargsf, kwnames);
        }
        else
            return fallback(self, args, nargsf, kwnames);
        operands[0] = x;
        operands[1] = b;
    }
    else
        return fallback(self, args, nargsf, kwnames);
    PyObject *r = call2(self->fn, operands);
    return r == NULL ? NULL : wrap(r);
}

/* Reads a sequence of dtypes, or of (dtype, lo, hi) with None for an unbounded side, into s. */
static int
read_set(DtypeSet *s, PyObject *seq, const char *what)
{
    PyObject *items = PySequence_Fast(seq, what);
    if (items == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(items);
    if (n > MAX_DTYPES) {
        PyErr_Format(PyExc_ValueError, "FastOp: %s holds %zd dtypes, more than %d", what, n, MAX_DTYPES);
        Py_DECREF(items);
        return -1;
    }
    s->n = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *item = PySequence_Fast_GET_ITEM(items, k);
        s->lo[k] = 0;
        s->hi[k] = 0;
        s->bounded[k] = 0;
        if (PyTuple_Check(item)) {
            if (PyTuple_GET_SIZE(item) != 3) {
                PyErr_Format(PyExc_ValueError, "FastOp: %s takes dtypes or (dtype, lo, hi) triples", what);
                Py_DECREF(items);
                return -1;
            }
            PyObject *lo = PyTuple_GET_ITEM(item, 1), *hi = PyTuple_GET_ITEM(item, 2);
            if (lo != Py_None || hi != Py_None) {
                int olo = 0, ohi = 0;
                long long l = lo == Py_None ? LLONG_MIN : PyLong_AsLongLongAndOverflow(lo, &olo);
                long long h = hi == Py_None ? LLONG_MAX : PyLong_AsLongLongAndOverflow(hi, &ohi);
                if (PyErr_Occurred()) {
                    Py_DECREF(items);
                    return -1;
                }
                /* a bound beyond long long: the values past it overflow the conversion and take the wrapper */
                s->lo[k] = olo < 0 ? LLONG_MIN : l;
                s->hi[k] = ohi > 0 ? LLONG_MAX : h;
                s->bounded[k] = 1;
            }
            item = PyTuple_GET_ITEM(item, 0);
        }
        s->dtype[k] = item;
        s->n = (int)k + 1;
    }
    Py_DECREF(items);
    return 0;
}

static PyObject *
fastop_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"wrapper", "fn", "same", "flt", "intg", "first_flt", "first_int", "arity", NULL};
    PyObject *wrapper, *fn, *same, *flt = NULL, *intg = NULL, *first_flt = NULL, *first_int = NULL;
    int arity = 2;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO|OOOOi:FastOp", kwlist, &wrapper, &fn, &same, &flt, &intg,
                                     &first_flt, &first_int, &arity))
        return NULL;
    if (tensor_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "FastOp: call configure(Tensor, ndarray, asarray) first");
        return NULL;
    }
    if (arity != 1 && arity != 2) {
        PyErr_Format(PyExc_ValueError, "FastOp: arity must be 1 or 2, got %d", arity);
        return NULL;
    }
    if (!PyCallable_Check(wrapper) || !PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "FastOp: wrapper and fn must be callable");
        return NULL;
    }
    FastOp *self = (FastOp *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = (vectorcallfunc)(arity == 1 ? unary_call : binary_call);
    self->arity = arity;
    self->wrapper = Py_NewRef(wrapper);
    self->fn = Py_NewRef(fn);
    PyObject *empty = PyTuple_New(0);
    self->sets = PyTuple_Pack(5, same, flt ? flt : empty, intg ? intg : empty, first_flt ? first_flt : empty,
                              first_int ? first_int : empty);
    Py_DECREF(empty);
    if (self->sets == NULL || read_set(&self->same, PyTuple_GET_ITEM(self->sets, 0), "same") < 0
        || read_set(&self->flt, PyTuple_GET_ITEM(self->sets, 1), "flt") < 0
        || read_set(&self->intg, PyTuple_GET_ITEM(self->sets, 2), "intg") < 0
        || read_set(&self->first_flt, PyTuple_GET_ITEM(self->sets, 3), "first_flt") < 0
        || read_set(&self->first_int, PyTuple_GET_ITEM(self->sets, 4), "first_int") < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int
fastop_traverse(FastOp *self, visitproc visit, void *arg)
{
    Py_VISIT(self->wrapper);
    Py_VISIT(self->fn);
    Py_VISIT(self->sets);
    return 0;
}

/* After clear() (a cycle being collected) an op has no wrapper: a call raises instead of crashing. */
static PyObject *
cleared_call(FastOp *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyErr_SetString(PyExc_RuntimeError, "FastOp: called after the garbage collector cleared it");
    return NULL;
}

static int
fastop_clear(FastOp *self)
{
    self->vectorcall = (vectorcallfunc)cleared_call;
    Py_CLEAR(self->wrapper);
    Py_CLEAR(self->fn);
    Py_CLEAR(self->sets);
    self->same.n = self->flt.n = self->intg.n = self->first_flt.n = self->first_int.n = 0;
    return 0;
}

static void
fastop_dealloc(FastOp *self)
{
    PyObject_GC_UnTrack(self);
    fastop_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
fastop_descr_get(PyObject *self, PyObject *obj, PyObject *type)
{
    if (obj == NULL || obj == Py_None)
        return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyObject *
fastop_swapped(FastOp *self, PyObject *wrapper)
{
    if (!PyCallable_Check(wrapper)) {
        PyErr_SetString(PyExc_TypeError, "FastOp.swapped: the reflected wrapper must be callable");
        return NULL;
    }
    if (self->arity != 2 || self->fn == NULL) {
        PyErr_SetString(PyExc_TypeError, "FastOp.swapped: only a binary operation has a reflected form");
        return NULL;
    }
    FastOp *op = (FastOp *)Py_TYPE(self)->tp_alloc(Py_TYPE(self), 0);
    if (op == NULL)
        return NULL;
    op->vectorcall = self->vectorcall;
    op->arity = self->arity;
    op->swapped = !self->swapped;
    op->wrapper = Py_NewRef(wrapper);
    op->fn = Py_NewRef(self->fn);
    op->sets = Py_XNewRef(self->sets);
    op->same = self->same;
    op->flt = self->flt;
    op->intg = self->intg;
    op->first_flt = self->first_flt;
    op->first_int = self->first_int;
    return (PyObject *)op;
}

/* Pickled by reference, as a function is: the name under which its module holds it. */
static PyObject *
fastop_reduce(FastOp *self, PyObject *unused)
{
    return PyObject_GetAttrString(self->wrapper, "__qualname__");
}

static PyObject *
forward(FastOp *self, const char *name)
{
    if (self->wrapper == NULL) {
        PyErr_SetString(PyExc_AttributeError, name);
        return NULL;
    }
    return PyObject_GetAttrString(self->wrapper, name);
}

static int
forward_set(FastOp *self, PyObject *value, const char *name)
{
    if (self->wrapper == NULL) {
        PyErr_SetString(PyExc_AttributeError, name);
        return -1;
    }
    return PyObject_SetAttrString(self->wrapper, name, value);
}

#define FORWARDED(attr)                                                                                          \
    static PyObject *get_##attr(FastOp *self, void *c) { return forward(self, "__" #attr "__"); }                \
    static int set_##attr(FastOp *self, PyObject *v, void *c) { return forward_set(self, v, "__" #attr "__"); }

FORWARDED(name)
FORWARDED(qualname)
FORWARDED(module)
FORWARDED(doc)

static PyObject *
get_wrapped(FastOp *self, void *c)
{
    return Py_NewRef(self->wrapper ? self->wrapper : Py_None);
}

static PyObject *
fastop_repr(FastOp *self)
{
    PyObject *name = self->wrapper ? PyObject_GetAttrString(self->wrapper, "__qualname__") : NULL;
    if (name == NULL) {
        PyErr_Clear();
        return PyUnicode_FromFormat("<compiled function at %p>", self);
    }
    PyObject *r = PyUnicode_FromFormat("<compiled function %U at %p>", name, self);
    Py_DECREF(name);
    return r;
}

static PyGetSetDef fastop_getset[] = {
    {"__name__", (getter)get_name, (setter)set_name, NULL, NULL},
    {"__qualname__", (getter)get_qualname, (setter)set_qualname, NULL, NULL},
    {"__module__", (getter)get_module, (setter)set_module, NULL, NULL},
    {"__doc__", (getter)get_doc, (setter)set_doc, NULL, NULL},
    {"__wrapped__", (getter)get_wrapped, NULL, "The Python function that defines this operation.", NULL},
    {NULL},
};

static PyMemberDef fastop_members[] = {
    {"fn", T_OBJECT, offsetof(FastOp, fn), READONLY, "The NumPy function of the fast path."},
    {"swapped_operands", T_INT, offsetof(FastOp, swapped), READONLY, "1 for a reflected operator."},
    {NULL},
};

static PyMethodDef fastop_methods[] = {
    {"swapped", (PyCFunction)fastop_swapped, METH_O,
     "swapped(reflected) -> the reflected operator: op(self, other) is fn(other, self) on the fast path and "
     "reflected(self, other) otherwise."},
    {"__reduce__", (PyCFunction)fastop_reduce, METH_NOARGS, NULL},
    {NULL},
};

static PyTypeObject FastOp_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "funclib._fastops.FastOp",
    .tp_basicsize = sizeof(FastOp),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL
                | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "FastOp(wrapper, fn, same, flt=(), intg=(), first_flt=(), first_int=(), arity=2)\n\n"
              "A compiled eager fast path in front of the Python function ``wrapper``: with exactly-Tensor "
              "operands of the dtypes listed it calls ``fn`` on their arrays and wraps the result; otherwise "
              "it calls ``wrapper``.",
    .tp_new = fastop_new,
    .tp_dealloc = (destructor)fastop_dealloc,
    .tp_traverse = (traverseproc)fastop_traverse,
    .tp_clear = (inquiry)fastop_clear,
    .tp_vectorcall_offset = offsetof(FastOp, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = fastop_descr_get,
    .tp_repr = (reprfunc)fastop_repr,
    .tp_getset = fastop_getset,
    .tp_members = fastop_members,
    .tp_methods = fastop_methods,
};

static PyObject *
configure(PyObject *module, PyObject *args)
{
    PyObject *tensor, *ndarray, *asarray, *samples;
    if (!PyArg_ParseTuple(args, "O!O!OO!:configure", &PyType_Type, &tensor, &PyType_Type, &ndarray, &asarray,
                          &PyTuple_Type, &samples))
        return NULL;
    PyObject *slot = PyDict_GetItemString(((PyTypeObject *)tensor)->tp_dict, "_value");
    if (slot == NULL || !Py_IS_TYPE(slot, &PyMemberDescr_Type)) {
        PyErr_SetString(PyExc_TypeError, "configure: Tensor must declare _value in __slots__");
        return NULL;
    }
    PyMemberDef *m = ((PyMemberDescrObject *)slot)->d_member;
    if (m->type != T_OBJECT_EX || (m->flags & READONLY)) {
        PyErr_SetString(PyExc_TypeError, "configure: Tensor._value must be a writable object slot");
        return NULL;
    }
    Py_XSETREF(tensor_type, (PyTypeObject *)Py_NewRef(tensor));
    Py_XSETREF(ndarray_type, (PyTypeObject *)Py_NewRef(ndarray));
    Py_XSETREF(asarray_fn, Py_NewRef(asarray));
    value_offset = m->offset;
    int agree = ((PyTypeObject *)ndarray)->tp_basicsize >= (Py_ssize_t)sizeof(ArrayHead) && PyTuple_GET_SIZE(samples);
    for (Py_ssize_t k = 0; agree && k < PyTuple_GET_SIZE(samples); k++) {
        PyObject *a = PyTuple_GET_ITEM(samples, k);
        PyObject *d = Py_TYPE(a) == (PyTypeObject *)ndarray ? PyObject_GetAttr(a, str_dtype) : NULL;
        if (d == NULL) {
            PyErr_Clear();
            agree = 0;
            break;
        }
        agree = ((ArrayHead *)a)->descr == d;
        Py_DECREF(d);
    }
    read_descr = agree;
    return PyBool_FromLong(agree);
}

static PyMethodDef module_methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(Tensor, ndarray, asarray, samples) -> bool: the class every fast path makes and checks for "
     "(exactly, not a subclass), NumPy's array class, the function that makes a 0-d result an array, and arrays "
     "on which to check that an array's dtype can be read from its struct (returned: whether it can)."},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "funclib._fastops",
    .m_doc = "Compiled dispatch for the eager fast paths of the elementwise operations.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC
PyInit__fastops(void)
{
    if (PyType_Ready(&FastOp_Type) < 0)
        return NULL;
    str_dtype = PyUnicode_InternFromString("dtype");
    if (str_dtype == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "FastOp", (PyObject *)&FastOp_Type) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
