/* checkpoint.c - a checkpoint folder for tools (tf/checkpoint.h): config.h
 * and weights.h behind one handle. */
#include <stdio.h>
#include <stdlib.h>

#include "conf/config.h"
#include "tf/checkpoint.h"
#include "tf/diag.h"
#include "model/weights.h"

struct tf_checkpoint {
	tf_model_config cfg;
	tf_weights *w;
};

const char *tf_checkpoint_errmsg(void)
{
	return tf_diag_msg();
}

int tf_checkpoint_open(const char *dir, tf_checkpoint **out)
{
	tf_checkpoint *c = calloc(1, sizeof(*c));
	char path[4096];
	int rc;

	*out = NULL;
	if (!c)
		return tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", dir);
	c->cfg.struct_size = sizeof(c->cfg);
	snprintf(path, sizeof(path), "%s/config.json", dir);
	rc = tf_config_load(path, &c->cfg);
	if (!rc)
		rc = tf_weights_open(dir, &c->w);
	if (rc) {
		tf_checkpoint_close(c);
		return rc;
	}
	*out = c;
	return TF_OK;
}

int tf_checkpoint_config(const char *dir, tf_model_config **out)
{
	tf_model_config *cfg = calloc(1, sizeof(*cfg));
	char path[4096];

	*out = NULL;
	if (!cfg)
		return tf_diag_set(TF_ERR_NOMEM, "%s: out of memory", dir);
	cfg->struct_size = sizeof(*cfg);
	snprintf(path, sizeof(path), "%s/config.json", dir);
	int rc = tf_config_load(path, cfg);
	if (rc) {
		free(cfg);
		return rc;
	}
	*out = cfg;
	return TF_OK;
}

void tf_checkpoint_config_free(tf_model_config *cfg)
{
	if (!cfg)
		return;
	tf_config_free(cfg);
	free(cfg);
}

void tf_checkpoint_close(tf_checkpoint *c)
{
	if (!c)
		return;
	tf_weights_close(c->w);
	tf_config_free(&c->cfg);
	free(c);
}

const tf_model_config *tf_checkpoint_model(const tf_checkpoint *c)
{
	return &c->cfg;
}

size_t tf_checkpoint_count(const tf_checkpoint *c)
{
	return tf_weights_count(c->w);
}

const tf_tensor *tf_checkpoint_at(const tf_checkpoint *c, size_t i)
{
	return tf_weights_at(c->w, i);
}

int tf_checkpoint_get(const tf_checkpoint *c, const char *name, tf_tensor *out)
{
	return tf_weights_get(c->w, name, out);
}
