// The code a fork child runs between fork() and its first instructions of the program: the kernel does
// not copy the library's text mappings into the child, so each distinct 4 KiB page of it the child
// executes is a page fault (~1 us). Functions marked REVIVE_FORK_PATH are placed together (the linker
// groups every .text.hot.* section ahead of .text), so the child faults them in once.
#pragma once

#define REVIVE_FORK_PATH __attribute__((section(".text.hot.revive_fork")))
