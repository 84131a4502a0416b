/* Single-precision matrix product with AVX-512 for the generated loop kernels (kernels/gemm.py).

C[m, n] = A[m, k] @ B[k, n] for any element strides of A and B and a row-major C, one thread, in the layered
scheme of Goto and van de Geijn: a KC x NC block of B is packed into column panels NR wide, an MC x KC block of A
into row panels MR high, and a register-resident MR x NR tile of C is updated by rank-1 steps over the packed
panels. Compiled for AVX-512 through function attributes only, so the module builds on any x86-64 compiler and
funclib_sgemm_supported() tells whether this CPU may call it.

Why it exists: OpenBLAS picks its kernels by CPU model and runs its AVX2 ones on CPUs it does not list (an AMD
EPYC of the Zen 5 generation, for one), at about half of what the same core does with AVX-512. kernels/gemm.py times
this product against BLAS once per process and uses whichever is faster.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_AVX512_PATH 1
#include <immintrin.h>
#endif

#ifndef MR
#define MR 6
#endif
#ifndef NVMAX
#define NVMAX 4
#endif
#define NR (16 * NVMAX)
#ifndef KC
#define KC 320
#endif
#ifndef MC
#define MC 96
#endif
#define NC 1024

#ifdef HAVE_AVX512_PATH
#define AVX512 __attribute__((target("avx512f")))

/* Per thread: the packed blocks, allocated on first use and kept (the generated kernels call this in a loop). */
static __thread float *pack_a, *pack_b;

static int buffers(void) {
    if (pack_a)
        return 1;
    pack_a = aligned_alloc(64, sizeof(float) * MC * KC);
    pack_b = aligned_alloc(64, sizeof(float) * KC * NC);
    if (!pack_a || !pack_b) {
        free(pack_a);
        free(pack_b);
        pack_a = pack_b = NULL;
        return 0;
    }
    return 1;
}

/* A[ic:ic+mc, pc:pc+kc] into panels of MR rows, each stored k-major (MR values per k), zero-padded below. */
static void pack_rows(const float *a, int64_t rsa, int64_t csa, int64_t mc, int64_t kc, float *dst) {
    for (int64_t i0 = 0; i0 < mc; i0 += MR) {
        int64_t mv = mc - i0 < MR ? mc - i0 : MR;
        const float *src = a + i0 * rsa;
        if (mv == MR && csa == 1) {
            for (int64_t p = 0; p < kc; p++)
                for (int r = 0; r < MR; r++)
                    dst[p * MR + r] = src[r * rsa + p];
        } else {
            for (int64_t p = 0; p < kc; p++)
                for (int r = 0; r < MR; r++)
                    dst[p * MR + r] = r < mv ? src[r * rsa + p * csa] : 0.0f;
        }
        dst += MR * kc;
    }
}

/* B[pc:pc+kc, jc:jc+nc] into panels NR wide (the last one rounded up to whole vectors), stored row by row. */
static AVX512 void pack_cols(const float *b, int64_t rsb, int64_t csb, int64_t kc, int64_t nc, float *dst) {
    for (int64_t j0 = 0; j0 < nc; j0 += NR) {
        int64_t w = nc - j0 < NR ? nc - j0 : NR;
        int64_t wp = (w + 15) & ~(int64_t)15;
        const float *src = b + j0 * csb;
        if (csb == 1) {
            for (int64_t p = 0; p < kc; p++) {
                memcpy(dst + p * wp, src + p * rsb, sizeof(float) * w);
                for (int64_t c = w; c < wp; c++)
                    dst[p * wp + c] = 0.0f;
            }
        } else if (csb * 15 <= INT32_MAX && csb * 15 >= INT32_MIN) {
            /* B transposed (or strided): sixteen columns per gather */
            __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                             _mm512_set1_epi32((int)csb));
            for (int64_t c = 0; c < wp; c += 16) {
                int64_t left = w - c;
                __mmask16 m = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
                /* sixteen source columns at a time: their cache lines stay in L1 across consecutive p even where the
                   column stride is a power of two (all 64 columns of a panel would map to 4 sets of L1) */
                for (int64_t p = 0; p < kc; p++) {
                    __m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, src + c * csb + p * rsb, 4);
                    _mm512_store_ps(dst + p * wp + c, v);
                }
            }
        } else {
            for (int64_t p = 0; p < kc; p++) {
                for (int64_t c = 0; c < w; c++)
                    dst[p * wp + c] = src[c * csb + p * rsb];
                for (int64_t c = w; c < wp; c++)
                    dst[p * wp + c] = 0.0f;
            }
        }
        dst += wp * kc;
    }
}

/* The MR x (16*NV) tile: acc[r][v] += sum_p a[p, r] * b[p, v] over kc steps, then stored into c (or added to it
   when accumulate). mv, w: the rows and columns of c the tile covers (fewer at the edges). */
#define TILE(NV)                                                                                                   \
    static AVX512 void tile##NV(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int64_t mv,    \
                                int64_t w, int accumulate) {                                                        \
        __m512 acc[MR][NV];                                                                                         \
        for (int r = 0; r < MR; r++)                                                                                \
            for (int v = 0; v < NV; v++)                                                                            \
                acc[r][v] = _mm512_setzero_ps();                                                                    \
        for (int64_t p = 0; p < kc; p++) {                                                                          \
            __m512 bv[NV];                                                                                          \
            for (int v = 0; v < NV; v++)                                                                            \
                bv[v] = _mm512_load_ps(b + p * 16 * NV + 16 * v);                                                   \
            for (int r = 0; r < MR; r++) {                                                                          \
                __m512 ar = _mm512_set1_ps(a[p * MR + r]);                                                          \
                for (int v = 0; v < NV; v++)                                                                        \
                    acc[r][v] = _mm512_fmadd_ps(ar, bv[v], acc[r][v]);                                              \
            }                                                                                                       \
        }                                                                                                           \
        for (int64_t r = 0; r < mv; r++)                                                                            \
            for (int v = 0; v < NV; v++) {                                                                          \
                int64_t left = w - 16 * v;                                                                          \
                __mmask16 m = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);                      \
                float *dst = c + r * ldc + 16 * v;                                                                  \
                __m512 x = acc[r][v];                                                                               \
                if (accumulate)                                                                                     \
                    x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, dst));                                            \
                _mm512_mask_storeu_ps(dst, m, x);                                                                   \
            }                                                                                                       \
    }

TILE(1)
TILE(2)
TILE(3)
TILE(4)

/* kc split evenly, so that no block is a sliver */
static int64_t block(int64_t total, int64_t most) {
    int64_t parts = (total + most - 1) / most;
    return (total + parts - 1) / parts;
}

static AVX512 void sgemm_avx512(int64_t m, int64_t n, int64_t k, const float *a, int64_t rsa, int64_t csa,
                                const float *b, int64_t rsb, int64_t csb, float *c, int64_t ldc) {
    int64_t kb = block(k, KC);
    for (int64_t jc = 0; jc < n; jc += NC) {
        int64_t nc = n - jc < NC ? n - jc : NC;
        for (int64_t pc = 0; pc < k; pc += kb) {
            int64_t kc = k - pc < kb ? k - pc : kb;
            pack_cols(b + pc * rsb + jc * csb, rsb, csb, kc, nc, pack_b);
            for (int64_t ic = 0; ic < m; ic += MC) {
                int64_t mc = m - ic < MC ? m - ic : MC;
                pack_rows(a + ic * rsa + pc * csa, rsa, csa, mc, kc, pack_a);
                for (int64_t jr = 0; jr < nc; jr += NR) {
                    int64_t w = nc - jr < NR ? nc - jr : NR;
                    const float *bp = pack_b + jr * kc;
                    for (int64_t ir = 0; ir < mc; ir += MR) {
                        int64_t mv = mc - ir < MR ? mc - ir : MR;
                        const float *ap = pack_a + ir * kc;
                        float *cp = c + (ic + ir) * ldc + jc + jr;
                        switch ((w + 15) / 16) {
                        case 1: tile1(kc, ap, bp, cp, ldc, mv, w, pc > 0); break;
                        case 2: tile2(kc, ap, bp, cp, ldc, mv, w, pc > 0); break;
                        case 3: tile3(kc, ap, bp, cp, ldc, mv, w, pc > 0); break;
                        default: tile4(kc, ap, bp, cp, ldc, mv, w, pc > 0); break;
                        }
                    }
                }
            }
        }
    }
}
#endif

/* 1 where this build has the AVX-512 path and this CPU runs it */
int funclib_sgemm_supported(void) {
#ifdef HAVE_AVX512_PATH
    static int known = -1; /* asked once: py_sgemm checks it on every eager product */
    if (known < 0) {
        __builtin_cpu_init();
        known = __builtin_cpu_supports("avx512f") ? 1 : 0;
    }
    return known;
#else
    return 0;
#endif
}

/* c = a @ b; strides in elements. Returns 0, or -1 where the packing buffers could not be allocated (c untouched). */
int funclib_sgemm(int64_t m, int64_t n, int64_t k, const float *a, int64_t rsa, int64_t csa, const float *b,
                  int64_t rsb, int64_t csb, float *c, int64_t ldc) {
#ifdef HAVE_AVX512_PATH
    if (m <= 0 || n <= 0)
        return 0;
    if (k <= 0) {
        for (int64_t i = 0; i < m; i++)
            memset(c + i * ldc, 0, sizeof(float) * n);
        return 0;
    }
    if (!buffers())
        return -1;
    sgemm_avx512(m, n, k, a, rsa, csa, b, rsb, csb, c, ldc);
    return 0;
#else
    (void)m, (void)n, (void)k, (void)a, (void)rsa, (void)csa, (void)b, (void)rsb, (void)csb, (void)c, (void)ldc;
    return -1;
#endif
}

/* sgemm(a, b, out): out[...] = a @ b from Python, for 2-D float32 buffers (NumPy arrays) of any strides that are
   whole elements, out's rows contiguous; the GIL is released while it runs. */
static int matrix(PyObject *obj, Py_buffer *view, int writable, const char *name) {
    if (PyObject_GetBuffer(obj, view, writable ? PyBUF_RECORDS : PyBUF_RECORDS_RO) < 0)
        return -1;
    if (view->ndim != 2 || view->itemsize != 4 || !view->format || strcmp(view->format, "f") != 0 ||
        view->strides[0] % 4 || view->strides[1] % 4) {
        PyErr_Format(PyExc_TypeError, "sgemm: %s must be a 2-D float32 array with whole-element strides", name);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *py_sgemm(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "sgemm(a, b, out) takes 3 arguments");
        return NULL;
    }
    Py_buffer a, b, c;
    if (matrix(args[0], &a, 0, "a") < 0)
        return NULL;
    if (matrix(args[1], &b, 0, "b") < 0) {
        PyBuffer_Release(&a);
        return NULL;
    }
    if (matrix(args[2], &c, 1, "out") < 0) {
        PyBuffer_Release(&a);
        PyBuffer_Release(&b);
        return NULL;
    }
    int status = 0;
    int64_t m = a.shape[0], k = a.shape[1], n = b.shape[1];
    if (b.shape[0] != k || c.shape[0] != m || c.shape[1] != n || (n > 1 && c.strides[1] != 4)) {
        PyErr_Format(PyExc_ValueError, "sgemm: shapes (%zd, %zd) @ (%zd, %zd) -> (%zd, %zd) do not agree, or out's "
                     "rows are not contiguous", a.shape[0], a.shape[1], b.shape[0], b.shape[1], c.shape[0],
                     c.shape[1]);
        status = -2;
    } else if (!funclib_sgemm_supported()) {
        PyErr_SetString(PyExc_RuntimeError, "sgemm: this CPU does not run AVX-512; use BLAS");
        status = -2;
    } else {
        Py_BEGIN_ALLOW_THREADS
        status = funclib_sgemm(m, n, k, a.buf, a.strides[0] / 4, a.strides[1] / 4, b.buf, b.strides[0] / 4,
                               b.strides[1] / 4, c.buf, c.strides[0] / 4);
        Py_END_ALLOW_THREADS
        if (status == -1)
            PyErr_NoMemory();
    }
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    PyBuffer_Release(&c);
    if (status != 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"sgemm", (PyCFunction)(void (*)(void))py_sgemm, METH_FASTCALL, "sgemm(a, b, out): out[...] = a @ b, float32."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_gemm",
                                    "AVX-512 single-precision matrix product (C symbols funclib_sgemm*, and sgemm).",
                                    -1, methods};

PyMODINIT_FUNC PyInit__gemm(void) { return PyModule_Create(&module); }
