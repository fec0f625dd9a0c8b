import Dispatch
import Foundation
import LnoteModel
import LnoteRender
import LnoteStore
import LnoteSync

/// The read-only web view of a notebook ([SYNC-90]..[SYNC-96]): what `lnote serve` and the
/// relay answer under `/view/<notebook>` (the static shell, no token) and
/// `/v1/notebooks/<notebook>/view/…` (behind the bearer token, as sync requests are).
///
/// One view, two sources: the HTML, the SVG of each page (`PageRenderer.svg`, as
/// `lnote export --svg` writes it) and the covers are made here from what a `WebViewSource`
/// answers. Every answer carries the headers of [SYNC-94]: a Content-Security-Policy,
/// `X-Content-Type-Options: nosniff`, `Cache-Control: no-store`, `Referrer-Policy: no-referrer`.
public struct WebView: Sendable {
    public let notebook: UUID
    public let source: any WebViewSource

    public init(notebook: UUID, source: any WebViewSource) {
        self.notebook = notebook
        self.source = source
    }

    /// [SYNC-91] The entry URL of a notebook's view on a server at `baseURL`, with the token in
    /// the fragment (never sent to the server).
    public static func url(baseURL: String, notebook: UUID, token: String) -> String {
        "\(baseURL)/view/\(notebook.uuidString)#token=\(token)"
    }

    /// The longest side, in pixels, of a cover drawn when no fresh stored one is held.
    public static let coverSide = 256

    /// The headers every view answer carries ([SYNC-94]).
    static func headers(_ contentType: String, policy: String) -> HTTPHeaders {
        var h: HTTPHeaders = ["Content-Type": contentType]
        h.add("Content-Security-Policy", policy)
        h.add("X-Content-Type-Options", "nosniff")
        h.add("Cache-Control", "no-store")
        h.add("Referrer-Policy", "no-referrer")
        h.add("X-Frame-Options", "DENY")
        return h
    }

    /// `r` with the headers of [SYNC-94] when it lacks them (an error answer under the view's
    /// routes): the content policy, which allows nothing to run or load.
    static func secured(_ r: HTTPServerResponse) -> HTTPServerResponse {
        guard r.headers["Content-Security-Policy"] == nil else { return r }
        var out = r
        let h = headers(r.headers["Content-Type"] ?? "application/json", policy: WebViewHTML.contentPolicy)
        for name in ["Content-Security-Policy", "X-Content-Type-Options", "Cache-Control", "Referrer-Policy", "X-Frame-Options"] {
            out.headers.set(name, h[name]!)
        }
        return out
    }

    /// [SYNC-91] The shell: the same page for every notebook, answered without a token.
    public static var shell: HTTPServerResponse {
        HTTPServerResponse(status: 200, headers: headers("text/html; charset=utf-8", policy: WebViewHTML.shellPolicy),
                           body: WebViewHTML.shell)
    }

    static func html(_ text: String) -> HTTPServerResponse {
        HTTPServerResponse(status: 200, headers: headers("text/html; charset=utf-8", policy: WebViewHTML.contentPolicy),
                           body: Array(text.utf8))
    }

    static func picture(_ bytes: [UInt8], _ type: String) -> HTTPServerResponse {
        HTTPServerResponse(status: 200, headers: headers(type, policy: WebViewHTML.contentPolicy), body: bytes)
    }

    static func notFound(_ message: String) -> LnoteError { LnoteError(.notFound, message) }

    /// Where pages are drawn: one serial queue for every view of the process, off Swift's
    /// shared threads (two on a small machine: a large page drawn there would stall every
    /// sync request meanwhile), and at most one core's worth of drawing at a time.
    static let drawingQueue = DispatchQueue(label: "lnote.webview.draw", qos: .utility)

    /// Runs `body` on `drawingQueue` and returns what it returns.
    static func drawing<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { c in drawingQueue.async { c.resume(with: Result { try body() }) } }
    }

    /// [SYNC-92] Answers `GET /v1/notebooks/<notebook>/view/<rest…>` (the token already
    /// checked): `""` the library, `conflicts`, `documents/<doc>`, `documents/<doc>/cover`,
    /// `documents/<doc>/pages/<page>`, `documents/<doc>/pages/<page>/svg`.
    /// - Throws: `notFound` for an unknown route, document or page; what the source throws.
    public func respond(_ rest: ArraySlice<Substring>) async throws -> HTTPServerResponse {
        let r = Array(rest)
        if r.isEmpty { return Self.html(WebViewHTML.library(notebook, try await source.library())) }
        if r == ["conflicts"] {
            async let devices = source.deviceNames()
            let found = try await source.conflicts()
            return Self.html(WebViewHTML.conflicts(notebook, found, devices: try await devices))
        }
        guard r[0] == "documents", r.count >= 2 else { throw Self.notFound("no such view: \(r.joined(separator: "/"))") }
        guard let docID = SyncHTTPService.uuid(r[1]).map(DocumentID.init) else {
            throw LnoteError(.invalidArgument, "document id must be a UUID")
        }
        switch r.count {
        case 2:
            guard let doc = try await source.document(docID) else { throw Self.notFound("no document \(docID)") }
            return Self.html(WebViewHTML.document(notebook, doc))
        case 3 where r[2] == "cover":
            return try await cover(docID)
        case 4 where r[2] == "pages", 5 where r[2] == "pages" && r[4] == "svg":
            guard let pid = SyncHTTPService.uuid(r[3]).map(PageID.init) else {
                throw LnoteError(.invalidArgument, "page id must be a UUID")
            }
            if r.count == 4 {
                guard let doc = try await source.document(docID) else { throw Self.notFound("no document \(docID)") }
                guard let i = doc.pages.firstIndex(where: { $0.id == pid }) else {
                    throw Self.notFound("no page \(pid) in document \(docID)")
                }
                return Self.html(WebViewHTML.page(notebook, doc, index: i))
            }
            guard let page = try await source.page(pid, of: docID) else {
                throw Self.notFound("no page \(pid) in document \(docID)")
            }
            let svg = try await Self.drawing {
                try PageRenderer.svg(PageRenderer.Page(state: page.state, canvas: page.canvas), assets: page.asset).bytes
            }
            return Self.picture(svg, "image/svg+xml")
        default:
            throw Self.notFound("no such view: \(r.joined(separator: "/"))")
        }
    }

    /// [SYNC-93] A document's cover: the stored picture when it is fresh (a PNG, by its
    /// signature, or a JPEG), else its first page drawn now (JPEG); a document without pages
    /// has none (404).
    func cover(_ docID: DocumentID) async throws -> HTTPServerResponse {
        guard let doc = try await source.document(docID) else { throw Self.notFound("no document \(docID)") }
        guard let first = doc.pages.first else { throw Self.notFound("document \(docID) has no page") }
        if let stored = try await source.storedCover(docID) {
            return Self.picture(stored, stored.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) ? "image/png" : "image/jpeg")
        }
        guard let page = try await source.page(first.id, of: docID) else {
            throw Self.notFound("no page \(first.id) in document \(docID)")
        }
        let jpeg = try await Self.drawing {
            try JPEGEncoder.encode(try PageRenderer.raster(page.state, canvas: page.canvas, maxSide: Self.coverSide, assets: page.asset))
        }
        return Self.picture(jpeg, "image/jpeg")
    }
}
