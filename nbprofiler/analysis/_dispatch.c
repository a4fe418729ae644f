/* The host-dispatch analysis's kernels (nbprofiler/analysis/dispatch.py, which owns the rules and their numpy
 * form, used where this library is not built): the event enclosing a time on a track, the flow that
 * launched each device task, and the walk over the device's tasks in start order.
 *
 * A track's events are given as their starts, sorted (NaN last, as numpy sorts them), and their durations;
 * an event's end is its start + its duration, a missing (NaN) duration counting as 0 and an infinite one as
 * the largest finite double (numpy's nan_to_num). The innermost event enclosing a time t is the latest
 * start among the `depth` events starting last at or before t whose end reaches it. Times are searched with
 * a cursor: launches and their tasks come in time order, so the next time's place is found by galloping
 * from the last one's, not by a search of the whole track.
 *
 * Every number is computed as numpy computes it in dispatch.py (the same operations in the same order), so
 * that both forms give the same frames to the bit (tests/test_dispatch_slices.py).
 *
 * Plain C, no Python API: loaded with ctypes, which releases the GIL while it runs. */
#include <float.h>
#include <math.h>
#include <stdint.h>

int nbp_dispatch_abi(void) { return 1; }

/* numpy's nan_to_num of a double: NaN -> 0, an infinity -> the largest finite double of its sign. */
static double finite_np(double x) {
    if (isnan(x)) return 0.0;
    if (isinf(x)) return x > 0 ? DBL_MAX : -DBL_MAX;
    return x;
}

static double end_of(double start, double dur) { return start + finite_np(dur); }

/* How many of starts[0:n) are <= t (t not NaN), searched from `hint` (the count for an earlier time). */
static int64_t count_at_or_before(const double *starts, int64_t n, double t, int64_t hint) {
    int64_t lo = 0, hi = n;   /* the count is in [lo, hi] */
    if (hint > 0 && hint <= n && starts[hint - 1] <= t) {
        int64_t step = 1;
        lo = hint;
        for (;;) {   /* gallop: every start before lo is <= t */
            int64_t probe = lo + step - 1;
            if (probe >= n) break;
            if (!(starts[probe] <= t)) { hi = probe; break; }
            lo = probe + 1;
            step *= 2;
        }
    } else if (hint > 0 && hint <= n) {
        hi = hint - 1;   /* starts[hint - 1] > t (or NaN): the count is before it */
    }
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (starts[mid] <= t) lo = mid + 1; else hi = mid;
    }
    return lo;
}

/* The position of the innermost event enclosing t, -1 where none; *hint carries the cursor. */
static int64_t innermost_one(const double *starts, const double *durs, int64_t n, double t, int64_t depth,
                             int64_t *hint) {
    if (isnan(t)) return -1;
    int64_t count = count_at_or_before(starts, n, t, *hint);
    *hint = count;
    for (int64_t k = 0, at = count - 1; k < depth && at >= 0; k++, at--) {
        if (end_of(starts[at], durs[at]) >= t) return at;
    }
    return -1;
}

/* Per time of times[0:m), the position of the innermost event enclosing it, or -1, into out[0:m). */
void nbp_innermost(const double *starts, const double *durs, int64_t n, const double *times, int64_t m,
                   int64_t depth, int64_t *out) {
    int64_t hint = 0;
    for (int64_t i = 0; i < m; i++) out[i] = innermost_one(starts, durs, n, times[i], depth, &hint);
}

/* Per device task, the first flow (in flow order) whose head lands in it. Flow f counts where kind[f] is
 * set and its head's track (head_track[f], an id below n_ids) is a device track: track_index[id] >= 0, the
 * place of the track among the n_tracks device tracks, whose events are starts[k][0:lens[k]) and
 * durs[k][...]; its task is the innermost one enclosing head_us[f], numbered base[k] + its position. out
 * (one entry per task, int64 where `wide` else int32, set to -1 by the caller) receives f where the task
 * has no flow yet; hints: room for a cursor per track. */
void nbp_first_flows(int64_t n_flows, const int32_t *head_track, const double *head_us, const uint8_t *kind,
                     int64_t n_ids, const int64_t *track_index, int64_t n_tracks, const double *const *starts,
                     const double *const *durs, const int64_t *lens, const int64_t *base, int64_t depth,
                     int64_t *hints, int wide, void *out) {
    int64_t *out64 = (int64_t *)out;
    int32_t *out32 = (int32_t *)out;
    for (int64_t k = 0; k < n_tracks; k++) hints[k] = 0;
    for (int64_t f = 0; f < n_flows; f++) {
        int32_t id = head_track[f];
        if (!kind[f] || id < 0 || id >= n_ids) continue;
        int64_t k = track_index[id];
        if (k < 0) continue;
        int64_t at = innermost_one(starts[k], durs[k], lens[k], head_us[f], depth, &hints[k]);
        if (at < 0) continue;
        int64_t task = base[k] + at;
        if (wide) {
            if (out64[task] < 0) out64[task] = f;
        } else if (out32[task] < 0) {
            out32[task] = (int32_t)f;   /* the caller chose int32: fewer than 2**31 flows */
        }
    }
}

/* numpy's maximum and fmax of two doubles, to the bit (signed zeros and NaN included). */
static double max_np(double a, double b) { return (a >= b || isnan(a)) ? a : b; }
static double fmax_np(double a, double b) { return (a >= b || isnan(b)) ? a : b; }

/* The order of the device's tasks: by start (NaN last), ties by track; head[k]: track k's next start. */
static int before(const double *head, int64_t a, int64_t b) {
    double sa = head[a], sb = head[b];
    if (isnan(sa) || isnan(sb)) return isnan(sb) && (!isnan(sa) || a < b);
    return sa < sb || (sa == sb && a < b);
}

static void sift_down(int64_t *heap, int64_t n, int64_t i, const double *head) {
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && before(head, heap[l], heap[m])) m = l;
        if (r < n && before(head, heap[r], heap[m])) m = r;
        if (m == i) return;
        int64_t t = heap[i]; heap[i] = heap[m]; heap[m] = t;
        i = m;
    }
}

/* The walk of dispatch.py's _walk over the device's tasks in start order (ties by track), up to max_tasks
 * of them per call, from where the last call stopped (pos: per track its next task; state_i: [0] the
 * windows starting at or before the last task, [1] the launched tasks so far; state_d: [0] the latest end
 * so far, [1] the first start, [2] the last end; heap and head: room for a track number and a start per
 * track).
 *
 * Per task: its end; the latest end of the tasks before it; its window (the last starting at or before
 * it, if it is before that window's end; else the sentinel at n_win); its gap (its start - the later of
 * that latest end and its window's start, not below 0, NaN without a finite one), summed into
 * dev_idle[key] where it is in a window (every task where there are none). A task with a launch or
 * framework flow (ln_of / fw_of, int64 where `wide` else int32; -1: none) is launched: its flow (the
 * launch flow, else the framework one) was sent at tail_us[flow]; it waited where its gap is > 0 and the
 * launch came at or after the latest end - tolerance; counts and waits per key; its latency (start -
 * launch) at latency[launched so far]. The launched tasks that waited (every launched task where
 * select_all) are written to the o_* arrays (room for max_tasks), their number to *n_out. Returns the
 * tasks walked (0: none left). */
int64_t nbp_walk(int64_t n_tracks, const double *const *starts, const double *const *durs, const int64_t *lens,
                 const int64_t *base, const int64_t *lo, const int64_t *const *xs,
                 const void *ln_of, const void *fw_of, int wide, const double *tail_us,
                 int64_t n_win, const double *w_start, const double *w_end, const int64_t *w_step,
                 const int64_t *w_key, double tolerance, int select_all,
                 int64_t *pos, int64_t *state_i, double *state_d, int64_t *heap, double *head,
                 int64_t *counts, int64_t *waits, double *dev_idle, double *latency, int64_t max_tasks,
                 int64_t *o_pos, int64_t *o_row, double *o_start, double *o_end, int64_t *o_flow, int64_t *o_fw,
                 uint8_t *o_is_launch, double *o_launch, int64_t *o_step, double *o_gap, uint8_t *o_waited,
                 double *o_idle, int64_t *o_key, int64_t *n_out) {
    int64_t n_heap = 0, walked = 0, out = 0;
    int64_t placed = state_i[0], launched = state_i[1];
    double busy_before = state_d[0], first_start = state_d[1], last_end = state_d[2];
    for (int64_t k = 0; k < n_tracks; k++) {
        if (pos[k] < lens[k]) {
            heap[n_heap++] = k;
            head[k] = starts[k][pos[k]];
        }
    }
    for (int64_t i = n_heap / 2 - 1; i >= 0; i--) sift_down(heap, n_heap, i, head);
    while (n_heap > 0 && walked < max_tasks) {
        int64_t k = heap[0], p = pos[k];
        double s = starts[k][p], e = end_of(s, durs[k][p]);
        int64_t task = base[k] + p, row = lo[k] + (xs[k] ? xs[k][p] : p);
        if (++pos[k] < lens[k]) head[k] = starts[k][pos[k]]; else heap[0] = heap[--n_heap];
        sift_down(heap, n_heap, 0, head);
        walked++;

        double busy = busy_before;   /* the latest end of the tasks started before this one */
        busy_before = max_np(busy_before, e);
        int64_t w = n_win;           /* the sentinel: in no window */
        if (!isnan(s)) {
            while (placed < n_win && w_start[placed] <= s) placed++;
            if (placed > 0 && s < w_end[placed - 1]) w = placed - 1;
        }
        int64_t step = w_step[w], key = w_key[w];
        busy = fmax_np(busy, w_start[w]);
        double gap = s - busy;
        gap = (gap >= 0 || isnan(gap)) ? gap : 0.0;
        if (!isfinite(busy)) gap = NAN;
        if (n_win == 0 || step >= 0) dev_idle[key] += finite_np(gap);
        first_start = (first_start <= s || isnan(first_start)) ? first_start : s;
        last_end = max_np(last_end, e);

        int64_t ln = wide ? ((const int64_t *)ln_of)[task] : ((const int32_t *)ln_of)[task];
        int64_t fw = wide ? ((const int64_t *)fw_of)[task] : ((const int32_t *)fw_of)[task];
        if (ln < 0 && fw < 0) continue;
        int64_t flow = ln >= 0 ? ln : fw;
        double launch = tail_us[flow];
        int waited = gap > 0 && launch >= busy - tolerance;
        double idle = waited ? gap : 0.0;
        counts[key]++;
        waits[key] += waited;
        latency[launched] = s - launch;
        if (waited || select_all) {
            o_pos[out] = launched; o_row[out] = row; o_start[out] = s; o_end[out] = e; o_flow[out] = flow;
            o_fw[out] = fw; o_is_launch[out] = ln >= 0; o_launch[out] = launch; o_step[out] = step;
            o_gap[out] = gap; o_waited[out] = (uint8_t)waited; o_idle[out] = idle; o_key[out] = key;
            out++;
        }
        launched++;
    }
    state_i[0] = placed; state_i[1] = launched;
    state_d[0] = busy_before; state_d[1] = first_start; state_d[2] = last_end;
    *n_out = out;
    return walked;
}
