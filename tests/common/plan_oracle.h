/* The planner's oracle: the all-pairs scan that ert_plan_offsets replaced
 * (issue 13 item 17). Same greedy (largest first, best fit among the gaps left
 * by the placed blocks that overlap in time), O(n^2 log n). The fast planner
 * must give exactly its offsets, so plan quality (peak vs lower bound) cannot
 * change. Header-only so every test that plans (planner, session, trainer,
 * conformance) can compare with it. */
#ifndef ERT_TEST_PLAN_ORACLE_H
#define ERT_TEST_PLAN_ORACLE_H
#include "planner_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Orders by (size desc, first, index) or by (offset, index); a merge sort
 * because qsort has no context pointer in C11. */
static int ert_oracle_less(const ert_plan_block *b, int32_t x, int32_t y, int by_size) {
    if (by_size) {
        if (b[x].size != b[y].size) return b[x].size > b[y].size;
        if (b[x].first != b[y].first) return b[x].first < b[y].first;
        return x < y;
    }
    if (b[x].offset != b[y].offset) return b[x].offset < b[y].offset;
    return x < y;
}

static void ert_oracle_sort(const ert_plan_block *b, int32_t *v, int32_t *tmp, int n, int by_size) {
    for (int w = 1; w < n; w *= 2) {
        for (int lo = 0; lo < n; lo += 2 * w) {
            int mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int i = lo, j = mid, k = lo;
            while (i < mid && j < hi) tmp[k++] = ert_oracle_less(b, v[j], v[i], by_size) ? v[j++] : v[i++];
            while (i < mid) tmp[k++] = v[i++];
            while (j < hi) tmp[k++] = v[j++];
        }
        memcpy(v, tmp, (size_t)n * sizeof *v);
    }
}

/* Plans blk (sizes already multiples of align, as after ert_plan_offsets) into
 * offsets[]; returns the peak, or SIZE_MAX when out of memory. */
static size_t ert_plan_oracle(const ert_plan_block *blk, int n, size_t *offsets) {
    if (n <= 0) return 0;
    int32_t *order = malloc((size_t)n * sizeof *order), *tmp = malloc((size_t)n * sizeof *tmp);
    int32_t *over = malloc((size_t)n * sizeof *over);
    char *placed = calloc((size_t)n, 1);
    ert_plan_block *b = malloc((size_t)n * sizeof *b);
    size_t peak = 0;
    if (!order || !tmp || !over || !placed || !b) {
        peak = SIZE_MAX;
        goto done;
    }
    memcpy(b, blk, (size_t)n * sizeof *b);
    for (int i = 0; i < n; i++) order[i] = i;
    ert_oracle_sort(b, order, tmp, n, 1);
    for (int oi = 0; oi < n; oi++) {
        ert_plan_block *x = &b[order[oi]];
        int k = 0;
        for (int j = 0; j < n; j++)
            if (placed[j] && b[j].first <= x->last && x->first <= b[j].last) over[k++] = j;
        ert_oracle_sort(b, over, tmp, k, 0);
        size_t best = SIZE_MAX, best_gap = SIZE_MAX, cursor = 0;
        for (int j = 0; j < k; j++) {
            const ert_plan_block *o = &b[over[j]];
            if (o->offset > cursor && o->offset - cursor >= x->size && o->offset - cursor < best_gap) {
                best_gap = o->offset - cursor;
                best = cursor;
            }
            if (o->offset + o->size > cursor) cursor = o->offset + o->size;
        }
        x->offset = best != SIZE_MAX ? best : cursor;
        placed[order[oi]] = 1;
        if (x->offset + x->size > peak) peak = x->offset + x->size;
    }
    for (int i = 0; i < n; i++) offsets[i] = b[i].offset;
done:
    free(order);
    free(tmp);
    free(over);
    free(placed);
    free(b);
    return peak;
}

/* True when the plan in blk (from ert_plan_offsets) has exactly the oracle's
 * offsets; else writes the first difference to why. */
static bool ert_plan_matches_oracle(const ert_plan_block *blk, int n, char *why, size_t cap) {
    size_t *off = malloc((size_t)(n > 0 ? n : 1) * sizeof *off);
    if (!off) return snprintf(why, cap, "out of memory"), false;
    size_t peak = ert_plan_oracle(blk, n, off);
    bool ok = peak != SIZE_MAX;
    if (!ok) snprintf(why, cap, "out of memory");
    for (int i = 0; ok && i < n; i++)
        if (off[i] != blk[i].offset) {
            snprintf(why, cap, "block %d (%zu bytes, t[%d,%d]) at %zu, the oracle puts it at %zu", i, blk[i].size,
                     blk[i].first, blk[i].last, blk[i].offset, off[i]);
            ok = false;
        }
    free(off);
    return ok;
}
#endif
