/* context.cpp - see context.h. */
#include <cstdint>
#include <cstring>

#include "context.h"

#if defined(__x86_64__)
/* tf_simt_switch(void **from_sp, void *to_sp): push the System V
 * callee-saved registers, swap stacks, pop them from the other stack. */
asm(".text\n"
    ".p2align 4\n"
    ".type tf_simt_switch, @function\n"
    "tf_simt_switch:\n"
    "\tpushq %rbp\n\tpushq %rbx\n\tpushq %r12\n\tpushq %r13\n\tpushq %r14\n\tpushq %r15\n"
    "\tsubq $8, %rsp\n"
    "\tstmxcsr (%rsp)\n\tfnstcw 4(%rsp)\n"
    "\tmovq %rsp, (%rdi)\n"
    "\tmovq %rsi, %rsp\n"
    "\tldmxcsr (%rsp)\n\tfldcw 4(%rsp)\n"
    "\taddq $8, %rsp\n"
    "\tpopq %r15\n\tpopq %r14\n\tpopq %r13\n\tpopq %r12\n\tpopq %rbx\n\tpopq %rbp\n"
    "\tret\n"
    ".size tf_simt_switch, .-tf_simt_switch\n");
extern "C" void tf_simt_switch(void **from_sp, void *to_sp);
#endif

namespace tf_simt {

#if defined(__x86_64__)

/* The frame tf_simt_switch pops: control words, six registers, then the
 * entry as the return address, with a null return address above it so
 * the entry starts as if called (rsp = 8 mod 16). */
void context_start(context &c, char *stack, size_t bytes, void (*entry)())
{
	uint64_t *top = (uint64_t *)(((uintptr_t)stack + bytes) & ~(uintptr_t)15);
	uint64_t *sp = top - 9;
	uint32_t mxcsr;
	uint16_t fpucw;
	asm volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(mxcsr), "=m"(fpucw));
	memset(sp, 0, 9 * sizeof(uint64_t));
	sp[0] = mxcsr | (uint64_t)fpucw << 32;
	sp[7] = (uint64_t)(uintptr_t)entry;
	c.sp = sp;
}

void context_switch(context &from, context &to)
{
	tf_simt_switch(&from.sp, to.sp);
}

#else

void context_start(context &c, char *stack, size_t bytes, void (*entry)())
{
	getcontext(&c.uc);
	c.uc.uc_stack.ss_sp = stack;
	c.uc.uc_stack.ss_size = bytes;
	c.uc.uc_link = nullptr;
	makecontext(&c.uc, entry, 0);
}

void context_switch(context &from, context &to)
{
	swapcontext(&from.uc, &to.uc);
}

#endif

} /* namespace tf_simt */
