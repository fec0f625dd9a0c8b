// CRC-32C with the processor's CRC32 instruction (SSE 4.2 on x86-64, the CRC extension on
// 64-bit ARM), for LnoteModel's CRC32C: Swift has no portable way to reach it. The Swift
// table-driven implementation stays the reference and the fallback.
#ifndef CLNOTE_CRC32C_H
#define CLNOTE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

// 1 if lnote_crc32c_hw may be called on this processor, else 0.
int lnote_crc32c_hw_available(void);

// Continues a CRC-32C over n bytes at p. `state` is the raw register (the CRC so far,
// already complemented: ~0 to start); the result is the new raw register.
uint32_t lnote_crc32c_hw(uint32_t state, const void *p, size_t n);

#endif
