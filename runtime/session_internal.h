/* The session (runtime/session.c: create, plan, bind, run): the working
 * graph (graph.h, shared with the trainer and the passes in runtime/passes/)
 * plus the schedule, the arena and the kernel arguments in run order. */
#ifndef ERT_SESSION_INTERNAL_H
#define ERT_SESSION_INTERNAL_H
#include "graph.h"
#include "strips_internal.h"

#include <stdatomic.h>

struct ert_session {
    ert_graph g;    /* tensors, nodes, backend, inputs/outputs, planned blocks (graph.h) */
    const ert_model *model;
    int32_t *sched; /* live node indices in run order */
    int n_sched;
    uint8_t *arena;
    size_t arena_bytes;
    bool arena_owned;
    uint8_t *io_host;     /* user-visible io region (== arena io region unless the backend mirrors it) */
    float *prof_ms;       /* ert_session_profile's per-node times (n_sched) */
    ert_kargs **kptr;     /* scheduled nodes' arguments, in run order */
    ert_strip *strips;    /* batch strips (strips.c): schedule steps run image by image; n_strips 0: none */
    int n_strips;
    int64_t strip_n;      /* their batch */
    uint8_t *strip_in;    /* per tensor: 1 if it holds one image (made and used inside a strip) */
    ert_strip_run srun;   /* what ert_session_run runs when there are strips */
    size_t w_bytes, io_bytes, act_bytes;
    ert_memory_report mem;
    bool planned_only;
    bool bctx_live;       /* be->init succeeded */
    int n_host;           /* scheduled nodes on the CPU fallback */
    ert_create_stats stats; /* ert_session_create_stats: create_ms here, the rest from the backend */
    atomic_bool running;  /* a call is using the arena (busy_internal.h) */
};

/* Create up to step 4 (shape inference, folding, fusion; no precision,
 * layout or planning, no arena): the graph the device passes take, for
 * white-box tests of those passes (tests/unit). Free with ert_session_free;
 * never run it. */
ert_status ert_session_build_passed(const ert_model *m, const ert_session_options *o, ert_session **out);

#endif /* ERT_SESSION_INTERNAL_H */
