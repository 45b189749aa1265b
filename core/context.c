/* Context, status strings, errors, logging, version, dtypes. */
#include "ert_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *ert_version(void) { return ERT_VERSION_STRING; }

const char *ert_status_str(ert_status s) {
    switch (s) {
    case ERT_OK: return "ERT_OK: success";
    case ERT_E_ARG: return "ERT_E_ARG: invalid argument";
    case ERT_E_FORMAT: return "ERT_E_FORMAT: malformed model or data";
    case ERT_E_UNSUPPORTED: return "ERT_E_UNSUPPORTED: not supported";
    case ERT_E_ARENA: return "ERT_E_ARENA: arena too small";
    case ERT_E_NOMEM: return "ERT_E_NOMEM: out of memory";
    case ERT_E_IO: return "ERT_E_IO: I/O error";
    case ERT_E_CUDA: return "ERT_E_CUDA: CUDA error";
    case ERT_E_SHAPE: return "ERT_E_SHAPE: shape or dtype mismatch";
    case ERT_E_STATE: return "ERT_E_STATE: invalid state";
    case ERT_E_INTERNAL: return "ERT_E_INTERNAL: internal error";
    case ERT_E_NOT_FOUND: return "ERT_E_NOT_FOUND: not found";
    case ERT_E_NUMERIC: return "ERT_E_NUMERIC: NaN or infinity";
    }
    return "ERT_E_?: unknown status";
}

size_t ert_dtype_size(ert_dtype dt) {
    switch (dt) {
    case ERT_DTYPE_F32: case ERT_DTYPE_I32: return 4;
    case ERT_DTYPE_F16: case ERT_DTYPE_BF16: return 2;
    case ERT_DTYPE_I8: case ERT_DTYPE_U8: case ERT_DTYPE_BOOL: return 1;
    case ERT_DTYPE_I64: return 8;
    default: return 0;
    }
}

const char *ert_dtype_name(ert_dtype dt) {
    static const char *names[] = {"undefined", "f32", "f16", "bf16", "i8", "u8", "i32", "i64", "bool"};
    if ((unsigned)dt < sizeof names / sizeof names[0]) return names[dt];
    return "?";
}

ert_status ert_context_create(const ert_context_options *opts, ert_context **out) {
    if (!out) return ERT_E_ARG;
    ert_context *c = calloc(1, sizeof *c);
    if (!c) return ERT_E_NOMEM;
    if (opts) {
        c->log = opts->log;
        c->log_user = opts->log_user;
        c->log_level = opts->log_level;
    }
    c->kc = ert_kernel_choice_of(NULL);
    *out = c;
    return ERT_OK;
}

void ert_context_free(ert_context *ctx) { free(ctx); }

void ert_context_set_kernel_choice(ert_context *ctx, const ert_kernel_choice *kc) {
    if (ctx) ctx->kc = ert_kernel_choice_of(kc);
}

const char *ert_last_error(const ert_context *ctx) { return ctx ? ctx->err : ""; }

ert_status ert_set_errorv(ert_context *ctx, ert_status st, const char *fmt, va_list ap) {
    if (!ctx) return st;
    vsnprintf(ctx->err, sizeof ctx->err, fmt, ap);
    if (ctx->log && ctx->log_level >= ERT_LOG_ERROR) ctx->log(ctx->log_user, ERT_LOG_ERROR, ctx->err);
    return st;
}

ert_status ert_set_error(ert_context *ctx, ert_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ert_set_errorv(ctx, st, fmt, ap);
    va_end(ap);
    return st;
}

void ert_log(ert_context *ctx, ert_log_level lvl, const char *fmt, ...) {
    if (!ctx || !ctx->log || lvl > ctx->log_level) return;
    char buf[ERT_ERRMSG_SIZE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    ctx->log(ctx->log_user, lvl, buf);
}

void ert_free(void *p) { free(p); }
