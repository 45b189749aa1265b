/*
 * cuda_libs.c: loads the CUDA libraries this build reaches lazily (see
 * cuda_libs.h), the first time a CUDA session is created.
 *
 * The one process-wide object in edgert, on purpose: the table below is
 * written exactly once, under pthread_once, and only read afterwards. It holds
 * what the dynamic linker would otherwise have bound at start-up (dlopen
 * handles are process-wide whatever we do), so two contexts still share
 * nothing they can change. A failed load is remembered with its message:
 * retrying a missing library on every session create would only repeat it.
 */
#define _GNU_SOURCE /* dladdr */
#define ERT_CUDA_LIBS_IMPL
#include <cublasLt.h>
#include <cublas_v2.h>
#ifdef ERT_HAVE_CUDNN
#include <cudnn.h>
#endif

#include "cuda_libs.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <dlfcn.h>
#if defined(ERT_CUBLAS_LAZY) || (defined(ERT_CUDNN_LAZY) && defined(ERT_HAVE_CUDNN))
#define ERT_ANY_LAZY 1
#endif

#define ERT_STR_(x) #x
#define ERT_STR(x) ERT_STR_(x)
/* sonames of the major version we were compiled against */
#define ERT_CUBLAS_SO "libcublas.so." ERT_STR(CUBLAS_VER_MAJOR)
#define ERT_CUBLASLT_SO "libcublasLt.so." ERT_STR(CUBLAS_VER_MAJOR)
#ifdef ERT_HAVE_CUDNN
#define ERT_CUDNN_SO "libcudnn.so." ERT_STR(CUDNN_MAJOR)
#endif
/* where the build found them (cmake/ert_cuda_link.cmake), tried second */
#ifndef ERT_CUBLAS_DIR
#define ERT_CUBLAS_DIR ""
#endif
#ifndef ERT_CUDNN_DIR
#define ERT_CUDNN_DIR ""
#endif

static ert_cuda_libs ert_libs_table;

const ert_cuda_libs *ert_cuda_libs_get(void) { return &ert_libs_table; }

const char *ert_cuda_libs_describe(void) {
    return "cuBLAS/cuBLASLt "
#ifdef ERT_CUBLAS_LAZY
           "loaded at the first CUDA session (" ERT_CUBLAS_SO ")"
#else
           "linked in"
#endif
#ifdef ERT_HAVE_CUDNN
           ", cuDNN "
#ifdef ERT_CUDNN_LAZY
           "loaded at the first CUDA session (" ERT_CUDNN_SO ")"
#else
           "linked in"
#endif
#else
           ", no cuDNN (own convolution kernels)"
#endif
        ;
}

const char *ert_cuda_no_device_reason(cudaError_t e, char *buf, size_t n) {
    /* The runtime opens the driver (libcuda.so.1) itself; opening it again
     * only tells whether there is one. */
    void *drv = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!drv) {
        snprintf(buf, n, "no NVIDIA driver/GPU found (libcuda.so.1 cannot be loaded)");
        return buf;
    }
    dlclose(drv);
    if (e == cudaSuccess || e == cudaErrorNoDevice)
        snprintf(buf, n, "no NVIDIA GPU found (the driver is installed but reports no device)");
    else if (e == cudaErrorInsufficientDriver)
        snprintf(buf, n, "the NVIDIA driver is older than this build's CUDA runtime %d.%d: %s", CUDART_VERSION / 1000,
                 CUDART_VERSION % 1000 / 10, cudaGetErrorString(e));
    else
        snprintf(buf, n, "%s", cudaGetErrorString(e));
    return buf;
}

#ifndef ERT_ANY_LAZY
ert_status ert_cuda_libs_load(ert_context *ctx) {
    (void)ctx;
    return ERT_OK;
}
#else
static pthread_once_t ert_libs_once = PTHREAD_ONCE_INIT;
static char ert_libs_error[512]; /* empty: loaded */

/* dlopen `so` by the loader's search path, then in `hint` (the folder the
 * build found it in, as an RPATH would; "" for none); or record why not and
 * return NULL. */
static void *ert_libs_open(const char *what, const char *so, const char *hint) {
    void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!h && hint[0]) {
        char path[1024];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", hint, so) < sizeof path) {
            const char *why = dlerror(); /* keep the first failure's reason */
            char first[256];
            snprintf(first, sizeof first, "%s", why ? why : so);
            h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (!h) {
                snprintf(ert_libs_error, sizeof ert_libs_error,
                         "%s is not linked into this build and could not be loaded: %s (install it, or add its "
                         "folder to LD_LIBRARY_PATH)",
                         what, first);
                return NULL;
            }
        }
    }
    if (!h) {
        const char *why = dlerror();
        snprintf(ert_libs_error, sizeof ert_libs_error,
                 "%s is not linked into this build and could not be loaded: %s (install it, or add its "
                 "folder to LD_LIBRARY_PATH)",
                 what, why ? why : so);
    }
    return h;
}

static int ert_libs_sym(void *h, const char *what, const char *name, void **out) {
    dlerror();
    *out = dlsym(h, name);
    if (!*out) {
        snprintf(ert_libs_error, sizeof ert_libs_error, "%s has no symbol %s (a different major version?)", what,
                 name);
        return 0;
    }
    return 1;
}

#if defined(ERT_CUDNN_LAZY) && defined(ERT_HAVE_CUDNN)
/* cuDNN 9's libcudnn.so is a shim that dlopen()s its parts on first use and
 * abort()s the process when one is missing ("Invalid handle. Cannot load
 * symbol ..."). Load the parts a convolution needs now, from the shim's own
 * folder (its RUNPATH is $ORIGIN) or the loader's path, so a broken install
 * is an error at session create instead. */
static int ert_libs_cudnn_parts(void *dnn) {
    static const char *const parts[] = {"libcudnn_graph.so." ERT_STR(CUDNN_MAJOR),
                                        "libcudnn_ops.so." ERT_STR(CUDNN_MAJOR),
                                        "libcudnn_cnn.so." ERT_STR(CUDNN_MAJOR)};
    char dir[768] = "";
    Dl_info info;
    void *sym = dlsym(dnn, "cudnnGetVersion");
    if (sym && dladdr(sym, &info) && info.dli_fname) {
        const char *slash = strrchr(info.dli_fname, '/');
        if (slash && (size_t)(slash - info.dli_fname) < sizeof dir)
            snprintf(dir, sizeof dir, "%.*s", (int)(slash - info.dli_fname), info.dli_fname);
    }
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        char path[1024];
        void *h = NULL;
        if (dir[0] && (size_t)snprintf(path, sizeof path, "%s/%s", dir, parts[i]) < sizeof path)
            h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) h = dlopen(parts[i], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *why = dlerror();
            snprintf(ert_libs_error, sizeof ert_libs_error,
                     "cuDNN is installed incompletely: %s could not be loaded: %s", parts[i], why ? why : "?");
            return 0;
        }
    }
    return 1;
}
#endif

static void ert_libs_load_once(void) {
    ert_cuda_libs t = {0};
    void *blas = NULL, *lt = NULL, *dnn = NULL;
    const char *blas_name = "cuBLAS", *lt_name = "cuBLASLt", *dnn_name = "cuDNN";
    (void)blas, (void)lt, (void)dnn, (void)blas_name, (void)lt_name, (void)dnn_name;
#ifdef ERT_CUBLAS_LAZY
    /* cuBLASLt first: libcublas needs it and finds it already mapped. */
    if (!(lt = ert_libs_open(lt_name, ERT_CUBLASLT_SO, ERT_CUBLAS_DIR))) return;
    if (!(blas = ert_libs_open(blas_name, ERT_CUBLAS_SO, ERT_CUBLAS_DIR))) return;
#endif
#if defined(ERT_CUDNN_LAZY) && defined(ERT_HAVE_CUDNN)
    if (!(dnn = ert_libs_open(dnn_name, ERT_CUDNN_SO, ERT_CUDNN_DIR))) return;
    if (!ert_libs_cudnn_parts(dnn)) return;
#endif
    /* Object pointers from dlsym converted to function pointers: POSIX
     * guarantees this works; memcpy keeps -Wpedantic quiet about it. */
#define ERT_LIBS_RESOLVE(f, lib)                                                                          \
    {                                                                                                     \
        void *p_;                                                                                         \
        if (!ert_libs_sym(lib, lib##_name, #f, &p_)) return;                                              \
        memcpy(&t.f, &p_, sizeof p_);                                                                     \
    }
#ifdef ERT_CUBLAS_LAZY
    ERT_CUBLAS_FUNCS(ERT_LIBS_RESOLVE)
#endif
#if defined(ERT_CUDNN_LAZY) && defined(ERT_HAVE_CUDNN)
    ERT_CUDNN_FUNCS(ERT_LIBS_RESOLVE)
#endif
#undef ERT_LIBS_RESOLVE
    ert_libs_table = t;
    /* the handles stay open for the life of the process, as a linked library would */
}

ert_status ert_cuda_libs_load(ert_context *ctx) {
    if (pthread_once(&ert_libs_once, ert_libs_load_once) != 0)
        return ert_set_error(ctx, ERT_E_CUDA, "could not load the CUDA libraries (pthread_once failed)");
    if (ert_libs_error[0]) return ert_set_error(ctx, ERT_E_CUDA, "%s", ert_libs_error);
    return ERT_OK;
}
#endif
