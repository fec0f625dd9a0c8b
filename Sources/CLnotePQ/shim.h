#ifndef CLNOTE_PQ_SHIM_H
#define CLNOTE_PQ_SHIM_H
/* libpq from Debian's libpq-dev, whose headers live in /usr/include/postgresql
   (`pkg-config --cflags libpq`). libpq's API has no variadic functions, so nothing
   needs wrapping here. */
#include <postgresql/libpq-fe.h>
#endif
