/* test_error.c - every status code has its own description. */
#include <criterion/criterion.h>
#include <string.h>

#include "tf/error.h"

Test(error, every_code_named_distinctly)
{
	for (int a = TF_OK; a >= TF_ERR_INTERNAL; a--) {
		cr_assert_str_neq(tf_strerror(a), "unknown error", "code %d", a);
		for (int b = a - 1; b >= TF_ERR_INTERNAL; b--)
			cr_assert_str_neq(tf_strerror(a), tf_strerror(b));
	}
	cr_assert_str_eq(tf_strerror(-999), "unknown error");
}

#include "tf/diag.h"

Test(diag, set_and_prefix)
{
	tf_diag_clear();
	cr_assert_str_eq(tf_diag_msg(), "");
	cr_assert_eq(tf_diag_set(TF_ERR_FORMAT, "tensor %s: bad shape", "w"), TF_ERR_FORMAT);
	cr_assert_eq(tf_diag_prefix(TF_ERR_FORMAT, "%s", "model.safetensors"), TF_ERR_FORMAT);
	cr_assert_str_eq(tf_diag_msg(), "model.safetensors: tensor w: bad shape");
}
