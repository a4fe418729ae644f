/* The compiled reader of Chrome-trace event arrays: one pass over the JSON text, each event's fields
 * written straight into the column buffers of a record batch (see nbprofiler/io/trace/scan.py, which
 * owns the buffers and the rules around this file).
 *
 * The columns are those of the duckdb reader's statement (parse._READ_SQL), with the same values: ph as
 * a kind code, name (null for flow events), the flow start's name, ts / cat / pid / tid / id as text (name,
 * cat, pid and tid as the batch's dictionaries), dur as a double, args as compact JSON; and for the digest,
 * ts in exact integer ns and args.type. Where this reader cannot be sure to write what duckdb writes (a
 * number it would reformat, an escape inside args, a field holding an object...), it marks the event
 * ("flag") and scan.py re-reads that event with duckdb. Invalid JSON stops the scan with an error: the
 * caller then reads the file with duckdb, whose errors (and the exact validator's) are the user's.
 *
 * nbp_gather_text, at the end, gathers a sorted track's text from its runs' chunks (scan.py's gather_text).
 *
 * Plain C, no Python API: loaded with ctypes, which releases the GIL while it runs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

enum { C_NAME, C_FLOW_NAME, C_CAT, C_PID, C_TID, C_TS, C_ID, C_ARGS, C_ARG_TYPE, NCOL };
/* the bits of an event's flag */
enum { F_REREAD = 1, F_TYPE_UNKNOWN = 2, F_TS_UNKNOWN = 4 };
enum { K_PH, K_NAME, K_CAT, K_PID, K_TID, K_TS, K_DUR, K_ID, K_ARGS, NKEY };
/* the event kinds of parse.py (KIND_*) */
enum { KIND_NO_PH = -1, KIND_M = 0, KIND_X, KIND_B, KIND_E, KIND_S, KIND_F, KIND_T, KIND_C, KIND_OTHER };

/* nbp_scan's status */
enum { ST_MORE = 0, ST_DONE = 1, ST_ERROR = 2, ST_TOO_SMALL = 3 };
/* the array's state between calls */
enum { AT_OPEN = 0, AT_FIRST = 1, AT_NEXT = 2, AT_EVENT = 3, AT_END = 4 };

/* The columns written as a dictionary of the batch's distinct values and each row's index in it (-1: null):
 * their offsets and data are the dictionary's. */
#define NDICT 4
static const int dict_cols[NDICT] = {C_NAME, C_CAT, C_PID, C_TID};

typedef struct {
    int32_t *indices;   /* per row */
    uint32_t *slots;    /* open addressing: 1 + dictionary index, 0 for empty */
    uint64_t mask;      /* slots - 1 (a power of 2, at least twice the rows) */
    int64_t *size;      /* values in the dictionary */
} dict_t;

typedef struct {
    int8_t *kind;
    double *dur;
    uint8_t *dur_valid;
    uint8_t *flag;
    int64_t *start, *end;
    int64_t *ts_ns;
    uint8_t *ts_valid;
    int32_t *offsets[NCOL];
    uint8_t *valid[NCOL];
    char *data[NCOL];
    int64_t cap[NCOL];
    dict_t dict[NCOL];  /* .indices NULL: the column is not a dictionary */
} out_t;

static inline uint64_t load32(const char *s) {
    uint32_t w;
    memcpy(&w, s, 4);
    return w;
}

/* The bytes after the last whole word are read as words that may overlap others (the length is in the
 * hash): copied into a word byte by byte, the word's load would wait for the bytes to be stored. */
static inline uint64_t hash_bytes(const char *s, int64_t n) {
    const int64_t len = n;
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n, w = 0;
    for (; n >= 8; s += 8, n -= 8) {  /* a word at a time */
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 32;
    }
    if (n && len >= 8) memcpy(&w, s + n - 8, 8);  /* the value's last 8 bytes */
    else if (n >= 4) w = load32(s) | load32(s + n - 4) << 32;
    else if (n) w = (uint64_t)(uint8_t)s[0] | (uint64_t)(uint8_t)s[n >> 1] << 8 | (uint64_t)(uint8_t)s[n - 1] << 16;
    else w = 0;
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ULL;
    return h ^ (h >> 29);
}

/* The index of the value data[at:at+n] in column k's dictionary, added (and kept in data) when new. */
static inline int32_t dict_index(out_t *o, int k, int64_t at, int64_t n, int *added) {
    dict_t *d = &o->dict[k];
    const char *v = o->data[k] + at;
    uint64_t i = hash_bytes(v, n) & d->mask;
    for (;;) {
        uint32_t slot = d->slots[i];
        if (!slot) break;
        int64_t a = o->offsets[k][slot - 1], b = o->offsets[k][slot];
        if (b - a == n && !memcmp(o->data[k] + a, v, n)) {
            *added = 0;
            return (int32_t)(slot - 1);
        }
        i = (i + 1) & d->mask;
    }
    int32_t idx = (int32_t)*d->size;
    d->slots[i] = (uint32_t)idx + 1;
    *added = 1;
    return idx;
}

/* Results of the value parsers */
enum { OK = 0, FLAG = 1, BAD = -1, SHORT = -2, FULL = -3 };

typedef struct {
    const unsigned char *p, *end;
    int final;              /* the buffer holds the rest of the array: running out of it is an error */
} cur_t;

static inline int is_ws(unsigned char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

static inline void skip_ws(cur_t *c) {
    while (c->p < c->end && *c->p <= ' ' && is_ws(*c->p)) c->p++;
}

/* Bytes that end the plain run of a string: the quote, the backslash, control and non-ASCII bytes. */
static unsigned char stops[256];
static int stops_ready;

/* The first byte of the 8 at p that ends a plain run (as `stops` says), or 8: four tests on a word at once. */
static inline int plain8(const unsigned char *p) {
    uint64_t x;
    memcpy(&x, p, 8);
    const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
    uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
    uint64_t m = (((q - ones) & ~q) | ((b - ones) & ~b) | ((x - ones * 0x20) & ~x) | x) & high;
    return m ? __builtin_ctzll(m) >> 3 : 8;
}

/* The end of the plain run at q (as `stops` says), at most the text's end: 16 bytes at a time with SSE2
 * (a byte below 0x20 or from 0x80 is below 0x20 as a signed byte), else 8 at a time. */
#ifdef __SSE2__
#include <emmintrin.h>
static inline const unsigned char *plain_run(const unsigned char *q, const unsigned char *end) {
    const __m128i quote = _mm_set1_epi8('"'), slash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
    while (end - q >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)q);
        __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, slash)),
                                 _mm_cmplt_epi8(x, space));
        int bits = _mm_movemask_epi8(m);
        if (bits) return q + __builtin_ctz((unsigned)bits);
        q += 16;
    }
    while (q < end && !stops[*q]) q++;
    return q;
}
#else
static inline const unsigned char *plain_run(const unsigned char *q, const unsigned char *end) {
    while (end - q >= 8) {
        int k = plain8(q);
        q += k;
        if (k < 8) return q;
    }
    while (q < end && !stops[*q]) q++;
    return q;
}
#endif

static void init_stops(void) {
    for (int b = 0; b < 256; b++) stops[b] = b == '"' || b == '\\' || b < 0x20 || b >= 0x80;
    stops_ready = 1;
}

/* Ran out of text: SHORT (more text will come), or BAD at the end of the array's text. */
static int out_of_text(cur_t *c) { return c->final ? BAD : SHORT; }

/* The length of the valid UTF-8 sequence starting at s (its first byte >= 0x80), 0 if invalid, -1 if the
 * text ends inside it. */
static int utf8_len(const unsigned char *s, const unsigned char *end) {
    unsigned char b = s[0];
    int n;
    uint32_t cp;
    if (b >= 0xC2 && b <= 0xDF) { n = 2; cp = b & 0x1F; }
    else if (b >= 0xE0 && b <= 0xEF) { n = 3; cp = b & 0x0F; }
    else if (b >= 0xF0 && b <= 0xF4) { n = 4; cp = b & 0x07; }
    else return 0;
    if (end - s < n) return -1;
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0;
    return n;
}

static int hex4(const unsigned char *s, uint32_t *v) {
    uint32_t x = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char h = s[i];
        x <<= 4;
        if (h >= '0' && h <= '9') x |= h - '0';
        else if (h >= 'a' && h <= 'f') x |= h - 'a' + 10;
        else if (h >= 'A' && h <= 'F') x |= h - 'A' + 10;
        else return 0;
    }
    *v = x;
    return 1;
}

/* A string whose opening quote c->p is at. With ``dst`` (room for ``room`` bytes), its value, escapes
 * decoded, is written there and its length put in *len; ``raw`` (with dst): written as it stands, quotes
 * included, and FLAG where it holds an escape. Without dst, the string is only checked and skipped. */
static int string_value(cur_t *c, char *dst, int64_t room, int64_t *len, int raw) {
    const unsigned char *p = c->p + 1;
    int64_t n = 0;
    int flagged = 0;
    if (raw && dst) {
        if (room < 1) return FULL;
        dst[n++] = '"';
    }
    for (;;) {
        const unsigned char *q = plain_run(p, c->end);
        if (dst) {
            if (n + (q - p) > room) return FULL;
            memcpy(dst + n, p, q - p);
            n += q - p;
        }
        p = q;
        if (p >= c->end) return out_of_text(c);
        unsigned char b = *p;
        if (b == '"') {
            p++;
            break;
        }
        if (b < 0x20) return BAD;
        if (b >= 0x80) {
            int k = utf8_len(p, c->end);
            if (k < 0) return out_of_text(c);
            if (k == 0) return BAD;
            if (dst) {
                if (n + k > room) return FULL;
                memcpy(dst + n, p, k);
                n += k;
            }
            p += k;
            continue;
        }
        /* a backslash */
        if (c->end - p < 2) return out_of_text(c);
        unsigned char e = p[1];
        char simple = 0;
        switch (e) {
            case '"': simple = '"'; break;
            case '\\': simple = '\\'; break;
            case '/': simple = '/'; break;
            case 'b': simple = '\b'; break;
            case 'f': simple = '\f'; break;
            case 'n': simple = '\n'; break;
            case 'r': simple = '\r'; break;
            case 't': simple = '\t'; break;
            case 'u': break;
            default: return BAD;
        }
        if (raw) flagged = 1;
        if (simple) {
            if (dst && raw) {
                if (n + 2 > room) return FULL;
                dst[n++] = '\\';
                dst[n++] = e;
            } else if (dst) {
                if (n + 1 > room) return FULL;
                dst[n++] = simple;
            }
            p += 2;
            continue;
        }
        if (c->end - p < 6) return out_of_text(c);
        uint32_t u;
        if (!hex4(p + 2, &u)) return BAD;
        int width = 6;
        if (u >= 0xD800 && u <= 0xDBFF) {
            uint32_t lo;
            if (c->end - p < 12) return out_of_text(c);
            if (p[6] == '\\' && p[7] == 'u' && hex4(p + 8, &lo) && lo >= 0xDC00 && lo <= 0xDFFF) {
                u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
                width = 12;
            } else {
                flagged = 1;  /* a lone surrogate: what duckdb makes of it is its own */
            }
        } else if (u >= 0xDC00 && u <= 0xDFFF) {
            flagged = 1;
        }
        if (dst && raw) {
            if (n + width > room) return FULL;
            memcpy(dst + n, p, width);
            n += width;
        } else if (dst && !flagged) {
            unsigned char enc[4];
            int k;
            if (u < 0x80) { enc[0] = (unsigned char)u; k = 1; }
            else if (u < 0x800) { enc[0] = 0xC0 | (u >> 6); enc[1] = 0x80 | (u & 0x3F); k = 2; }
            else if (u < 0x10000) {
                enc[0] = 0xE0 | (u >> 12); enc[1] = 0x80 | ((u >> 6) & 0x3F); enc[2] = 0x80 | (u & 0x3F); k = 3;
            } else {
                enc[0] = 0xF0 | (u >> 18); enc[1] = 0x80 | ((u >> 12) & 0x3F);
                enc[2] = 0x80 | ((u >> 6) & 0x3F); enc[3] = 0x80 | (u & 0x3F); k = 4;
            }
            if (n + k > room) return FULL;
            memcpy(dst + n, enc, k);
            n += k;
        }
        p += width;
    }
    if (raw && dst) {
        if (n + 1 > room) return FULL;
        dst[n++] = '"';
    }
    c->p = p;
    if (len) *len = n;
    return flagged ? FLAG : OK;
}

/* A number at c->p. *canon (room for ``room`` bytes): the text duckdb writes for it, both as text (a
 * VARCHAR column) and inside JSON, where this reader knows it to be the same: integers as written, except
 * -0; decimals with at most 15 significant digits between 1e-4 and 1e15 without their trailing zeros
 * ("1.50" -> "1.5", "2.00" -> "2.0"). Others (an exponent, more digits, zero) are FLAG. *is_int: no
 * fraction, no exponent. */
static int number_value(cur_t *c, char *canon, int64_t room, int64_t *len, int *is_int) {
    const unsigned char *p = c->p, *s = p;
    int neg = 0;
    if (p < c->end && *p == '-') { neg = 1; p++; }
    if (p >= c->end) return out_of_text(c);
    const unsigned char *int_start = p;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') { while (p < c->end && *p >= '0' && *p <= '9') p++; }
    else return BAD;
    const unsigned char *int_end = p;
    const unsigned char *frac_start = NULL, *frac_end = NULL;
    int has_exp = 0;
    if (p < c->end && *p == '.') {
        p++;
        frac_start = p;
        while (p < c->end && *p >= '0' && *p <= '9') p++;
        frac_end = p;
        if (frac_end == frac_start) return p >= c->end ? out_of_text(c) : BAD;
    }
    if (p < c->end && (*p == 'e' || *p == 'E')) {
        has_exp = 1;
        p++;
        if (p < c->end && (*p == '+' || *p == '-')) p++;
        const unsigned char *d = p;
        while (p < c->end && *p >= '0' && *p <= '9') p++;
        if (p == d) return p >= c->end ? out_of_text(c) : BAD;
    }
    if (p >= c->end && !c->final) return SHORT;  /* the number may go on in the next block */
    c->p = p;
    *is_int = !frac_start && !has_exp;
    if (has_exp) return FLAG;
    int64_t int_digits = int_end - int_start;
    int int_zero = (int_digits == 1 && *int_start == '0');
    if (*is_int) {
        if (int_zero && neg) return FLAG;  /* -0: duckdb writes 0 */
        *len = p - s;
        if (!canon) return OK;
        if (p - s > room) return FULL;
        memcpy(canon, s, p - s);
        return OK;
    }
    while (frac_end > frac_start && frac_end[-1] == '0') frac_end--;
    int64_t sig = int_zero ? 0 : int_digits;
    const unsigned char *f = frac_start;
    if (int_zero) {
        int lead = 0;
        while (f < frac_end && *f == '0') { f++; lead++; }
        if (f == frac_end) return FLAG;  /* zero */
        if (lead > 3) return FLAG;       /* below 1e-4: written with an exponent */
    }
    sig += frac_end - f;
    /* Up to 15 significant digits, the literal is the shortest text of its double. So it is with up to 3
     * decimals below 2^42 (a timestamp in us: Kineto's), where the double's spacing is under 0.0005 and
     * no text with fewer decimals is as near. */
    int few_decimals = frac_end - frac_start <= 3 && int_digits <= 13 &&
                       (int_digits < 13 || memcmp(int_start, "4398046511104", 13) < 0);
    if ((sig > 15 && !few_decimals) || int_digits > 15) return FLAG;
    int64_t keep = frac_end > frac_start ? frac_end - frac_start : 1;
    int64_t n = (int_end - s) + 1 + keep;
    *len = n;
    if (!canon) return OK;
    if (n > room) return FULL;
    memcpy(canon, s, int_end - s);
    canon[int_end - s] = '.';
    if (frac_end > frac_start) memcpy(canon + (int_end - s) + 1, frac_start, keep);
    else canon[int_end - s + 1] = '0';
    return OK;
}

static int literal(cur_t *c, const char *word, int n) {
    if (c->end - c->p < n) {
        if (!c->final && memcmp(c->p, word, c->end - c->p) == 0) return SHORT;
        return BAD;
    }
    if (memcmp(c->p, word, n) != 0) return BAD;
    c->p += n;
    return OK;
}

/* Any JSON value, written compactly to dst when given (args), else checked and skipped. FLAG where the
 * text written may differ from duckdb's. ``depth`` bounds nesting (a hostile file). */
typedef struct {
    int64_t at, len;   /* the value of the object's "type" key, in dst (quotes excluded) */
    int state;         /* 0: no such key, 1: a string, 2: something else (json_extract_string says what) */
} type_t;

static int json_value(cur_t *c, char *dst, int64_t room, int64_t *len, int depth, type_t *type) {
    int64_t n = 0;
    int flagged = 0;
    int r;
    if (depth > 512) return BAD;
    skip_ws(c);
    if (c->p >= c->end) return out_of_text(c);
    unsigned char b = *c->p;
    if (b == '{' || b == '[') {
        unsigned char close = b == '{' ? '}' : ']';
        if (dst) { if (room < 1) return FULL; dst[n++] = b; }
        c->p++;
        skip_ws(c);
        if (c->p >= c->end) return out_of_text(c);
        if (*c->p == close) {
            c->p++;
            if (dst) { if (n + 1 > room) return FULL; dst[n++] = close; }
            *len = n;
            return OK;
        }
        for (;;) {
            int64_t k = 0;
            int is_type = 0;
            if (b == '{') {
                skip_ws(c);
                if (c->p >= c->end) return out_of_text(c);
                if (*c->p != '"') return BAD;
                r = string_value(c, dst ? dst + n : NULL, room - n, &k, 1);
                if (r < 0) return r;
                flagged |= r;
                is_type = type && dst && !type->state && k == 6 && !memcmp(dst + n, "\"type\"", 6);
                n += dst ? k : 0;
                skip_ws(c);
                if (c->p >= c->end) return out_of_text(c);
                if (*c->p != ':') return BAD;
                c->p++;
                if (dst) { if (n + 1 > room) return FULL; dst[n++] = ':'; }
            }
            k = 0;
            r = json_value(c, dst ? dst + n : NULL, room - n, &k, depth + 1, NULL);
            if (r < 0) return r;
            flagged |= r;
            if (is_type) {
                if (r == OK && dst[n] == '"') {
                    type->state = 1;
                    type->at = n + 1;
                    type->len = k - 2;
                } else {
                    type->state = 2;
                }
            }
            n += dst ? k : 0;
            skip_ws(c);
            if (c->p >= c->end) return out_of_text(c);
            if (*c->p == ',') {
                c->p++;
                if (dst) { if (n + 1 > room) return FULL; dst[n++] = ','; }
                continue;
            }
            if (*c->p == close) {
                c->p++;
                if (dst) { if (n + 1 > room) return FULL; dst[n++] = close; }
                break;
            }
            return BAD;
        }
        *len = n;
        return flagged ? FLAG : OK;
    }
    if (b == '"') return string_value(c, dst, room, len, 1);
    if (b == '-' || (b >= '0' && b <= '9')) {
        int is_int;
        int64_t k = 0;
        const unsigned char *at = c->p;
        r = number_value(c, dst, room, &k, &is_int);
        if (r < 0) return r;
        if (r == FLAG) {
            /* written as it stands (the event is re-read) */
            if (dst) {
                if (c->p - at > room) return FULL;
                memcpy(dst, at, c->p - at);
            }
            *len = c->p - at;
            return FLAG;
        }
        *len = dst ? k : 0;
        return OK;
    }
    const char *word = b == 't' ? "true" : b == 'f' ? "false" : b == 'n' ? "null" : NULL;
    if (!word) return BAD;
    int wn = (int)strlen(word);
    r = literal(c, word, wn);
    if (r < 0) return r;
    if (dst) {
        if (wn > room) return FULL;
        memcpy(dst, word, wn);
    }
    *len = wn;
    return OK;
}

/* A field read as text (VARCHAR): *is_null where it is null. */
static int text_value(cur_t *c, char *dst, int64_t room, int64_t *len, int *is_null) {
    unsigned char b = *c->p;
    *is_null = 0;
    if (b == '"') return string_value(c, dst, room, len, 0);
    if (b == '-' || (b >= '0' && b <= '9')) {
        int is_int;
        int r = number_value(c, dst, room, len, &is_int);
        if (r == FLAG) { *is_null = 1; *len = 0; }
        return r;
    }
    if (b == 'n') {
        *is_null = 1;
        *len = 0;
        return literal(c, "null", 4);
    }
    /* true / false / an object / an array: what duckdb's text of it is, duckdb says */
    int64_t k;
    int r = json_value(c, NULL, 0, &k, 0, NULL);
    if (r < 0) return r;
    *is_null = 1;
    *len = 0;
    return FLAG;
}

/* The double nearest to the decimal s[0:n] (its JSON form checked), as strtod gives it: directly where the
 * digits, without the point, make an integer below 2^53 and there are at most 22 decimals (both then exact
 * doubles, and one division rounds correctly), else by strtod. */
static const double pow10_exact[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12,
                                       1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static double decimal_value(const char *s, int64_t n) {
    int64_t i = 0;
    int neg = 0, decimals = -1;
    uint64_t m = 0;
    if (i < n && s[i] == '-') { neg = 1; i++; }
    for (; i < n; i++) {
        char ch = s[i];
        if (ch == '.' && decimals < 0) { decimals = 0; continue; }
        if (ch < '0' || ch > '9' || m > (1ULL << 53) / 10) goto slow;
        m = m * 10 + (uint64_t)(ch - '0');
        if (decimals >= 0) decimals++;
    }
    if (m > (1ULL << 53) || decimals > 22) goto slow;
    double v = decimals > 0 ? (double)m / pow10_exact[decimals] : (double)m;
    return neg ? -v : v;
slow: {
        char tmp[72];
        if (n >= (int64_t)sizeof tmp) return NAN;  /* callers pass fewer than 64 bytes */
        memcpy(tmp, s, n);
        tmp[n] = 0;
        return strtod(tmp, NULL);
    }
}

/* A numeric string (dur given as text), read as duckdb casts it, where its form is plain. */
static int plain_number_text(const char *s, int64_t n) {
    int64_t i = 0;
    if (i < n && s[i] == '-') i++;
    int64_t d = i;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    if (i == d) return 0;
    if (i < n && s[i] == '.') {
        i++;
        int64_t f = i;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
        if (i == f) return 0;
    }
    return i == n && n < 60;
}

static int key_of(const unsigned char *k, int64_t n) {
    switch (n) {
        case 2:
            if (k[0] == 'p' && k[1] == 'h') return K_PH;
            if (k[0] == 't' && k[1] == 's') return K_TS;
            if (k[0] == 'i' && k[1] == 'd') return K_ID;
            return -1;
        case 3:
            if (!memcmp(k, "cat", 3)) return K_CAT;
            if (!memcmp(k, "pid", 3)) return K_PID;
            if (!memcmp(k, "tid", 3)) return K_TID;
            if (!memcmp(k, "dur", 3)) return K_DUR;
            return -1;
        case 4:
            if (!memcmp(k, "name", 4)) return K_NAME;
            if (!memcmp(k, "args", 4)) return K_ARGS;
            return -1;
        default:
            return -1;
    }
}

/* ts (text, as read) -> integer ns, as duckdb's cast to DECIMAL(38,3) gives it where the text is a plain
 * decimal with at most 3 decimals that fits in int64 ns: 1, else -1 (the caller casts that batch the slow
 * way). */
static inline int eight_digits(const char *s) {
    uint64_t w;
    memcpy(&w, s, 8);
    return ((w & 0xF0F0F0F0F0F0F0F0ULL) | (((w + 0x0606060606060606ULL) & 0xF0F0F0F0F0F0F0F0ULL) >> 4))
           == 0x3333333333333333ULL;
}

/* The value of eight digits (`eight_digits`), the first the most significant. */
static inline int64_t value_of_eight(const char *s) {
    uint64_t w;
    memcpy(&w, s, 8);
    w -= 0x3030303030303030ULL;
    w = (w * 10 + (w >> 8)) & 0x00FF00FF00FF00FFULL;
    w = (w * 100 + (w >> 16)) & 0x0000FFFF0000FFFFULL;
    return (int64_t)((w * 10000 + (w >> 32)) & 0xFFFFFFFFULL);
}

static int ts_of(const char *s, int64_t n, int64_t *ns) {
    int64_t i = 0, v = 0;
    int neg = 0;
    if (i < n && s[i] == '-') { neg = 1; i++; }
    int64_t d = i;
    while (n - i >= 8 && v <= 92233720367 && eight_digits(s + i)) {  /* v * 10^8 + 8 digits fits in int64 */
        v = v * 100000000 + value_of_eight(s + i);
        i += 8;
    }
    while (i < n && s[i] >= '0' && s[i] <= '9') {
        if (v > 922337203685477) return -1;  /* past int64 ns: left to the cast */
        v = v * 10 + (s[i] - '0');
        i++;
    }
    if (i == d || v > 9223372036854774) return -1;
    v *= 1000;
    if (i < n && s[i] == '.') {
        i++;
        int64_t f = i, scale = 100;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            if (i - f >= 3) return -1;
            v += (s[i] - '0') * scale;
            scale /= 10;
            i++;
        }
        if (i == f) return -1;
    }
    if (i != n) return -1;
    *ns = neg ? -v : v;
    return 1;
}

static int kind_of(const char *ph, int64_t n, int valid) {
    if (!valid) return KIND_NO_PH;
    if (n != 1) return KIND_OTHER;
    switch (ph[0]) {
        case 'M': return KIND_M;
        case 'X': return KIND_X;
        case 'B': return KIND_B;
        case 'E': return KIND_E;
        case 's': return KIND_S;
        case 'f': return KIND_F;
        case 't': return KIND_T;
        case 'C': return KIND_C;
        default: return KIND_OTHER;
    }
}

/* One event object at c->p into row ``row`` of ``o``. */
static int event(cur_t *c, out_t *o, int64_t row) {
    int64_t at[NCOL], len[NCOL];
    int valid[NCOL];
    char ph[8];
    int64_t ph_len = 0;
    int ph_valid = 0, flagged = 0, r;
    unsigned seen = 0;
    double dur = 0;
    int dur_valid = 0;
    type_t type = {0, 0, 0};
    for (int k = 0; k < NCOL; k++) {
        at[k] = o->offsets[k][o->dict[k].indices ? *o->dict[k].size : row];
        len[k] = 0;
        valid[k] = 0;
    }
    if (*c->p != '{') return BAD;
    c->p++;
    skip_ws(c);
    if (c->p >= c->end) return out_of_text(c);
    if (*c->p == '}') {
        c->p++;
    } else {
        for (;;) {
            skip_ws(c);
            if (c->p >= c->end) return out_of_text(c);
            if (*c->p != '"') return BAD;
            const unsigned char *k0 = c->p + 1, *q = k0;
            if (c->end - q >= 8) q += plain8(q);  /* the keys read are short: their end in one step */
            else while (q < c->end && !stops[*q]) q++;
            if (q < k0 + 8 && q < c->end && *q == '"') {  /* a plain key, as nearly all are */
                c->p = q + 1;
                r = OK;
            } else {
                r = string_value(c, NULL, 0, NULL, 1);
                if (r < 0) return r;
            }
            int key = r == FLAG ? -2 : key_of(k0, c->p - 1 - k0);  /* an escaped key: re-read */
            if (r == FLAG) flagged = 1;
            skip_ws(c);
            if (c->p >= c->end) return out_of_text(c);
            if (*c->p != ':') return BAD;
            c->p++;
            skip_ws(c);
            if (c->p >= c->end) return out_of_text(c);
            if (key >= 0) {
                if (seen & (1u << key)) return BAD;  /* a duplicate key: duckdb rejects the file */
                seen |= 1u << key;
            }
            int col = -1, is_null = 0;
            int64_t n = 0;
            switch (key) {
                case K_PH: {
                    char tmp[64];
                    r = text_value(c, tmp, sizeof tmp, &n, &is_null);
                    if (r == FULL) {  /* a long ph: not a known kind */
                        int64_t k;
                        r = json_value(c, NULL, 0, &k, 0, NULL);
                        n = 2;
                    }
                    if (r >= 0) {
                        ph_valid = !is_null;
                        ph_len = n;
                        memcpy(ph, tmp, n < 8 ? n : 8);
                    }
                    break;
                }
                case K_NAME: col = C_NAME; break;
                case K_CAT: col = C_CAT; break;
                case K_PID: col = C_PID; break;
                case K_TID: col = C_TID; break;
                case K_TS: col = C_TS; break;
                case K_ID: col = C_ID; break;
                case K_DUR: {
                    char tmp[72];
                    unsigned char b = *c->p;
                    if (b == 'n') {
                        r = literal(c, "null", 4);
                    } else if (b == '"') {
                        r = string_value(c, tmp, 64, &n, 0);
                        if (r == FULL) {  /* longer than any plain number: skipped, left to duckdb */
                            r = string_value(c, NULL, 0, NULL, 0);
                            if (r >= 0) r = FLAG;
                        } else if (r == OK && plain_number_text(tmp, n)) {
                            dur = decimal_value(tmp, n);
                            dur_valid = 1;
                        } else if (r >= 0) {
                            r = FLAG;
                        }
                    } else if (b == '-' || (b >= '0' && b <= '9')) {
                        /* its value whatever its form (the text form duckdb gives does not matter) */
                        int is_int;
                        const unsigned char *a0 = c->p;
                        r = number_value(c, NULL, 0, &n, &is_int);
                        if (r >= 0) {
                            if (c->p - a0 < 64) dur = decimal_value((const char *)a0, c->p - a0);
                            dur_valid = c->p - a0 < 64 && isfinite(dur);
                            r = dur_valid ? OK : FLAG;
                        }
                    } else {
                        r = json_value(c, NULL, 0, &n, 0, NULL);
                        if (r >= 0) r = FLAG;
                    }
                    break;
                }
                case K_ARGS: {
                    n = 0;
                    if (*c->p == 'n') {
                        r = literal(c, "null", 4);
                        is_null = 1;
                    } else {
                        r = json_value(c, o->data[C_ARGS] + at[C_ARGS], o->cap[C_ARGS] - at[C_ARGS], &n, 0, &type);
                    }
                    if (r >= 0) {
                        len[C_ARGS] = n;
                        valid[C_ARGS] = !is_null;
                    }
                    break;
                }
                default: {
                    int64_t k;
                    r = json_value(c, NULL, 0, &k, 0, NULL);
                }
            }
            if (col >= 0) {
                r = text_value(c, o->data[col] + at[col], o->cap[col] - at[col], &n, &is_null);
                if (r >= 0) {
                    len[col] = n;
                    valid[col] = !is_null;
                }
            }
            if (r < 0) return r;
            if (r == FLAG) flagged = 1;
            skip_ws(c);
            if (c->p >= c->end) return out_of_text(c);
            if (*c->p == ',') {
                c->p++;
                continue;
            }
            if (*c->p == '}') {
                c->p++;
                break;
            }
            return BAD;
        }
    }
    int kind = kind_of(ph, ph_len, ph_valid);
    /* flows: the name goes to flow_name (s) or nowhere (f, t) */
    if (kind == KIND_S || kind == KIND_F || kind == KIND_T) {
        if (kind == KIND_S && valid[C_NAME]) {
            if (len[C_NAME] > o->cap[C_FLOW_NAME] - at[C_FLOW_NAME]) return FULL;
            memcpy(o->data[C_FLOW_NAME] + at[C_FLOW_NAME], o->data[C_NAME] + at[C_NAME], len[C_NAME]);
            len[C_FLOW_NAME] = len[C_NAME];
            valid[C_FLOW_NAME] = 1;
        }
        len[C_NAME] = 0;
        valid[C_NAME] = 0;
    }
    if (type.state == 1) {
        if (type.len > o->cap[C_ARG_TYPE] - at[C_ARG_TYPE]) return FULL;
        memcpy(o->data[C_ARG_TYPE] + at[C_ARG_TYPE], o->data[C_ARGS] + at[C_ARGS] + type.at, type.len);
        len[C_ARG_TYPE] = type.len;
        valid[C_ARG_TYPE] = 1;
    } else if (type.state == 2) {
        flagged |= F_TYPE_UNKNOWN;
    }
    int64_t ns = 0;
    int ts_state = valid[C_TS] ? ts_of(o->data[C_TS] + at[C_TS], len[C_TS], &ns) : 0;
    if (ts_state < 0) flagged |= F_TS_UNKNOWN;
    o->ts_ns[row] = ns;
    o->ts_valid[row] = ts_state > 0;
    o->kind[row] = (int8_t)kind;
    o->dur[row] = dur_valid ? dur : 0.0;
    o->dur_valid[row] = (uint8_t)dur_valid;
    o->flag[row] = (uint8_t)flagged;
    for (int k = 0; k < NCOL; k++) {
        dict_t *d = &o->dict[k];
        if (d->indices) {
            int32_t idx = -1;
            if (valid[k]) {
                int added;
                idx = dict_index(o, k, at[k], len[k], &added);
                if (added) {
                    o->offsets[k][idx + 1] = (int32_t)(at[k] + len[k]);
                    *d->size += 1;
                }
            }
            d->indices[row] = idx;
            o->valid[k][row] = (uint8_t)valid[k];
            continue;
        }
        o->offsets[k][row + 1] = (int32_t)(at[k] + len[k]);
        o->valid[k][row] = (uint8_t)valid[k];
    }
    return OK;
}

/* The layout of nbp_scan's arguments (scan.ABI): raised with every change to it. */
int nbp_scan_abi(void) { return 2; }

/* Scan events of the array text buf[0:len) from *pos (the array's state in *state), at most max_rows of
 * them, into the row buffers (``ptrs``: kind, dur, dur_valid, flag, start, end, then offsets, valid and
 * data of each text column; ``caps``: the data buffers' sizes). ``final``: buf holds the array's end.
 * ``base``: the file offset of buf[0] (for the events' start and end). Returns the rows written; *status
 * says why it stopped (ST_*), *pos where (the start of the event not written, or of the error). */
int64_t nbp_scan(const char *buf, int64_t len, int64_t *pos, int *state, int final, int64_t max_rows,
                 void **ptrs, const int64_t *caps, int64_t base, int *status) {
    out_t o;
    if (!stops_ready) init_stops();
    o.kind = ptrs[0];
    o.dur = ptrs[1];
    o.dur_valid = ptrs[2];
    o.flag = ptrs[3];
    o.start = ptrs[4];
    o.end = ptrs[5];
    o.ts_ns = ptrs[6];
    o.ts_valid = ptrs[7];
    for (int k = 0; k < NCOL; k++) {
        o.offsets[k] = ptrs[8 + 3 * k];
        o.valid[k] = ptrs[9 + 3 * k];
        o.data[k] = ptrs[10 + 3 * k];
        o.cap[k] = caps[k];
        o.offsets[k][0] = 0;
        o.dict[k] = (dict_t){NULL, NULL, 0, NULL};
    }
    /* then, per dictionary column: its indices, its slots (caps[NCOL] of them) and its size */
    for (int j = 0; j < NDICT; j++) {
        dict_t *d = &o.dict[dict_cols[j]];
        d->indices = ptrs[8 + 3 * NCOL + 3 * j];
        d->slots = ptrs[9 + 3 * NCOL + 3 * j];
        d->size = ptrs[10 + 3 * NCOL + 3 * j];
        d->mask = (uint64_t)caps[NCOL] - 1;
    }
    cur_t c = {(const unsigned char *)buf + *pos, (const unsigned char *)buf + len, final};
    int64_t rows = 0;
    *status = ST_MORE;
    for (;;) {
        skip_ws(&c);
        if (c.p >= c.end) {
            if (final) *status = *state == AT_END ? ST_DONE : ST_ERROR;
            break;
        }
        if (*state == AT_END) {  /* only blanks may follow the array */
            *status = ST_ERROR;
            break;
        }
        if (*state == AT_OPEN) {
            if (*c.p != '[') { *status = ST_ERROR; break; }
            c.p++;
            *state = AT_FIRST;
            continue;
        }
        if (*state == AT_FIRST && *c.p == ']') {
            c.p++;
            *state = AT_END;
            continue;
        }
        if (*state == AT_NEXT) {
            if (*c.p == ']') { c.p++; *state = AT_END; continue; }
            if (*c.p != ',') { *status = ST_ERROR; break; }
            c.p++;
            *state = AT_EVENT;
            continue;
        }
        /* AT_FIRST or AT_EVENT: an event */
        if (rows >= max_rows) break;
        const unsigned char *start = c.p;
        int r = event(&c, &o, rows);
        if (r == OK) {
            o.start[rows] = base + (start - (const unsigned char *)buf);
            o.end[rows] = base + (c.p - (const unsigned char *)buf);
            rows++;
            *state = AT_NEXT;
            continue;
        }
        c.p = start;
        if (r == SHORT) break;
        if (r == FULL) {
            if (rows == 0) *status = ST_TOO_SMALL;
            break;
        }
        *status = ST_ERROR;
        break;
    }
    *pos = (const char *)c.p - buf;
    return rows;
}

/* Rows of text columns in chunks (Arrow large_string: int64 offsets, then the bytes) gathered into one:
 * output row i is row rows[i] of chunk chunks[i], whose offsets (from its array's own offset) and bytes are
 * offsets[chunks[i]] and data[chunks[i]]; an output row with valid[i] == 0 (valid may be NULL: all valid)
 * gets no bytes. Writes out_offsets[0..n] and, where out_data is not NULL, the bytes; returns the bytes'
 * total (a first call without out_data sizes the second's buffer). Arrow's take joins the chunks into one
 * array before it gathers: this copies each byte once (scan.py's gather_text). */
int64_t nbp_gather_text(int64_t n, const int32_t *chunks, const int64_t *rows, const int64_t *const *offsets,
                        const unsigned char *const *data, const unsigned char *valid, int64_t *out_offsets,
                        unsigned char *out_data)
{
    int64_t at = 0;
    out_offsets[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!valid || valid[i]) {
            const int64_t *o = offsets[chunks[i]];
            int64_t r = rows[i], len = o[r + 1] - o[r];
            if (out_data && len > 0)
                memcpy(out_data + at, data[chunks[i]] + o[r], (size_t)len);
            at += len;
        }
        out_offsets[i + 1] = at;
    }
    return at;
}
