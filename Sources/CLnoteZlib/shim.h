#ifndef CLNOTE_ZLIB_SHIM_H
#define CLNOTE_ZLIB_SHIM_H
/* zlib, for the benchmark's "zlib of the naive encoding" baseline only. */
#include <zlib.h>
#endif
