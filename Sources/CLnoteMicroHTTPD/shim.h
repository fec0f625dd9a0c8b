#ifndef CLNOTE_MHD_SHIM_H
#define CLNOTE_MHD_SHIM_H
#include <stdint.h>
#include <stdarg.h>
#include <string.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <microhttpd.h>

/* MHD_start_daemon, MHD_get_daemon_info and MHD_get_connection_info are variadic: typed
   wrappers for the calls lnote makes. */

/* The URI log callback: its return value becomes the request's initial *con_cls. */
typedef void *(*clnote_mhd_uri_log_callback)(void *cls, const char *uri, struct MHD_Connection *connection);

/* Starts a daemon with the access handler, the completion notifier, the URI log callback,
   a logger (used only with MHD_USE_ERROR_LOG), the connection notifier (opened, closed), and further options as an array terminated by {MHD_OPTION_END, 0, NULL}. */
static inline struct MHD_Daemon *clnote_mhd_start_daemon(unsigned int flags, uint16_t port,
                                                         MHD_AccessHandlerCallback handler, void *handler_cls,
                                                         MHD_RequestCompletedCallback completed, void *completed_cls,
                                                         clnote_mhd_uri_log_callback uri_log, void *uri_log_cls,
                                                         MHD_LogCallback logger, void *logger_cls,
                                                         MHD_NotifyConnectionCallback notify, void *notify_cls,
                                                         const struct MHD_OptionItem *options) {
    /* The logger goes first so that option parsing errors reach it too. */
    return MHD_start_daemon(flags, port, NULL, NULL, handler, handler_cls,
                            MHD_OPTION_EXTERNAL_LOGGER, logger, logger_cls,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, completed_cls,
                            MHD_OPTION_URI_LOG_CALLBACK, uri_log, uri_log_cls,
                            MHD_OPTION_NOTIFY_CONNECTION, notify, notify_cls,
                            MHD_OPTION_ARRAY, options,
                            MHD_OPTION_END);
}

/* The port the daemon listens on (useful after binding port 0); 0 when unknown. */
static inline uint16_t clnote_mhd_bind_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info ? info->port : 0;
}

/* The connection's socket; -1 when unknown. */
static inline int clnote_mhd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info ? (int)info->connect_fd : -1;
}

/* The client's address as text into buf (NUL-terminated) and its port; -1 when unknown. */
static inline int clnote_mhd_client_address(struct MHD_Connection *connection, char *buf, size_t len,
                                            uint16_t *port) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (info == NULL || info->client_addr == NULL || len == 0) return -1;
    const struct sockaddr *sa = info->client_addr;
    if (sa->sa_family == AF_INET) {
        struct sockaddr_in in;
        memcpy(&in, sa, sizeof in);
        if (inet_ntop(AF_INET, &in.sin_addr, buf, (socklen_t)len) == NULL) return -1;
        *port = ntohs(in.sin_port);
        return 0;
    }
    if (sa->sa_family == AF_INET6) {
        struct sockaddr_in6 in6;
        memcpy(&in6, sa, sizeof in6);
        if (inet_ntop(AF_INET6, &in6.sin6_addr, buf, (socklen_t)len) == NULL) return -1;
        *port = ntohs(in6.sin6_port);
        return 0;
    }
    return -1;
}

/* Fills an IPv4 socket address from dotted text; -1 when the text is not an IPv4 address. */
static inline int clnote_mhd_sockaddr_in(struct sockaddr_in *out, const char *address, uint16_t port) {
    memset(out, 0, sizeof *out);
    out->sin_family = AF_INET;
    out->sin_port = htons(port);
    return inet_pton(AF_INET, address, &out->sin_addr) == 1 ? 0 : -1;
}

/* Fills an IPv6 socket address from text; -1 when the text is not an IPv6 address. */
static inline int clnote_mhd_sockaddr_in6(struct sockaddr_in6 *out, const char *address, uint16_t port) {
    memset(out, 0, sizeof *out);
    out->sin6_family = AF_INET6;
    out->sin6_port = htons(port);
    return inet_pton(AF_INET6, address, &out->sin6_addr) == 1 ? 0 : -1;
}
#endif
