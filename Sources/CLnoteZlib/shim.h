#ifndef CLNOTE_ZLIB_SHIM_H
#define CLNOTE_ZLIB_SHIM_H
/* zlib: thumbnails' PNG compression (LnoteRender), and the benchmark's "zlib of the
   naive encoding" baseline. */
#include <zlib.h>
#endif
