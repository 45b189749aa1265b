/* The "running" flag of a session or trainer (issue 13 item 6).
 *
 * One session (or trainer) is driven by one thread at a time; two threads in
 * it at once would share the arena and corrupt each other's outputs. Every
 * call that reads or writes the arena enters through ert_busy_enter (a
 * compare-exchange, so exactly one caller wins) and leaves through
 * ert_busy_leave on every exit path; the loser gets ERT_E_STATE at once and
 * touches nothing. The flag detects the misuse, it does not serialise: the
 * caller that got ERT_E_STATE may retry. The detailed message goes to the
 * shared context's error text, which the other thread may be writing too
 * (the status itself is exact). */
#ifndef ERT_BUSY_INTERNAL_H
#define ERT_BUSY_INTERNAL_H
#include "ert_internal.h"

#include <stdatomic.h>

static inline ert_status ert_busy_enter(atomic_bool *running, ert_context *ctx, const char *who, const char *call) {
    bool idle = false;
    if (atomic_compare_exchange_strong(running, &idle, true)) return ERT_OK;
    return ert_set_error(ctx, ERT_E_STATE, "%s: %s is already running in another thread", call, who);
}

static inline void ert_busy_leave(atomic_bool *running) { atomic_store(running, false); }

/* return `call` (an ert_status expression) evaluated with the flag held, or
 * ERT_E_STATE without evaluating it; the calling function's name goes into
 * the message. */
#define ERT_BUSY_RETURN(running, ctx, who, call)                          \
    do {                                                                  \
        ert_status busy_st_ = ert_busy_enter((running), (ctx), (who), __func__); \
        if (busy_st_ != ERT_OK) return busy_st_;                          \
        busy_st_ = (call);                                                \
        ert_busy_leave(running);                                          \
        return busy_st_;                                                  \
    } while (0)

#endif
