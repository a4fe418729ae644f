/* The enclosing event of a time on one track, for the host-dispatch analysis (nbprofiler/analysis/dispatch.py,
 * which owns the rules and the numpy form of the same search, used where this library is not built).
 *
 * A track's events are given as their starts, sorted (NaN last, as numpy sorts them), and their durations;
 * an event's end is its start + its duration, a missing (NaN) duration counting as 0 and an infinite one as
 * the largest finite double (numpy's nan_to_num). The innermost event enclosing a time t is the latest
 * start among the `depth` events starting last at or before t whose end reaches t.
 *
 * The times are searched with a cursor: launches and their tasks come in time order, so the next time's
 * place is found by galloping from the last one's, not by a search of the whole track.
 *
 * Plain C, no Python API: loaded with ctypes, which releases the GIL while it runs. */
#include <float.h>
#include <math.h>
#include <stdint.h>

int nbp_enclosing_abi(void) { return 1; }

static double end_of(double start, double dur) {
    if (isnan(dur)) return start;
    if (isinf(dur)) return start + (dur > 0 ? DBL_MAX : -DBL_MAX);
    return start + dur;
}

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
