import Foundation
import LnoteModel
import LnoteReplication

/// The HTML of the web view ([SYNC-90]..[SYNC-96]): the static shell and the fragments its
/// script fetches. Every text that came from a source (titles, device names) goes through
/// `escape`; ids are UUIDs and numbers this code formats itself, escaped all the same.
enum WebViewHTML {
    /// `&`, `<`, `>`, `"` and `'` as character references: safe in element content and in
    /// quoted attribute values alike. C0 controls but tab and newline become U+FFFD (HTML
    /// forbids them; a hostile title must not make the document ill-formed).
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for u in text.unicodeScalars {
            switch u {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            case "\t", "\n": out.unicodeScalars.append(u)
            default:
                if u.value < 0x20 || u.value == 0x7F || (0x80...0x9F).contains(u.value) {
                    out += "\u{FFFD}"
                } else {
                    out.unicodeScalars.append(u)
                }
            }
        }
        return out
    }

    /// A title for display: the empty title shows as "Untitled".
    static func title(_ t: String) -> String { t.isEmpty ? "Untitled" : t }

    // MARK: - The shell ([SYNC-91])

    /// The stylesheet: one `<style>` element, allowed by its hash ([SYNC-94]).
    static let style = """
    body{margin:0;background:#d4d4d4;color:#111;font:15px/1.4 sans-serif}
    header{padding:10px 16px;background:#bcbcbc;color:#111}
    header a{color:#123;margin-right:14px}
    #status{padding:10px 16px;color:#600}
    #status:empty{display:none}
    main{padding:8px 16px 32px}
    h1{font-size:20px;margin:8px 0 12px}
    h2{font-size:17px;margin:18px 0 6px}
    a{color:#123}
    ul.library{list-style:none;padding:0;margin:0;display:flex;flex-wrap:wrap;gap:16px}
    ul.library li{width:200px}
    ul.library img{display:block;max-width:200px;max-height:260px;background:#eee;box-shadow:0 1px 3px #777}
    .meta{display:block;color:#333;font-size:13px}
    .pages{display:flex;flex-direction:column;gap:18px;align-items:flex-start}
    .sheet img{display:block;background:#fff;max-width:100%;height:auto;box-shadow:0 1px 4px #666}
    figure{margin:0}
    figcaption{color:#333;font-size:13px;margin-top:4px}
    table{border-collapse:collapse}
    td,th{border:1px solid #999;padding:3px 8px;text-align:left;vertical-align:top;font-size:13px}
    code{font-size:12px}
    img.broken{min-width:120px;min-height:40px;color:#600}
    """

    /// The script: reads the token from the fragment (never sent to the server), removes
    /// the fragment from the address bar, keeps the token in the tab's `sessionStorage`
    /// (a reload keeps working; closing the tab forgets it), then fetches the fragment the
    /// query names with `Authorization: Bearer`, injects it, and fetches each picture the
    /// same way (`img[data-src]`, shown through a `blob:` URL). Allowed by its hash ([SYNC-94]).
    static let script = """
    (function () {
      "use strict";
      var main = document.getElementById("main"), status = document.getElementById("status");
      var uuid = /^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$/;
      // The answers name the notebook in upper case ([SYNC-92]): an address in lower case must match them.
      var nb = (location.pathname.split("/")[2] || "").toUpperCase();
      if (!uuid.test(nb)) { status.textContent = "This is not the address of a notebook."; return; }
      var key = "lnote-token-" + nb.toLowerCase();
      var token = new URLSearchParams(location.hash.slice(1)).get("token");
      if (location.hash) { history.replaceState(null, "", location.pathname + location.search); }
      if (token) { sessionStorage.setItem(key, token); } else { token = sessionStorage.getItem(key); }
      if (!token) {
        status.textContent = "This view needs the notebook's token: open the address lnote printed, which ends in #token=\\u2026";
        return;
      }
      var q = new URLSearchParams(location.search), doc = q.get("document"), page = q.get("page");
      var path = "/v1/notebooks/" + nb + "/view";
      if (q.has("conflicts")) { path += "/conflicts"; }
      else if (doc && uuid.test(doc)) {
        path += "/documents/" + doc;
        if (page && uuid.test(page)) { path += "/pages/" + page; }
      }
      function get(url) {
        return fetch(url, { headers: { "Authorization": "Bearer " + token }, cache: "no-store", credentials: "omit" });
      }
      function failed(r) {
        if (r.status === 401) { sessionStorage.removeItem(key); }
        return r.text().then(function (t) {
          var m = t;
          try { m = JSON.parse(t).message || t; } catch (e) {}
          throw new Error(r.status + " " + m);
        });
      }
      status.textContent = "Loading\\u2026";
      get(path).then(function (r) { return r.ok ? r.text() : failed(r); }).then(function (html) {
        main.innerHTML = html;
        status.textContent = "";
        var h = main.querySelector("h1");
        if (h) { document.title = h.textContent; }
        main.querySelectorAll("img[data-src]").forEach(function (img) {
          var src = img.getAttribute("data-src");
          if (src.indexOf("/v1/notebooks/" + nb + "/view/") !== 0) { return; }
          get(src).then(function (r) { return r.ok ? r.blob() : failed(r); })
            .then(function (b) { img.src = URL.createObjectURL(b); })
            .catch(function (e) { img.alt = e.message; img.classList.add("broken"); });
        });
      }).catch(function (e) { status.textContent = e.message; });
    })();
    """

    /// The shell: the same bytes for every notebook (it names none, holds nothing).
    static let shell: [UInt8] = Array("""
    <!DOCTYPE html>
    <html lang="en">
    <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <meta name="referrer" content="no-referrer">
    <title>lnote</title>
    <style>\(style)</style>
    </head>
    <body>
    <div id="status"></div>
    <main id="main"></main>
    <script>\(script)</script>
    </body>
    </html>

    """.utf8)

    /// `'sha256-…'`, the CSP source that allows one inline element's exact text.
    static func hashSource(_ text: String) -> String {
        "'sha256-" + Data(SHA256.hash(Array(text.utf8))).base64EncodedString() + "'"
    }

    /// [SYNC-94] The shell's policy: nothing but its own script and style (by hash), requests
    /// to its own origin, and pictures from `blob:` URLs its script made.
    static let shellPolicy = "default-src 'none'; script-src \(hashSource(script)); style-src \(hashSource(style)); "
        + "img-src blob:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    /// [SYNC-94] The policy of everything else the view answers (fragments, SVG, pictures):
    /// no script at all; an SVG's own style attributes and embedded `data:` pictures only.
    static let contentPolicy = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        + "base-uri 'none'; form-action 'none'; frame-ancestors 'none'; sandbox"

    // MARK: - Fragments ([SYNC-92])

    static func navigation(_ nb: UUID) -> String {
        let n = escape(nb.uuidString)
        return "<header><a href=\"/view/\(n)\">Library</a><a href=\"/view/\(n)?conflicts\">Conflicts</a></header>\n"
    }

    static func documentLink(_ nb: UUID, _ doc: DocumentID, page: PageID? = nil) -> String {
        var s = "/view/\(nb.uuidString)?document=\(doc)"
        if let page { s += "&page=\(page)" }
        return escape(s)
    }

    static func api(_ nb: UUID, _ rest: String) -> String { escape("/v1/notebooks/\(nb.uuidString)/view/\(rest)") }

    static func date(_ ms: Int64) -> String {
        ms <= 0 ? "unknown" : SyncHTTPService.utcDate(milliseconds: ms).replacingOccurrences(of: "T", with: " ")
    }

    /// The library: every live document with its cover.
    static func library(_ nb: UUID, _ docs: [WebViewDocument]) -> String {
        var s = navigation(nb) + "<h1>Library</h1>\n"
        if docs.isEmpty { return s + "<p>No documents.</p>\n" }
        s += "<ul class=\"library\">\n"
        for d in docs {
            let t = escape(title(d.title))
            s += "<li><a href=\"\(documentLink(nb, d.id))\"><img data-src=\"\(api(nb, "documents/\(d.id)/cover"))\" "
                + "alt=\"cover of \(t)\"><span class=\"title\">\(t)</span></a>"
                + "<span class=\"meta\">\(d.pageCount) page\(d.pageCount == 1 ? "" : "s") · \(escape(date(d.modified)))</span></li>\n"
        }
        return s + "</ul>\n"
    }

    /// The size a page is shown at: one CSS pixel per point.
    static func sizeAttributes(_ canvas: CanvasSize) -> String {
        func pt(_ tenths: Int32) -> String {
            let v = max(10, Int(tenths))
            return v % 10 == 0 ? String(v / 10) : "\(v / 10).\(v % 10)"
        }
        return "width=\"\(pt(canvas.width))\" height=\"\(pt(canvas.height))\""
    }

    /// A document: its pages, each as its SVG.
    static func document(_ nb: UUID, _ doc: WebViewPages) -> String {
        let t = escape(title(doc.title))
        var s = navigation(nb) + "<h1>\(t)</h1>\n"
        if doc.pages.isEmpty { return s + "<p>This document has no pages.</p>\n" }
        s += "<div class=\"pages\">\n"
        for (i, p) in doc.pages.enumerated() {
            s += "<figure class=\"sheet\"><a href=\"\(documentLink(nb, doc.id, page: p.id))\">"
                + "<img data-src=\"\(api(nb, "documents/\(doc.id)/pages/\(p.id)/svg"))\" \(sizeAttributes(p.canvas)) "
                + "alt=\"page \(i + 1)\"></a><figcaption>page \(i + 1) of \(doc.pages.count)</figcaption></figure>\n"
        }
        return s + "</div>\n"
    }

    /// One page of a document, alone, at one CSS pixel per point.
    static func page(_ nb: UUID, _ doc: WebViewPages, index i: Int) -> String {
        let p = doc.pages[i]
        let t = escape(title(doc.title))
        var s = navigation(nb) + "<h1>\(t) — page \(i + 1) of \(doc.pages.count)</h1>\n<p>"
        s += "<a href=\"\(documentLink(nb, doc.id))\">all pages</a>"
        if i > 0 { s += " · <a href=\"\(documentLink(nb, doc.id, page: doc.pages[i - 1].id))\">previous</a>" }
        if i + 1 < doc.pages.count { s += " · <a href=\"\(documentLink(nb, doc.id, page: doc.pages[i + 1].id))\">next</a>" }
        s += "</p>\n<div class=\"sheet\"><img id=\"page\" data-src=\"\(api(nb, "documents/\(doc.id)/pages/\(p.id)/svg"))\" "
            + "\(sizeAttributes(p.canvas)) alt=\"page \(i + 1)\"></div>\n"
        return s
    }

    /// Every conflict, per document, as `lnote conflicts` lists them.
    static func conflicts(_ nb: UUID, _ docs: [WebViewConflicts], devices: [ReplicaID: String]) -> String {
        var s = navigation(nb) + "<h1>Conflicts</h1>\n"
        if docs.isEmpty { return s + "<p>No conflicts.</p>\n" }
        func named(_ r: OpRef) -> String {
            "<code>\(escape(r.description))</code>" + (devices[r.id.replica].map { " (\(escape($0)))" } ?? "")
        }
        for d in docs {
            s += "<h2><a href=\"\(documentLink(nb, d.document))\">\(escape(title(d.title)))</a></h2>\n"
            s += "<table><tr><th>kind</th><th>page</th><th>element</th><th>operations</th><th>winner</th></tr>\n"
            for c in d.conflicts {
                var page = ""
                if let p = c.page {
                    if let i = d.livePages.firstIndex(of: p) {
                        page = "<a href=\"\(documentLink(nb, d.document, page: p))\">#\(i + 1)</a>"
                    } else {
                        page = "(deleted) <code>\(escape(p.description))</code>"
                    }
                }
                let element = c.element.map { "<code>\(escape($0.description))</code>" } ?? ""
                s += "<tr><td>\(escape(c.kind.rawValue))</td><td>\(page)</td><td>\(element)</td>"
                    + "<td>\(c.ops.map(named).joined(separator: "<br>"))</td><td>\(named(c.winner))</td></tr>\n"
            }
            s += "</table>\n"
        }
        return s
    }
}
