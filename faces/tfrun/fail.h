/* fail.h - tfrun's one-line error report. */
#ifndef TF_CLI_FAIL_H
#define TF_CLI_FAIL_H

/* "tfrun: WHAT: <the diag message>" on stderr, WHAT left out when NULL or
 * when the message already starts with it (a missing INI names its path
 * once); returns EXIT_FAILURE. */
int tf_cli_fail(const char *what);

#endif /* TF_CLI_FAIL_H */
