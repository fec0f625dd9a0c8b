#ifndef CLNOTE_CAIRO_SHIM_H
#define CLNOTE_CAIRO_SHIM_H
/* cairo: page rendering (LnoteRender): raster pictures and thumbnails, PDF and SVG export
   (issue 19). Image, PDF and SVG surfaces are all part of Debian's libcairo2. */
#include <cairo.h>
#include <cairo-pdf.h>
#include <cairo-svg.h>
#endif
