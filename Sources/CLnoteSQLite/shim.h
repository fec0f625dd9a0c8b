#ifndef CLNOTE_SQLITE_SHIM_H
#define CLNOTE_SQLITE_SHIM_H
#include <sqlite3.h>

/* SQLITE_TRANSIENT is a cast macro that Swift does not import. */
static inline sqlite3_destructor_type clnote_sqlite_transient(void) { return SQLITE_TRANSIENT; }
#endif
