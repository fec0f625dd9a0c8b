#ifndef CLNOTE_CURL_SHIM_H
#define CLNOTE_CURL_SHIM_H
#include <curl/curl.h>

/* curl_easy_setopt and curl_easy_getinfo are variadic: one typed wrapper per argument type. */
static inline CURLcode clnote_curl_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode clnote_curl_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode clnote_curl_setopt_string(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode clnote_curl_setopt_pointer(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode clnote_curl_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v) { return curl_easy_setopt(h, o, v); }
typedef size_t (*clnote_curl_data_callback)(char *, size_t, size_t, void *);
static inline CURLcode clnote_curl_setopt_data_callback(CURL *h, CURLoption o, clnote_curl_data_callback v) { return curl_easy_setopt(h, o, v); }
typedef int (*clnote_curl_xferinfo_callback)(void *, curl_off_t, curl_off_t, curl_off_t, curl_off_t);
static inline CURLcode clnote_curl_setopt_xferinfo(CURL *h, clnote_curl_xferinfo_callback v) { return curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, v); }
static inline CURLcode clnote_curl_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode clnote_curl_getinfo_off(CURL *h, CURLINFO i, curl_off_t *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode clnote_curl_getinfo_string(CURL *h, CURLINFO i, const char **v) { return curl_easy_getinfo(h, i, v); }

/* CURL_GLOBAL_ALL is a composite macro; give Swift a plain value. */
static inline long clnote_curl_global_all(void) { return CURL_GLOBAL_ALL; }
/* CURL_ERROR_SIZE, the size CURLOPT_ERRORBUFFER requires. */
static inline size_t clnote_curl_error_size(void) { return CURL_ERROR_SIZE; }
#endif
