/* Kernels that convert or generate values: Cast, Shape, ConstantOfShape, Range. */
#include "cpu_kernels.h"

#include <math.h>
#include <string.h>

#define GRAIN 16384

/* ------------------------------------------------------------------ Cast */

/* One element, held exactly: integers as int64 (bool as 0/1), floats as double. */
typedef struct scalar {
    bool is_int;
    int64_t i;
    double f;
} scalar;

static scalar load(const void *p, ert_dtype dt, int64_t k) {
    scalar s = {true, 0, 0};
    switch (dt) {
    case ERT_DTYPE_F32: s.is_int = false; s.f = ((const float *)p)[k]; break;
    case ERT_DTYPE_F16: s.is_int = false; s.f = ert_f16_to_f32(((const uint16_t *)p)[k]); break;
    case ERT_DTYPE_BF16: s.is_int = false; s.f = ert_bf16_to_f32(((const uint16_t *)p)[k]); break;
    case ERT_DTYPE_I8: s.i = ((const int8_t *)p)[k]; break;
    case ERT_DTYPE_U8: s.i = ((const uint8_t *)p)[k]; break;
    case ERT_DTYPE_BOOL: s.i = ((const uint8_t *)p)[k] != 0; break;
    case ERT_DTYPE_I32: s.i = ((const int32_t *)p)[k]; break;
    case ERT_DTYPE_I64: s.i = ((const int64_t *)p)[k]; break;
    default: break;
    }
    return s;
}

/* float -> integer truncates toward zero (ONNX/C); out-of-range values and
 * NaN, undefined in ONNX and UB in C, saturate (NaN -> 0). Integer -> narrower
 * integer wraps (two's complement, like ONNX runtimes). */
static int64_t f_to_i(double f, double lo, double hi) {
    if (f != f) return 0;
    if (f <= lo) return (int64_t)lo;
    if (f >= hi) return (int64_t)hi;
    return (int64_t)f;
}

static void store(void *p, ert_dtype dt, int64_t k, scalar s) {
    double f = s.is_int ? (double)s.i : s.f;
    switch (dt) {
    case ERT_DTYPE_F32: ((float *)p)[k] = (float)f; break;
    case ERT_DTYPE_F16: ((uint16_t *)p)[k] = ert_f32_to_f16((float)f); break;
    case ERT_DTYPE_BF16: ((uint16_t *)p)[k] = ert_f32_to_bf16((float)f); break;
    case ERT_DTYPE_BOOL: ((uint8_t *)p)[k] = s.is_int ? s.i != 0 : f != 0; break;
    case ERT_DTYPE_I8: ((int8_t *)p)[k] = (int8_t)(uint8_t)(s.is_int ? (uint64_t)s.i : (uint64_t)f_to_i(f, -128, 127)); break;
    case ERT_DTYPE_U8: ((uint8_t *)p)[k] = (uint8_t)(s.is_int ? (uint64_t)s.i : (uint64_t)f_to_i(f, 0, 255)); break;
    case ERT_DTYPE_I32:
        ((int32_t *)p)[k] = (int32_t)(uint32_t)(s.is_int ? (uint64_t)s.i : (uint64_t)f_to_i(f, -2147483648.0, 2147483647.0));
        break;
    case ERT_DTYPE_I64:
        /* 2^63 is not representable: saturate just below it */
        ((int64_t *)p)[k] = s.is_int ? s.i : f_to_i(f, -9223372036854775808.0, 9223372036854774784.0);
        break;
    default: break;
    }
}

static void cast_range(void *arg, int64_t b, int64_t e) {
    const ert_kargs *a = arg;
    const void *x = a->in[0].data;
    void *y = a->out[0].data;
    ert_dtype from = a->in[0].dtype, to = a->out[0].dtype;
    if (from == ERT_DTYPE_F32 && to == ERT_DTYPE_I64) { /* common in exported shape math */
        for (int64_t i = b; i < e; i++) ((int64_t *)y)[i] = f_to_i(((const float *)x)[i], -9223372036854775808.0, 9223372036854774784.0);
        return;
    }
    for (int64_t i = b; i < e; i++) store(y, to, i, load(x, from, i));
}

ert_status ert_cpu_cast(const ert_kargs *a) {
    ert_dtype from = a->in[0].dtype, to = a->out[0].dtype;
    if (ert_dtype_size(from) == 0 || ert_dtype_size(to) == 0) return ERT_E_UNSUPPORTED;
    if (from == to) {
        if (a->out[0].data != a->in[0].data)
            memcpy(a->out[0].data, a->in[0].data, (size_t)a->in[0].n_elems * ert_dtype_size(from));
        return ERT_OK;
    }
    ert_parallel_for(a->pool, a->out[0].n_elems, GRAIN, cast_range, (void *)a);
    return ERT_OK;
}

/* ------------------------------------------------------------------ Shape, ConstantOfShape, Range */

/* out (n_axes) i64 = input dims [axis, axis + n_axes). */
ert_status ert_cpu_shape(const ert_kargs *a) {
    const ert_axis_params *p = &a->params->axis;
    int64_t *y = a->out[0].data;
    if (p->axis < 0 || p->n_axes < 0 || p->axis + p->n_axes > a->in[0].ndim) return ERT_E_INTERNAL;
    for (int64_t i = 0; i < p->n_axes; i++) y[i] = a->in[0].dims[p->axis + i];
    return ERT_OK;
}

ert_status ert_cpu_size(const ert_kargs *a) {
    int64_t n = 1;
    for (int d = 0; d < a->in[0].ndim; d++) n *= a->in[0].dims[d];
    *(int64_t *)a->out[0].data = n;
    return ERT_OK;
}

/* Value from params (see ert_prepare_constant_of_shape): pad.value, exact
 * integer in pad.pad_begin[0]. */
ert_status ert_cpu_constant_of_shape(const ert_kargs *a) {
    const ert_pad_params *p = &a->params->pad;
    const ert_tview *o = &a->out[0];
    size_t es = ert_dtype_size(o->dtype);
    if (es == 0) return ERT_E_UNSUPPORTED;
    scalar s = {false, 0, p->value};
    if (o->dtype == ERT_DTYPE_I64 || o->dtype == ERT_DTYPE_I32 || o->dtype == ERT_DTYPE_I8 || o->dtype == ERT_DTYPE_U8) {
        s.is_int = true;
        s.i = p->pad_begin[0];
    }
    uint8_t v[8];
    store(v, o->dtype, 0, s);
    for (int64_t i = 0; i < o->n_elems; i++) memcpy((char *)o->data + i * (int64_t)es, v, es);
    return ERT_OK;
}

/* out[i] = start + i * delta; the length was fixed by prepare. Integer math
 * wraps (computed unsigned) rather than overflowing. */
ert_status ert_cpu_range(const ert_kargs *a) {
    const ert_tview *o = &a->out[0];
    int64_t n = o->n_elems;
    switch (o->dtype) {
    case ERT_DTYPE_F32: {
        float s = *(const float *)a->in[0].data, d = *(const float *)a->in[2].data, *y = o->data;
        for (int64_t i = 0; i < n; i++) y[i] = s + (float)i * d;
        return ERT_OK;
    }
    case ERT_DTYPE_I32: {
        uint32_t s = (uint32_t)*(const int32_t *)a->in[0].data, d = (uint32_t)*(const int32_t *)a->in[2].data;
        int32_t *y = o->data;
        for (int64_t i = 0; i < n; i++) y[i] = (int32_t)(s + (uint32_t)i * d);
        return ERT_OK;
    }
    case ERT_DTYPE_I64: {
        uint64_t s = (uint64_t)*(const int64_t *)a->in[0].data, d = (uint64_t)*(const int64_t *)a->in[2].data;
        int64_t *y = o->data;
        for (int64_t i = 0; i < n; i++) y[i] = (int64_t)(s + (uint64_t)i * d);
        return ERT_OK;
    }
    default: return ERT_E_UNSUPPORTED;
    }
}
