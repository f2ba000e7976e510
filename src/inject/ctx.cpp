// Context save for the engine and the signal restorer (file-scope asm: the project enables no ASM language).
// A setjmp without signal mask or FPU state: those come back through rt_sigreturn from the signal frame
// that stays on the thread's (saved) stack.
__asm__(R"(
    .text
    .globl revive_save_ctx
    .hidden revive_save_ctx
    .type revive_save_ctx,@function
# int revive_save_ctx(uint64_t ctx[8]) -- rbx rbp r12 r13 r14 r15 rsp rip; returns 0 now, 1 on restore
revive_save_ctx:
    movq %rbx, 0(%rdi)
    movq %rbp, 8(%rdi)
    movq %r12, 16(%rdi)
    movq %r13, 24(%rdi)
    movq %r14, 32(%rdi)
    movq %r15, 40(%rdi)
    leaq 8(%rsp), %rdx
    movq %rdx, 48(%rdi)
    movq (%rsp), %rdx
    movq %rdx, 56(%rdi)
    xorl %eax, %eax
    ret
    .size revive_save_ctx, .-revive_save_ctx

# long revive_on_stack(long (*fn)(void*), void* arg, void* stack_top): runs fn(arg) on another stack.
    .globl revive_on_stack
    .hidden revive_on_stack
    .type revive_on_stack,@function
revive_on_stack:
    pushq %rbp
    movq %rsp, %rbp
    movq %rdx, %rsp
    andq $-16, %rsp
    movq %rdi, %rax
    movq %rsi, %rdi
    call *%rax
    movq %rbp, %rsp
    popq %rbp
    ret
    .size revive_on_stack, .-revive_on_stack

    .globl revive_sigreturn
    .hidden revive_sigreturn
    .type revive_sigreturn,@function
revive_sigreturn:
    movq $15, %rax
    syscall
    hlt
    .size revive_sigreturn, .-revive_sigreturn
)");
