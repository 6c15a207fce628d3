/* The exported dlsym, at both glibc symbol versions: glibc 2.34 moved dlsym
 * into libc as dlsym@@GLIBC_2.34 and kept dlsym@GLIBC_2.2.5 for older
 * binaries (x86-64), so interposing one version misses programs linked
 * against the other.
 *
 * dlsym(RTLD_NEXT, name) resolves relative to its caller's return address.
 * A C wrapper that called glibc's dlsym would make libmsched the caller and
 * return the wrong symbol (or recurse), so RTLD_NEXT lookups are forwarded
 * by a tail jump, which leaves the original return address in place. Every
 * other lookup tail-jumps to msched_dlsym_impl (dlsym_hook.cc).
 */
#if defined(__x86_64__)
        .text
        .globl  msched_dlsym_entry_234
        .globl  msched_dlsym_entry_225
        .type   msched_dlsym_entry_234, @function
        .type   msched_dlsym_entry_225, @function
msched_dlsym_entry_234:
msched_dlsym_entry_225:
        cmpq    $-1, %rdi                       /* RTLD_NEXT is ((void *) -1l) */
        jne     1f
        movq    msched_real_dlsym(%rip), %rax
        testq   %rax, %rax
        jnz     2f
        /* Before libmsched's constructor has run (another library's
         * constructor can run first): find glibc's dlsym now, keeping the
         * arguments, then tail-jump as usual. Two pushes and 8 bytes keep
         * the stack 16-byte aligned at the call. */
        pushq   %rdi
        pushq   %rsi
        subq    $8, %rsp
        call    msched_resolve_real_dlsym
        addq    $8, %rsp
        popq    %rsi
        popq    %rdi
        testq   %rax, %rax
        jz      1f
2:      jmp     *%rax
1:      jmp     msched_dlsym_impl
        .size   msched_dlsym_entry_234, . - msched_dlsym_entry_234
        .size   msched_dlsym_entry_225, . - msched_dlsym_entry_225
        .symver msched_dlsym_entry_234, dlsym@@GLIBC_2.34
        .symver msched_dlsym_entry_225, dlsym@GLIBC_2.2.5
        .section .note.GNU-stack,"",@progbits
#else
#error "libmsched's dlsym entry is written for x86-64"
#endif
