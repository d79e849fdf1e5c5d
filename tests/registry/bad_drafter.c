/*
 * bad_drafter.c - drafters that break tf/drafter.h's contract, for the
 * engine's checks.  "bad-drafter" does as [bad-drafter] mode says:
 *
 *   oov    proposes the vocabulary's size, one past the last id
 *   many   claims one draft more than asked for
 *   fail   fails with an error of its own
 *   depth  asks for one draft more than the step's most
 *   none   proposes nothing (legal: every step is a plain one)
 *   echo   proposes next again and again (legal, mostly rejected)
 *
 * Built with OLD_ABI it is "old-drafter", a descriptor of ABI 1.11's
 * size, which had no drafting slots: the registry refuses it.
 */
#include <stddef.h>
#include <stdlib.h>

#include "tf/drafter.h"

static int bad_probe(const tf_host *h, const char **reason)
{
	(void)h;
	(void)reason;
	return 1;
}

#ifdef OLD_ABI
static int old_init(const tf_host *h, void **inst)
{
	*inst = (void *)h;
	return TF_OK;
}

static void old_fini(void *inst) { (void)inst; }

static const tf_plugin_drafter old = {
	.hdr = { .abi_major = TF_ABI_MAJOR, .abi_minor = 11,
		 .struct_size = offsetof(tf_plugin_drafter, flags), .kind = TF_KIND_DRAFTER,
		 .name = "old-drafter", .version = "0",
		 .description = "an ABI 1.11 drafter: lifecycle only", .probe = bad_probe },
	.init = old_init,
	.fini = old_fini,
};

TF_EXPORT const tf_plugin_drafter *tf_plugin_drafter_v1(unsigned index)
{
	return index == 0 ? &old : NULL;
}
#else
enum { OOV, MANY, FAIL, DEPTH, NONE, ECHO };

struct bad {
	const tf_host *h;
	int mode;
};

static const tf_plugin_key bad_keys[] = {
	{ .section = "bad-drafter", .name = "mode", .type = TF_KEY_ENUM,
	  .choices = "oov|many|fail|depth|none|echo", .def = "oov",
	  .help = "how the test drafter breaks its contract" },
	{ .section = NULL },
};

static int bad_init(const tf_host *h, void **inst)
{
	struct bad *b = malloc(sizeof(*b));
	if (!b)
		return TF_ERR_NOMEM;
	b->h = h;
	int rc = h->conf_enum(h, "bad-drafter", "mode", OOV, &b->mode);
	if (rc != TF_OK) {
		free(b);
		return rc;
	}
	*inst = b;
	return TF_OK;
}

static void bad_fini(void *inst) { free(inst); }

static int bad_max_depth(void *inst)
{
	(void)inst;
	return 3;
}

static int bad_propose(void *inst, void *seq, const tf_draft_req *r, int32_t *draft, int *n)
{
	const struct bad *b = inst;
	(void)seq;
	*n = 0;
	switch (b->mode) {
	case OOV:
		draft[0] = r->vocab;
		*n = 1;
		return TF_OK;
	case MANY:
		for (int i = 0; i < r->max; i++)
			draft[i] = r->next;
		*n = r->max + 1;
		return TF_OK;
	case FAIL:
		return b->h->error(b->h, TF_ERR_INVALID, "bad-drafter: failing as asked");
	case ECHO:
		for (int i = 0; i < r->max; i++)
			draft[i] = r->next;
		*n = r->max;
		return TF_OK;
	default:
		return TF_OK;
	}
}

static int bad_depth(void *inst, void *seq, tf_draft_plan *plan)
{
	const struct bad *b = inst;
	(void)seq;
	return b->mode == DEPTH ? plan->max + 1 : plan->max;
}

static const tf_plugin_drafter bad = {
	.hdr = TF_PLUGIN_HEADER(tf_plugin_drafter, TF_KIND_DRAFTER, "bad-drafter", "0",
				"a drafter that breaks its contract", bad_probe),
	.init = bad_init,
	.fini = bad_fini,
	.keys = bad_keys,
	.max_depth = bad_max_depth,
	.propose = bad_propose,
	.depth = bad_depth,
};

TF_EXPORT const tf_plugin_drafter *tf_plugin_drafter_v1(unsigned index)
{
	return index == 0 ? &bad : NULL;
}
#endif
