/*
 * Memory planner: assign arena offsets to blocks with known lifetimes.
 *
 * Steps:
 *   1. Sort blocks by size, largest first (ties: earlier first use, then index,
 *      so plans are deterministic).
 *   2. For each block, gather the already-placed blocks whose lifetimes
 *      [first, last] overlap its own, sorted by offset.
 *   3. Walk the gaps between them (and before the first); take the smallest
 *      gap that fits (best fit). With no fitting gap, place it after the
 *      highest end among the overlapping blocks.
 *   4. Peak = max(offset + size). Lower bound = max over steps of the sum of
 *      the sizes live at that step: no plan can be smaller, so peak - bound is
 *      the fragmentation the greedy order left.
 *
 * Limits: O(n^2 log n) in the number of blocks, fine for the few thousand
 * tensors of real models. Sizes are rounded up to `align`; offsets are
 * multiples of `align`.
 */
#include "planner_internal.h"

#include <stdlib.h>
#include <string.h>

static int cmp_size_desc(const void *pa, const void *pb, void *ctx) {
    const ert_plan_block *b = ctx;
    int32_t a = *(const int32_t *)pa, c = *(const int32_t *)pb;
    if (b[a].size != b[c].size) return b[a].size > b[c].size ? -1 : 1;
    if (b[a].first != b[c].first) return b[a].first < b[c].first ? -1 : 1;
    return a < c ? -1 : (a > c);
}

/* qsort_r is not portable C11; a small merge sort with a context avoids it
 * (and is stable). tmp has n entries. */
static void sort_idx(int32_t *v, int32_t *tmp, int n, int (*cmp)(const void *, const void *, void *), void *ctx) {
    for (int w = 1; w < n; w *= 2) {
        for (int lo = 0; lo < n; lo += 2 * w) {
            int mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int i = lo, j = mid, k = lo;
            while (i < mid && j < hi) tmp[k++] = cmp(&v[j], &v[i], ctx) < 0 ? v[j++] : v[i++];
            while (i < mid) tmp[k++] = v[i++];
            while (j < hi) tmp[k++] = v[j++];
        }
        memcpy(v, tmp, (size_t)n * sizeof *v);
    }
}

static int cmp_offset(const void *pa, const void *pb, void *ctx) {
    const ert_plan_block *b = ctx;
    int32_t a = *(const int32_t *)pa, c = *(const int32_t *)pb;
    if (b[a].offset != b[c].offset) return b[a].offset < b[c].offset ? -1 : 1;
    return a < c ? -1 : (a > c);
}

ert_status ert_plan_offsets(ert_plan_block *blk, int n, size_t align, size_t *peak, size_t *lower_bound) {
    *peak = 0;
    *lower_bound = 0;
    if (n <= 0) return ERT_OK;
    int32_t *order = malloc((size_t)n * sizeof *order);
    int32_t *tmp = malloc((size_t)n * sizeof *tmp);
    int32_t *over = malloc((size_t)n * sizeof *over);
    bool *placed = calloc((size_t)n, sizeof *placed);
    if (!order || !tmp || !over || !placed) {
        free(order); free(tmp); free(over); free(placed);
        return ERT_E_NOMEM;
    }
    int max_step = 0;
    for (int i = 0; i < n; i++) {
        order[i] = i;
        size_t s = ert_align_up(blk[i].size, align);
        if (s < blk[i].size) { /* overflow */
            free(order); free(tmp); free(over); free(placed);
            return ERT_E_ARENA;
        }
        blk[i].size = s;
        if (blk[i].last > max_step) max_step = blk[i].last;
    }
    sort_idx(order, tmp, n, cmp_size_desc, blk);
    for (int oi = 0; oi < n; oi++) {
        ert_plan_block *b = &blk[order[oi]];
        int k = 0;
        for (int j = 0; j < n; j++)
            if (placed[j] && blk[j].first <= b->last && b->first <= blk[j].last) over[k++] = j;
        sort_idx(over, tmp, k, cmp_offset, blk);
        size_t best = SIZE_MAX, best_gap = SIZE_MAX, cursor = 0;
        for (int j = 0; j < k; j++) {
            const ert_plan_block *o = &blk[over[j]];
            if (o->offset > cursor) {
                size_t gap = o->offset - cursor;
                if (gap >= b->size && gap < best_gap) {
                    best_gap = gap;
                    best = cursor;
                }
            }
            size_t end = o->offset + o->size;
            if (end > cursor) cursor = end;
        }
        b->offset = best != SIZE_MAX ? best : cursor;
        placed[order[oi]] = true;
        if (b->offset + b->size > *peak) *peak = b->offset + b->size;
    }
    /* lower bound via a difference array over steps */
    size_t *delta = calloc((size_t)max_step + 2, sizeof *delta);
    size_t *dneg = calloc((size_t)max_step + 2, sizeof *dneg);
    if (delta && dneg) {
        for (int i = 0; i < n; i++) {
            if (blk[i].first < 0 || blk[i].last < blk[i].first) continue;
            delta[blk[i].first] += blk[i].size;
            dneg[blk[i].last + 1] += blk[i].size;
        }
        size_t live = 0;
        for (int s = 0; s <= max_step; s++) {
            live += delta[s];
            live -= dneg[s];
            if (live > *lower_bound) *lower_bound = live;
        }
    }
    free(delta); free(dneg);
    free(order); free(tmp); free(over); free(placed);
    return ERT_OK;
}

bool ert_plan_check(const ert_plan_block *blk, int n, char *why, size_t why_cap) {
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            bool time = blk[i].first <= blk[j].last && blk[j].first <= blk[i].last;
            bool space = blk[i].offset < blk[j].offset + blk[j].size && blk[j].offset < blk[i].offset + blk[i].size;
            if (time && space && blk[i].size && blk[j].size) {
                if (why) snprintf(why, why_cap, "blocks %d [%zu,+%zu) t[%d,%d] and %d [%zu,+%zu) t[%d,%d] overlap", i,
                                  blk[i].offset, blk[i].size, blk[i].first, blk[i].last, j, blk[j].offset, blk[j].size,
                                  blk[j].first, blk[j].last);
                return false;
            }
        }
    return true;
}
