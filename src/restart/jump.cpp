// The last instructions of the restarter: make a thread with glibc's pthread_create clone flags that
// starts directly in a saved engine context, and turn the calling thread into a saved context.
// File-scope asm: after the switch nothing of the restarter (stack, TLS, libc) may be touched.
//
// long restart_clone(flags, stack, ptid, ctid, tls, const uint64_t ctx[8])
//   rdi rsi rdx rcx r8 r9; the child keeps r9 (syscall preserves it) and jumps to ctx with rax = 1.
// long restart_clone3(const struct clone_args* args, size_t size, const uint64_t ctx[8])
//   the same with clone3 (which can ask for the saved tid); ctx moves to r9 first.
// void restart_jump(const uint64_t ctx[8], uint64_t fs_base)  -- sets FS, then jumps with rax = 1.
__asm__(R"(
    .text
    .globl restart_clone
    .type restart_clone,@function
restart_clone:
    movq %rcx, %r10
    movl $56, %eax
    syscall
    testq %rax, %rax
    jnz 1f
.Lload_ctx:
    movq 0(%r9), %rbx
    movq 8(%r9), %rbp
    movq 16(%r9), %r12
    movq 24(%r9), %r13
    movq 32(%r9), %r14
    movq 40(%r9), %r15
    movq 48(%r9), %rsp
    movq 56(%r9), %rcx
    movl $1, %eax
    jmp *%rcx
1:  ret
    .size restart_clone, .-restart_clone

    .globl restart_clone3
    .type restart_clone3,@function
restart_clone3:
    movq %rdx, %r9
    movl $435, %eax
    syscall
    testq %rax, %rax
    jz .Lload_ctx
    ret
    .size restart_clone3, .-restart_clone3

    .globl restart_jump
    .type restart_jump,@function
restart_jump:
    movq %rdi, %r9
    movl $0x1002, %edi
    movl $158, %eax
    syscall
    testq %rax, %rax
    jz .Lload_ctx
    hlt
    .size restart_jump, .-restart_jump
)");
