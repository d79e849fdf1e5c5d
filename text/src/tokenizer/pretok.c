/* pretok.c - pre-tokenizer stages: regex splits (PCRE2) and ByteLevel. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/pretok.h"
#include "tf/diag.h"
#include "unicode/unicode.h"

/* The HF SplitDelimiterBehavior values. */
typedef enum split_behavior {
	SPLIT_REMOVED,
	SPLIT_ISOLATED,
	SPLIT_MERGED_PREV,
	SPLIT_MERGED_NEXT,
	SPLIT_CONTIGUOUS,
} split_behavior;

static const char *const behavior_names[] = {
	[SPLIT_REMOVED] = "Removed",
	[SPLIT_ISOLATED] = "Isolated",
	[SPLIT_MERGED_PREV] = "MergedWithPrevious",
	[SPLIT_MERGED_NEXT] = "MergedWithNext",
	[SPLIT_CONTIGUOUS] = "Contiguous",
};

/* One stage: an optional leading space, then an optional split. */
typedef struct stage {
	bool prefix_space;
	pcre2_code *re;         /* NULL: no split */
	split_behavior behavior;
	bool invert;
} stage;

struct tf_pretok {
	stage *stages;
	int n;
	bool bytelevel;
};

/* Regex work is bounded so a hostile pattern fails instead of hanging. */
#define PRETOK_MATCH_LIMIT 20000000u
#define PRETOK_DEPTH_LIMIT 100000u
#define PRETOK_MAX_STAGES 16
/* The JIT matcher's stack: 32 KiB to start, at most 8 MiB; a match that
 * needs more fails instead of growing without bound. */
#define PRETOK_JIT_STACK_MIN (32u * 1024)
#define PRETOK_JIT_STACK_MAX (8u * 1024 * 1024)

/* ---- building ---- */

/*
 * PCRE2 compiles the class intersection "[a&&[b]]" of Rust/Oniguruma without
 * error but as a plain union: refuse it rather than split wrongly.
 */
static bool has_class_intersection(const char *re)
{
	int depth = 0;

	for (; *re; re++) {
		if (*re == '\\') {
			if (!re[1])
				break;
			re++;
		} else if (*re == '[') {
			depth++;
		} else if (*re == ']' && depth) {
			depth--;
		} else if (depth && re[0] == '&' && re[1] == '&') {
			return true;
		}
	}
	return false;
}

/*
 * HF's Rust tokenizers run Oniguruma, whose \s is Unicode White_Space;
 * PCRE2's \s (UCP) also takes U+180E.  Spell \s and \S as the property so
 * both engines split alike.  Every other escape passes through untouched.
 */
static int translate_re(const char *re, tf_bytes *out)
{
	int rc = TF_OK;

	for (; *re && !rc; re++) {
		if (re[0] == '\\' && (re[1] == 's' || re[1] == 'S')) {
			rc = tf_bytes_append(out, re[1] == 's' ? "\\p{White_Space}" : "\\P{White_Space}", 15);
			re++;
		} else if (re[0] == '\\' && re[1]) {
			rc = tf_bytes_append(out, re, 2);
			re++;
		} else {
			rc = tf_bytes_append(out, re, 1);
		}
	}
	return rc ? rc : tf_bytes_append(out, "", 1);
}

static int compile_re(const char *pattern, bool literal, const char *where,
		      pcre2_code **out)
{
	/* PCRE2_LITERAL refuses UCP, which only changes classes anyway. */
	uint32_t opts = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
	PCRE2_UCHAR msg[256];
	tf_bytes re = { 0 };
	PCRE2_SIZE at;
	int err;

	if (!literal && has_class_intersection(pattern))
		return tf_diag_set(TF_ERR_UNSUPPORTED,
				   "%s: regex uses a class intersection (&&), which PCRE2 does not support",
				   where);
	if (literal ? tf_bytes_append(&re, pattern, strlen(pattern) + 1) : translate_re(pattern, &re))
		return tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", where);
	*out = pcre2_compile((PCRE2_SPTR)re.p, PCRE2_ZERO_TERMINATED, opts, &err, &at, NULL);
	tf_bytes_free(&re);
	if (!*out) {
		pcre2_get_error_message(err, msg, sizeof(msg));
		return tf_diag_set(TF_ERR_FORMAT, "%s: bad regex \"%s\" near offset %zu: %s",
				   where, pattern, (size_t)at, (char *)msg);
	}
	/* Without JIT (some targets) pcre2_match interprets: same results. */
	pcre2_jit_compile(*out, PCRE2_JIT_COMPLETE);
	return TF_OK;
}

static int add_split(tf_pretok *p, const char *where, const char *pattern,
		     bool literal, split_behavior b, bool invert)
{
	stage *s = &p->stages[p->n];
	int rc = compile_re(pattern, literal, where, &s->re);

	if (rc)
		return rc;
	s->behavior = b;
	s->invert = invert;
	p->n++;
	return TF_OK;
}

static bool json_bool(const cJSON *obj, const char *key, bool dflt)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsBool(v) ? cJSON_IsTrue(v) : dflt;
}

static int parse_split(tf_pretok *p, const cJSON *spec, const char *where)
{
	const cJSON *pat = cJSON_GetObjectItemCaseSensitive(spec, "pattern");
	const cJSON *beh = cJSON_GetObjectItemCaseSensitive(spec, "behavior");
	const cJSON *re = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
	const cJSON *str = cJSON_GetObjectItemCaseSensitive(pat, "String");
	size_t b;

	if (!cJSON_IsString(re) && !cJSON_IsString(str))
		return tf_diag_set(TF_ERR_FORMAT,
				   "%s: Split needs pattern.Regex or pattern.String", where);
	if (!cJSON_IsString(beh))
		return tf_diag_set(TF_ERR_FORMAT, "%s: Split needs a behavior", where);
	for (b = 0; b < sizeof(behavior_names) / sizeof(*behavior_names); b++)
		if (!strcmp(beh->valuestring, behavior_names[b]))
			break;
	if (b == sizeof(behavior_names) / sizeof(*behavior_names))
		return tf_diag_set(TF_ERR_UNSUPPORTED, "%s: unknown Split behavior \"%s\"",
				   where, beh->valuestring);
	if (cJSON_IsString(re))
		return add_split(p, where, re->valuestring, false, (split_behavior)b,
				 json_bool(spec, "invert", false));
	return add_split(p, where, str->valuestring, true, (split_behavior)b,
			 json_bool(spec, "invert", false));
}

static int parse_stage(tf_pretok *p, const cJSON *spec, const char *where, int depth)
{
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(spec, "type");
	const char *t;
	char sub[512];
	int rc;

	if (!cJSON_IsObject(spec) || !cJSON_IsString(type))
		return tf_diag_set(TF_ERR_FORMAT, "%s: expected an object with a \"type\"", where);
	t = type->valuestring;
	if (p->bytelevel)
		return tf_diag_set(TF_ERR_UNSUPPORTED,
				   "%s: \"%s\" after ByteLevel is not supported", where, t);
	if (!strcmp(t, "Sequence")) {
		const cJSON *list = cJSON_GetObjectItemCaseSensitive(spec, "pretokenizers");
		const cJSON *it;
		int i = 0;

		if (!cJSON_IsArray(list) || depth > 4)
			return tf_diag_set(TF_ERR_FORMAT,
					   "%s: Sequence needs a pretokenizers array", where);
		cJSON_ArrayForEach(it, list) {
			snprintf(sub, sizeof(sub), "%s.pretokenizers[%d]", where, i++);
			if ((rc = parse_stage(p, it, sub, depth + 1)))
				return rc;
		}
		return TF_OK;
	}
	if (p->n == PRETOK_MAX_STAGES)
		return tf_diag_set(TF_ERR_RANGE, "%s: more than %d pre-tokenizers",
				   where, PRETOK_MAX_STAGES);
	if (!strcmp(t, "Split"))
		return parse_split(p, spec, where);
	if (!strcmp(t, "Digits"))
		return add_split(p, where, json_bool(spec, "individual_digits", false) ?
				 "\\p{N}" : "\\p{N}+", false, SPLIT_ISOLATED, false);
	if (!strcmp(t, "ByteLevel")) {
		stage *s = &p->stages[p->n];

		p->bytelevel = true;
		if (json_bool(spec, "use_regex", true)) {
			if ((rc = add_split(p, where, TF_PRETOK_GPT2_REGEX, false,
					    SPLIT_ISOLATED, false)))
				return rc;
		} else {
			p->n++;
		}
		s->prefix_space = json_bool(spec, "add_prefix_space", false);
		return TF_OK;
	}
	return tf_diag_set(TF_ERR_UNSUPPORTED, "%s: type \"%s\" is not supported",
			   where, t);
}

int tf_pretok_init(const cJSON *spec, const char *where, tf_pretok **out)
{
	tf_pretok *p;
	int rc;

	*out = NULL;
	p = calloc(1, sizeof(*p));
	if (!p || !(p->stages = calloc(PRETOK_MAX_STAGES, sizeof(*p->stages)))) {
		free(p);
		return tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", where);
	}
	if (spec && !cJSON_IsNull(spec) && (rc = parse_stage(p, spec, where, 0))) {
		tf_pretok_free(p);
		return rc;
	}
	*out = p;
	return TF_OK;
}

void tf_pretok_free(tf_pretok *p)
{
	int i;

	if (!p)
		return;
	for (i = 0; i < p->n; i++)
		pcre2_code_free(p->stages[i].re);
	free(p->stages);
	free(p);
}

bool tf_pretok_bytelevel(const tf_pretok *p)
{
	return p->bytelevel;
}

/* ---- splitting ---- */

typedef struct seg {
	size_t start, end;
	bool match;
} seg;

/* Per-stage scratch: a stage's output ranges stay live while later stages run. */
typedef struct stage_scratch {
	tf_bytes text;          /* the piece with its prefix space */
	seg *segs;
	size_t n, cap;
} stage_scratch;

typedef struct run_ctx {
	const tf_pretok *p;
	pcre2_match_data *md;
	pcre2_match_context *mctx;
	stage_scratch scratch[PRETOK_MAX_STAGES];
	tf_pretok_emit emit;
	void *emit_ctx;
} run_ctx;

static int push_seg(stage_scratch *sc, size_t start, size_t end, bool match)
{
	if (sc->n == sc->cap) {
		size_t cap = sc->cap ? 2 * sc->cap : 64;
		seg *s = realloc(sc->segs, cap * sizeof(*s));

		if (!s)
			return tf_diag_set(TF_ERR_NOMEM, "pre-tokenizer: out of memory");
		sc->segs = s;
		sc->cap = cap;
	}
	sc->segs[sc->n++] = (seg){ start, end, match };
	return TF_OK;
}

/* Fills sc->segs with the gaps and matches of re over s, in order (the
 * find_matches of HF's Pattern for a regex, empty matches included). */
static int find_matches(run_ctx *r, const pcre2_code *re, stage_scratch *sc,
			const char *s, size_t len)
{
	size_t off = 0, prev = 0;
	uint32_t opts = 0;
	int rc;

	sc->n = 0;
	while (off <= len) {
		PCRE2_SIZE *ov;

		rc = pcre2_match(re, (PCRE2_SPTR)s, len, off, opts | PCRE2_NO_UTF_CHECK,
				 r->md, r->mctx);
		if (rc == PCRE2_ERROR_NOMATCH) {
			if (!opts)
				break;
			/* No non-empty match here after an empty one: step a char. */
			off++;
			while (off < len && ((uint8_t)s[off] & 0xC0) == 0x80)
				off++;
			opts = 0;
			continue;
		}
		if (rc < 0) {
			PCRE2_UCHAR msg[128];

			pcre2_get_error_message(rc, msg, sizeof(msg));
			return tf_diag_set(TF_ERR_RANGE, "pre-tokenizer regex: %s", (char *)msg);
		}
		ov = pcre2_get_ovector_pointer(r->md);
		if (ov[0] > prev && (rc = push_seg(sc, prev, ov[0], false)))
			return rc;
		if ((rc = push_seg(sc, ov[0], ov[1], true)))
			return rc;
		prev = off = ov[1];
		opts = ov[0] == ov[1] ? PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED : 0;
	}
	if (prev < len)
		return push_seg(sc, prev, len, false);
	return TF_OK;
}

/* Applies the split behaviour in place: HF's NormalizedString::split fold. */
static void apply_behavior(const stage *st, stage_scratch *sc)
{
	seg *v = sc->segs;
	size_t i, n = 0;
	bool prev = false;

	if (st->invert)
		for (i = 0; i < sc->n; i++)
			v[i].match = !v[i].match;
	switch (st->behavior) {
	case SPLIT_ISOLATED:
		return;
	case SPLIT_REMOVED:
		for (i = 0; i < sc->n; i++)
			if (!v[i].match)
				v[n++] = v[i];
		break;
	case SPLIT_MERGED_PREV:
		for (i = 0; i < sc->n; i++) {
			if (v[i].match && !prev && n)
				v[n - 1].end = v[i].end;
			else
				v[n++] = v[i];
			prev = v[i].match;
		}
		break;
	case SPLIT_MERGED_NEXT:
		/* Walk backwards, folding each match into the piece after it. */
		n = sc->n;
		for (i = sc->n; i-- > 0;) {
			if (v[i].match && !prev && n < sc->n)
				v[n].start = v[i].start;
			else
				v[--n] = v[i];
			prev = v[i].match;
		}
		memmove(v, v + n, (sc->n - n) * sizeof(*v));
		n = sc->n - n;
		break;
	case SPLIT_CONTIGUOUS:
		for (i = 0; i < sc->n; i++) {
			if (n && v[i].match == prev)
				v[n - 1].end = v[i].end;
			else
				v[n++] = v[i];
			prev = v[i].match;
		}
		break;
	}
	sc->n = n;
}

static int run_stage(run_ctx *r, int k, const char *s, size_t len)
{
	const stage *st;
	stage_scratch *sc;
	size_t i;
	int rc;

	if (k == r->p->n)
		return r->emit(r->emit_ctx, s, len);
	st = &r->p->stages[k];
	sc = &r->scratch[k];
	if (st->prefix_space && s[0] != ' ') {
		sc->text.len = 0;
		if ((rc = tf_bytes_append(&sc->text, " ", 1)) ||
		    (rc = tf_bytes_append(&sc->text, s, len)))
			return tf_diag_set(rc, "pre-tokenizer: out of memory");
		s = sc->text.p;
		len = sc->text.len;
	}
	if (!st->re)
		return run_stage(r, k + 1, s, len);
	if ((rc = find_matches(r, st->re, sc, s, len)))
		return rc;
	apply_behavior(st, sc);
	for (i = 0; i < sc->n; i++) {
		const seg *g = &sc->segs[i];

		if (g->end > g->start && (rc = run_stage(r, k + 1, s + g->start, g->end - g->start)))
			return rc;
	}
	return TF_OK;
}

int tf_pretok_split(const tf_pretok *p, const char *text, size_t len,
		    tf_pretok_emit emit, void *ctx)
{
	run_ctx r = { .p = p, .emit = emit, .emit_ctx = ctx };
	pcre2_jit_stack *jit = NULL;
	int i, rc = TF_ERR_NOMEM;

	if (!len)
		return TF_OK;
	r.md = pcre2_match_data_create(1, NULL);
	r.mctx = pcre2_match_context_create(NULL);
	jit = pcre2_jit_stack_create(PRETOK_JIT_STACK_MIN, PRETOK_JIT_STACK_MAX, NULL);
	if (!r.md || !r.mctx || !jit) {
		tf_diag_set(rc, "pre-tokenizer: out of memory");
		goto out;
	}
	pcre2_jit_stack_assign(r.mctx, NULL, jit);
	pcre2_set_match_limit(r.mctx, PRETOK_MATCH_LIMIT);
	pcre2_set_depth_limit(r.mctx, PRETOK_DEPTH_LIMIT);
	rc = run_stage(&r, 0, text, len);
out:
	for (i = 0; i < p->n; i++) {
		tf_bytes_free(&r.scratch[i].text);
		free(r.scratch[i].segs);
	}
	pcre2_jit_stack_free(jit);
	pcre2_match_context_free(r.mctx);
	pcre2_match_data_free(r.md);
	return rc;
}
