//! The stack switch under every fiber: a few small assembly routines, written for x86-64
//! (measured) and AArch64 (compiled, not run here).
//!
//! * [`switch`] saves the registers the C ABI makes a callee keep on the current stack, stores
//!   the stack pointer, loads another one and restores that stack's registers: a context
//!   switch, symmetric (any context may switch to any other), passing one word across.
//! * [`start`] enters a new context by calling its entry function on the new stack; when the
//!   entry returns, the thread goes back to whoever resumed the context last.
//! * [`call_on_stack`] runs a function on another stack (below a suspended context's saved
//!   stack pointer) and comes back.
//!
//! The floating-point control words (MXCSR and the x87 control word; FPCR) are not saved: fiber
//! code must not change rounding or exception modes, as it must not hold thread-local
//! references across a switch.
//!
//! Every `ret` after a switch of stacks returns where the CPU did not predict (its stack of
//! return addresses holds the other context's calls): that is most of what a switch costs.

// The routines, as global assembly (`ringside_fiber_*`, hidden: not exported from the
// binary). Unwinders stop at `start` (its CFI says the return address is undefined): the
// frames above it belong to another stack.
#[cfg(target_arch = "x86_64")]
core::arch::global_asm!(
    ".text",
    // The registers a callee keeps, saved on the stack and restored from it.
    ".macro ringside_fiber_save",
    "push rbp",
    "push rbx",
    "push r12",
    "push r13",
    "push r14",
    "push r15",
    ".endm",
    ".macro ringside_fiber_restore",
    "pop r15",
    "pop r14",
    "pop r13",
    "pop r12",
    "pop rbx",
    "pop rbp",
    ".endm",
    // switch(save: rdi, to: rsi, value: rdx) -> rax
    ".p2align 4",
    ".globl ringside_fiber_switch",
    ".hidden ringside_fiber_switch",
    ".type ringside_fiber_switch, @function",
    "ringside_fiber_switch:",
    "ringside_fiber_save",
    "mov [rdi], rsp",
    "mov rsp, rsi",
    "mov rax, rdx",
    "ringside_fiber_restore",
    "ret",
    ".size ringside_fiber_switch, . - ringside_fiber_switch",
    // start(save: rdi, value: rsi, top: rdx, entry: rcx, body: r8, link: r9) -> rax:
    // saves the caller as `switch` does, and calls entry(body, link, value) on the new stack.
    ".p2align 4",
    ".globl ringside_fiber_start",
    ".hidden ringside_fiber_start",
    ".type ringside_fiber_start, @function",
    "ringside_fiber_start:",
    ".cfi_startproc",
    ".cfi_undefined rip",
    "ringside_fiber_save",
    "mov [rdi], rsp",
    "mov rsp, rdx",
    "mov rbx, r9",
    "mov rdi, r8",
    "mov rdx, rsi",
    "mov rsi, r9",
    "call rcx",
    // The entry returned its last word (rax): back to whoever resumed the context last,
    // whose stack pointer is the link's `parent_sp` (offset 8), saved by `switch` or `start`.
    "ringside_fiber_finish:",
    "mov rsp, [rbx + 8]",
    "ringside_fiber_restore",
    "ret",
    ".cfi_endproc",
    ".size ringside_fiber_start, . - ringside_fiber_start",
    // on_stack(data: rdi, f: rsi, sp: rdx): f(data) with the stack pointer at sp.
    ".p2align 4",
    ".globl ringside_fiber_on_stack",
    ".hidden ringside_fiber_on_stack",
    ".type ringside_fiber_on_stack, @function",
    "ringside_fiber_on_stack:",
    "push rbp",
    "mov rbp, rsp",
    "mov rsp, rdx",
    "call rsi",
    "mov rsp, rbp",
    "pop rbp",
    "ret",
    ".size ringside_fiber_on_stack, . - ringside_fiber_on_stack",
);

#[cfg(target_arch = "aarch64")]
core::arch::global_asm!(
    ".text",
    // The registers a callee keeps, saved on the stack and restored from it.
    ".macro ringside_fiber_save",
    "sub sp, sp, #0xa0",
    "stp x19, x20, [sp, #0x00]",
    "stp x21, x22, [sp, #0x10]",
    "stp x23, x24, [sp, #0x20]",
    "stp x25, x26, [sp, #0x30]",
    "stp x27, x28, [sp, #0x40]",
    "stp x29, x30, [sp, #0x50]",
    "stp d8, d9, [sp, #0x60]",
    "stp d10, d11, [sp, #0x70]",
    "stp d12, d13, [sp, #0x80]",
    "stp d14, d15, [sp, #0x90]",
    ".endm",
    ".macro ringside_fiber_restore",
    "ldp x19, x20, [sp, #0x00]",
    "ldp x21, x22, [sp, #0x10]",
    "ldp x23, x24, [sp, #0x20]",
    "ldp x25, x26, [sp, #0x30]",
    "ldp x27, x28, [sp, #0x40]",
    "ldp x29, x30, [sp, #0x50]",
    "ldp d8, d9, [sp, #0x60]",
    "ldp d10, d11, [sp, #0x70]",
    "ldp d12, d13, [sp, #0x80]",
    "ldp d14, d15, [sp, #0x90]",
    "add sp, sp, #0xa0",
    ".endm",
    // switch(save: x0, to: x1, value: x2) -> x0
    ".p2align 4",
    ".globl ringside_fiber_switch",
    ".hidden ringside_fiber_switch",
    ".type ringside_fiber_switch, %function",
    "ringside_fiber_switch:",
    "ringside_fiber_save",
    "mov x9, sp",
    "str x9, [x0]",
    "mov sp, x1",
    "ringside_fiber_restore",
    "mov x0, x2",
    "ret",
    ".size ringside_fiber_switch, . - ringside_fiber_switch",
    // start(save: x0, value: x1, top: x2, entry: x3, body: x4, link: x5) -> x0
    ".p2align 4",
    ".globl ringside_fiber_start",
    ".hidden ringside_fiber_start",
    ".type ringside_fiber_start, %function",
    "ringside_fiber_start:",
    ".cfi_startproc",
    ".cfi_undefined x30",
    "ringside_fiber_save",
    "mov x9, sp",
    "str x9, [x0]",
    "mov sp, x2",
    "mov x20, x5",
    "mov x0, x4",
    "mov x2, x1",
    "mov x1, x5",
    "mov x29, xzr",
    "blr x3",
    "ringside_fiber_finish:",
    "ldr x9, [x20, #8]",
    "mov sp, x9",
    "ringside_fiber_restore",
    "ret",
    ".cfi_endproc",
    ".size ringside_fiber_start, . - ringside_fiber_start",
    // on_stack(data: x0, f: x1, sp: x2)
    ".p2align 4",
    ".globl ringside_fiber_on_stack",
    ".hidden ringside_fiber_on_stack",
    ".type ringside_fiber_on_stack, %function",
    "ringside_fiber_on_stack:",
    "stp x29, x30, [sp, #-16]!",
    "mov x29, sp",
    "mov sp, x2",
    "blr x1",
    "mov sp, x29",
    "ldp x29, x30, [sp], #16",
    "ret",
    ".size ringside_fiber_on_stack, . - ringside_fiber_on_stack",
);

unsafe extern "C" {
    fn ringside_fiber_switch(save: *mut usize, to: usize, value: usize) -> usize;
    fn ringside_fiber_start(
        save: *mut usize,
        value: usize,
        top: usize,
        entry: Entry,
        body: usize,
        link: usize,
    ) -> usize;
    fn ringside_fiber_on_stack(data: usize, f: usize, sp: usize);
}

/// Saves the caller's registers as [`switch`] does (its stack pointer in `*save`) and calls
/// `entry(body, link, value)` on the stack whose top is `top`. When the entry returns its
/// last word, the thread goes back to whoever resumed the context last (the stack pointer at
/// `link + 8`, the link's `parent_sp`, saved there by a `switch` or a `start`), which sees
/// the word as the return value of that call. So entering a new context is a call the CPU
/// predicts, where a first `switch` into a prepared frame would be a return it does not.
///
/// # Safety
///
/// `top` must be the 16-byte aligned top of a mapped stack nothing else uses; `link` the
/// address of a `#[repr(C)]` value whose second word is the `parent_sp` of the context's
/// resumer, alive until the entry returns; `entry` must return (not unwind); `save` as for
/// [`switch`].
#[inline(always)]
pub(crate) unsafe fn start(
    save: *mut usize,
    value: usize,
    top: usize,
    entry: Entry,
    body: usize,
    link: usize,
) -> usize {
    // SAFETY: the caller's guarantees; the routine follows the C ABI for its caller.
    unsafe { ringside_fiber_start(save, value, top, entry, body, link) }
}

/// Saves the caller's callee-saved registers on its stack, stores its stack pointer in
/// `*save`, switches to the stack pointer `to` and restores the registers saved there. The
/// context switched to sees `value` as the return value of its own `switch` or `start` call.
///
/// # Safety
///
/// `to` must be a stack pointer saved by `switch` or `start` whose context
/// has not been resumed since, on a stack that is still mapped; `save` must be valid for a
/// write. The caller's context may be resumed later, on any thread, by a `switch` to the value
/// stored in `*save`; until then its stack must stay mapped and untouched.
#[inline(always)]
pub(crate) unsafe fn switch(save: *mut usize, to: usize, value: usize) -> usize {
    // SAFETY: the caller's guarantees; the routine follows the C ABI for its caller.
    unsafe { ringside_fiber_switch(save, to, value) }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("fiber's stack switch (sys/switch.rs) is written for x86_64 and aarch64 only");

/// The entry function of a new context: `entry(body, link, value) -> word`, `value` being
/// what the [`start`] that entered it passed. It returns its context's last word
/// (it must not unwind), which goes to whoever resumed the context last.
pub(crate) type Entry = unsafe extern "C" fn(usize, usize, usize) -> usize;

/// Runs `f` with the stack pointer at `sp` (rounded down to 16 bytes), on the calling thread,
/// and returns its result, or the payload of its panic (caught there: no unwinding crosses
/// the switch of stacks).
///
/// # Safety
///
/// The memory below `sp` must be a stack nothing uses while `f` runs, with room for `f`.
pub(crate) unsafe fn call_on_stack<F, R>(sp: usize, f: F) -> std::thread::Result<R>
where
    F: FnOnce() -> R,
{
    struct Call<F, R> {
        f: Option<F>,
        result: Option<std::thread::Result<R>>,
    }
    unsafe extern "C" fn run<F: FnOnce() -> R, R>(call: usize) {
        // SAFETY: `call` is the address of the `Call` below, alive for the whole call and
        // used by nobody else meanwhile (the caller waits in `ringside_fiber_on_stack`).
        let call = unsafe { &mut *(call as *mut Call<F, R>) };
        if let Some(f) = call.f.take() {
            call.result = Some(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
        }
    }
    let mut call = Call {
        f: Some(f),
        result: None,
    };
    // SAFETY: `run::<F, R>` has the signature `ringside_fiber_on_stack` calls; it does not unwind
    // (it catches); the stack below `sp` is free (the caller's guarantee).
    unsafe {
        ringside_fiber_on_stack(
            std::ptr::from_mut(&mut call) as usize,
            run::<F, R> as *const () as usize,
            sp & !15,
        );
    }
    match call.result {
        Some(r) => r,
        None => unreachable!("call_on_stack: the function did not run"),
    }
}
