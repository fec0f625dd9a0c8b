#ifndef CLNOTE_XML2_SHIM_H
#define CLNOTE_XML2_SHIM_H
/* libxml2's SAX parser for InkML and Xournal++ import (LnoteInterchange), driven directly
   rather than through Foundation's XMLParser, which cannot set XML_PARSE_HUGE (a trace of
   more than 10 MB of text is then refused), parses in recovery mode (content after the root
   element is then accepted) and reports errors by number only. */
#include <libxml/parser.h>
#include <libxml/parserInternals.h>
#include <libxml/xmlerror.h>
#endif
