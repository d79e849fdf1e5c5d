/*
 * path.h - building file names from a directory and a leaf.
 *
 * A model directory, a plugin directory and a checkpoint being written all
 * name their files as "<dir>/<leaf>"; the joined name is allocated because
 * directories have no useful length bound.
 */
#ifndef TF_PATH_H
#define TF_PATH_H

/* "<dir>/<name>" in a new string (free()); NULL when out of memory. */
char *tf_path_join(const char *dir, const char *name);

#endif /* TF_PATH_H */
