#ifndef CLNOTE_MHD_SHIM_H
#define CLNOTE_MHD_SHIM_H
#include <stdint.h>
#include <stdarg.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <microhttpd.h>
/* MHD_start_daemon and MHD_get_daemon_info are variadic; typed wrappers live in the
   server module's C helpers when needed. */
#endif
