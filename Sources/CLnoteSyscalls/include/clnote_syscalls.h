// System calls that Glibc's Swift module does not export (they need _GNU_SOURCE), for
// LnoteStore's syscall seam.
#ifndef CLNOTE_SYSCALLS_H
#define CLNOTE_SYSCALLS_H

#include <stdint.h>

// Starts writing back [offset, offset + count) of fd to the device without waiting:
// sync_file_range(SYNC_FILE_RANGE_WRITE) on Linux, nothing (0) elsewhere. A hint that makes
// nothing durable. Returns 0, or -1 with errno set.
int lnote_start_writeback(int fd, int64_t offset, int64_t count);

// Makes every file and directory of the file system holding fd durable: syncfs(2) on Linux
// (which reports writeback errors since 5.8). Elsewhere returns -1 with errno ENOSYS: the
// caller syncs each file instead. Returns 0, or -1 with errno set.
int lnote_sync_file_system(int fd);

// Installs a handler for SIGINT and SIGTERM that writes the signal's number, one byte, to
// fd (the write end of a pipe), and nothing else: async-signal-safe, and in place when it
// returns, so no signal that arrives afterwards is lost. Returns 0, or -1 with errno set.
int lnote_trap_signals(int fd);

// The width in columns of the terminal on fd (ioctl TIOCGWINSZ, which Swift cannot call:
// ioctl is variadic), or 0 when fd is not a terminal or its width is unknown.
int lnote_terminal_columns(int fd);

// Names the calling thread (pthread_setname_np on Linux: at most 15 bytes, longer names are
// refused with ERANGE). Returns 0, or an errno value.
int lnote_set_thread_name(const char *name);

// Copies the calling thread's name into buffer (NUL-terminated). Returns 0, or an errno value.
int lnote_get_thread_name(char *buffer, int size);

// Makes every later allocation of `bytes` or more take pages of its own from the system, given
// back when freed: mallopt(M_MMAP_THRESHOLD) with glibc (which also stops glibc from raising
// that threshold by itself). Returns 1 when set, 0 when not (or not glibc).
int lnote_set_mmap_threshold(int bytes);

#endif
