/*
 * context.h - where a fiber (or the scheduler) resumes, and the switch
 * between two.  On x86-64 a few instructions save the callee-saved
 * registers and the stack pointer; elsewhere ucontext does it, with a
 * system call per switch.
 */
#ifndef TF_SIMT_CONTEXT_H
#define TF_SIMT_CONTEXT_H

#include <cstddef>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace tf_simt {

struct context {
#if defined(__x86_64__)
	void *sp;
#else
	ucontext_t uc;
#endif
};

/* `c` will start `entry` (which must never return) on the stack. */
void context_start(context &c, char *stack, size_t bytes, void (*entry)());

/* Save the running context in `from` and resume `to`. */
void context_switch(context &from, context &to);

} /* namespace tf_simt */

#endif /* TF_SIMT_CONTEXT_H */
