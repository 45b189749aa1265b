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
 * Step 2 does not scan every placed block: a max-tree over lifetimes ends
 * (indexed by order of first use) reports only the placed blocks that overlap,
 * so a block costs O((k + 1) log n) for its k overlapping neighbours, and the
 * whole plan O(n log n + K log n), K = number of overlapping pairs (small in a
 * chain: 100k nodes plan in milliseconds; a graph where most tensors live at
 * once, e.g. training's saved activations, approaches the old O(n^2 log n)).
 * The offsets are exactly those of the all-pairs scan it replaced
 * (tests/test_planner.c keeps that scan as its oracle).
 *
 * Sizes are rounded up to `align`; offsets are multiples of `align`.
 */
#include "planner_internal.h"

#include <limits.h>
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

/* Blocks whose lifetime overlaps [f, l]: those with first <= l (a prefix of
 * the blocks sorted by first) and last >= f. A max-tree over `last`, indexed
 * by rank in that order, finds them in O((k + 1) log n); a block enters the
 * tree when it is placed, so only placed blocks are reported. */
typedef struct {
    int *max_last; /* 2 * cap entries; leaf cap + rank; INT_MIN = not placed */
    int cap;
} ert_plan_tree;

static void tree_set(ert_plan_tree *t, int rank, int last) {
    int i = t->cap + rank;
    t->max_last[i] = last;
    for (i /= 2; i >= 1; i /= 2) {
        int a = t->max_last[2 * i], b = t->max_last[2 * i + 1];
        t->max_last[i] = a > b ? a : b;
    }
}

/* Appends to out[] the block ids (byfirst[rank]) of placed leaves with rank
 * < hi and last >= f; returns the new count. */
typedef struct {
    int node, lo, width; /* tree node covering ranks [lo, lo + width) */
} ert_plan_visit;

static int tree_query(const ert_plan_tree *t, const int32_t *byfirst, int hi, int f, int32_t *out, int k) {
    /* DFS, left child first (ascending rank); depth <= 31 as cap <= 2^30 */
    ert_plan_visit stack[2 * 32];
    int sp = 0;
    stack[sp++] = (ert_plan_visit){1, 0, t->cap};
    while (sp) {
        int node = stack[--sp].node, lo = stack[sp].lo, width = stack[sp].width;
        if (lo >= hi || t->max_last[node] < f || t->max_last[node] == INT_MIN) continue;
        if (width == 1) {
            out[k++] = byfirst[node - t->cap];
            continue;
        }
        stack[sp++] = (ert_plan_visit){2 * node + 1, lo + width / 2, width / 2};
        stack[sp++] = (ert_plan_visit){2 * node, lo, width / 2};
    }
    return k;
}

static int cmp_first(const void *pa, const void *pb, void *ctx) {
    const ert_plan_block *b = ctx;
    int32_t a = *(const int32_t *)pa, c = *(const int32_t *)pb;
    if (b[a].first != b[c].first) return b[a].first < b[c].first ? -1 : 1;
    return a < c ? -1 : (a > c);
}

ert_status ert_plan_offsets(ert_plan_block *blk, int n, size_t align, size_t *peak, size_t *lower_bound) {
    *peak = 0;
    *lower_bound = 0;
    if (n <= 0) return ERT_OK;
    if (n > (1 << 30)) return ERT_E_NOMEM;
    int cap = 1;
    while (cap < n) cap *= 2;
    int32_t *order = malloc((size_t)n * sizeof *order);
    int32_t *tmp = malloc((size_t)n * sizeof *tmp);
    int32_t *over = malloc((size_t)n * sizeof *over);
    int32_t *byfirst = malloc((size_t)n * sizeof *byfirst);
    int32_t *rank = malloc((size_t)n * sizeof *rank);
    ert_plan_tree tree = {.max_last = malloc(2 * (size_t)cap * sizeof *tree.max_last), .cap = cap};
    if (!order || !tmp || !over || !byfirst || !rank || !tree.max_last) {
        free(order); free(tmp); free(over); free(byfirst); free(rank); free(tree.max_last);
        return ERT_E_NOMEM;
    }
    int max_step = 0;
    for (int i = 0; i < n; i++) {
        order[i] = i;
        byfirst[i] = i;
        size_t s = ert_align_up(blk[i].size, align);
        if (s < blk[i].size) { /* overflow */
            free(order); free(tmp); free(over); free(byfirst); free(rank); free(tree.max_last);
            return ERT_E_ARENA;
        }
        blk[i].size = s;
        if (blk[i].last > max_step) max_step = blk[i].last;
    }
    for (int i = 0; i < 2 * cap; i++) tree.max_last[i] = INT_MIN;
    sort_idx(order, tmp, n, cmp_size_desc, blk);
    sort_idx(byfirst, tmp, n, cmp_first, blk);
    for (int r = 0; r < n; r++) rank[byfirst[r]] = r;
    for (int oi = 0; oi < n; oi++) {
        ert_plan_block *b = &blk[order[oi]];
        /* hi = number of blocks with first <= b->last */
        int lo = 0, hi = n;
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2;
            if (blk[byfirst[mid]].first <= b->last) lo = mid + 1;
            else hi = mid;
        }
        int k = tree_query(&tree, byfirst, lo, b->first, over, 0);
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
        tree_set(&tree, rank[order[oi]], b->last);
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
    free(order); free(tmp); free(over); free(byfirst); free(rank); free(tree.max_last);
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
