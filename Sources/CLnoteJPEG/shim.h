#ifndef CLNOTE_JPEG_SHIM_H
#define CLNOTE_JPEG_SHIM_H
/* libjpeg-turbo's TurboJPEG API: JPEG thumbnails (encode) and JPEG image assets drawn on a
   page (decode), in LnoteRender (issue 19). */
#include <turbojpeg.h>
#endif
