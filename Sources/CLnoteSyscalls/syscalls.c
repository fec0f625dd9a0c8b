// See clnote_syscalls.h.
#define _GNU_SOURCE
#include "clnote_syscalls.h"

#include <errno.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

int lnote_start_writeback(int fd, int64_t offset, int64_t count) {
#if defined(__linux__)
    return sync_file_range(fd, (off_t)offset, (off_t)count, SYNC_FILE_RANGE_WRITE);
#else
    (void)fd;
    (void)offset;
    (void)count;
    return 0;
#endif
}

int lnote_sync_file_system(int fd) {
#if defined(__linux__)
    return syncfs(fd);
#else
    (void)fd;
    errno = ENOSYS;
    return -1;
#endif
}

static volatile int lnote_signal_fd = -1;

static void lnote_signal_handler(int sig) {
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    if (lnote_signal_fd >= 0) { (void)write(lnote_signal_fd, &b, 1); }
    errno = saved;
}

int lnote_trap_signals(int fd) {
    lnote_signal_fd = fd;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = lnote_signal_handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(SIGINT, &sa, NULL) != 0) return -1;
    if (sigaction(SIGTERM, &sa, NULL) != 0) return -1;
    return 0;
}

int lnote_terminal_columns(int fd) {
    struct winsize ws;
    if (ioctl(fd, TIOCGWINSZ, &ws) != 0) return 0;
    return ws.ws_col;
}

int lnote_set_thread_name(const char *name) {
#ifdef __linux__
    return pthread_setname_np(pthread_self(), name);
#else
    (void)name;
    return ENOSYS;
#endif
}

int lnote_get_thread_name(char *buffer, int size) {
#ifdef __linux__
    if (size <= 0) return ERANGE;
    return pthread_getname_np(pthread_self(), buffer, (size_t)size);
#else
    (void)buffer; (void)size;
    return ENOSYS;
#endif
}

int lnote_set_mmap_threshold(int bytes) {
#if defined(__GLIBC__)
    return mallopt(M_MMAP_THRESHOLD, bytes);
#else
    (void)bytes;
    return 0;
#endif
}
