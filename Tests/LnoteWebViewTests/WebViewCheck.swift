import Foundation
import Testing
import LnoteModel
import LnoteRender
import LnoteServer
import LnoteSync

/// The checks every view test makes of a notebook's view.
enum WebViewCheck {
    /// [SYNC-94] The headers of every view answer.
    static func secured(_ f: Fetched, _ what: String) {
        let csp = f.headers["Content-Security-Policy"] ?? ""
        #expect(csp.hasPrefix("default-src 'none';"), "\(what): CSP \(csp)")
        #expect(!csp.contains("http:") && !csp.contains("https:") && !csp.contains("*"), "\(what): CSP allows outside sources: \(csp)")
        #expect(!csp.contains("'unsafe-eval'"), "\(what): \(csp)")
        #expect(f.headers["X-Content-Type-Options"] == "nosniff", "\(what)")
        #expect(f.headers["Cache-Control"] == "no-store", "\(what)")
        #expect(f.headers["Referrer-Policy"] == "no-referrer", "\(what)")
        #expect(f.headers["X-Frame-Options"] == "DENY", "\(what)")
    }

    /// [SYNC-92] Every route of a document's view: 401 without a token and with a wrong one
    /// (the JSON error of the sync protocol), 200 with it; and the shell without any.
    static func routes(_ client: HTTPClient, base: String, notebook: UUID, token: String, fixture f: Fixture) async throws {
        let api = "\(base)/v1/notebooks/\(notebook.uuidString)/view"
        let routes = ["", "/conflicts", "/documents/\(f.document)", "/documents/\(f.document)/cover",
                      "/documents/\(f.document)/pages/\(f.page)", "/documents/\(f.document)/pages/\(f.page)/svg"]
        var wrong = Array(token)
        wrong[0] = wrong[0] == "a" ? "b" : "a"
        for r in routes {
            for bad in [nil, String(wrong)] {
                let x = try await get(client, api + r, token: bad)
                #expect(x.status == 401 && x.text.contains("\"unauthorized\""), "\(r) with token \(bad ?? "none"): \(x.status) \(x.text)")
            }
            let ok = try await get(client, api + r, token: token)
            #expect(ok.status == 200, "\(r): \(ok.status) \(ok.text.prefix(300))")
            secured(ok, r)
        }
        let shell = try await get(client, "\(base)/view/\(notebook.uuidString)", token: nil)
        #expect(shell.status == 200 && shell.headers["Content-Type"] == "text/html; charset=utf-8")
        #expect(shell.text.contains("history.replaceState") && !shell.text.contains(token))
        let csp = shell.headers["Content-Security-Policy"] ?? ""
        #expect(csp.contains("script-src 'sha256-") && csp.contains("connect-src 'self'") && !csp.contains("unsafe-inline"), "\(csp)")
        secured(shell, "shell")
        // No outside script, font or style: nothing in the shell names another origin.
        #expect(!shell.text.contains("http://") && !shell.text.contains("https://") && !shell.text.contains("//cdn"))
    }

    /// [SYNC-92] 404 for what the notebook does not hold; 400 for ids that are not UUIDs.
    static func unknowns(_ client: HTTPClient, base: String, notebook: UUID, token: String, fixture f: Fixture) async throws {
        let api = "\(base)/v1/notebooks/\(notebook.uuidString)/view"
        let other = UUID().uuidString
        for r in ["/documents/\(other)", "/documents/\(other)/cover", "/documents/\(other)/pages/\(f.page)/svg",
                  "/documents/\(f.document)/pages/\(other)", "/documents/\(f.document)/pages/\(other)/svg",
                  "/documents/\(f.document)/pages/\(f.page)/png", "/nothing"] {
            let x = try await get(client, api + r, token: token)
            #expect(x.status == 404 && x.text.contains("\"not_found\""), "\(r): \(x.status) \(x.text)")
        }
        let bad = try await get(client, api + "/documents/not-a-uuid", token: token)
        #expect(bad.status == 400, "\(bad.status) \(bad.text)")
    }

    /// [SYNC-90] The library, the document and the page escape the hostile title; the SVG is
    /// XML and holds the page's strokes; [SYNC-93] the cover is a JPEG of the first page.
    static func content(_ client: HTTPClient, base: String, notebook: UUID, token: String, fixture f: Fixture) async throws {
        let api = "\(base)/v1/notebooks/\(notebook.uuidString)/view"
        let escaped = "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;quotes&#39; &lt;img src=x onerror=alert(1)&gt;"
        for r in ["", "/documents/\(f.document)", "/documents/\(f.document)/pages/\(f.page)"] {
            let x = try await get(client, api + r, token: token)
            #expect(x.text.contains(escaped), "\(r): \(x.text)")
            #expect(!x.text.contains("<script") && !x.text.contains("<img src"), "\(r): raw markup from the title: \(x.text)")
        }
        let doc = try await get(client, api + "/documents/\(f.document)", token: token).text
        #expect(doc.contains("pages/\(f.page)/svg") && doc.contains("pages/\(f.second)/svg") && doc.contains("width=\"400\" height=\"300\""),
                "\(doc)")
        let svg = try await get(client, api + "/documents/\(f.document)/pages/\(f.page)/svg", token: token)
        #expect(svg.headers["Content-Type"] == "image/svg+xml")
        guard let parsed = SVGPaths.parse(svg.body) else {
            Issue.record("the SVG is not well-formed XML: \(svg.text.prefix(500))")
            return
        }
        #expect(parsed.root == "svg")
        checkStrokes(in: parsed, f.strokes)
        let cover = try await get(client, api + "/documents/\(f.document)/cover", token: token)
        let jpeg = cover.body.starts(with: [0xFF, 0xD8, 0xFF])
        #expect(jpeg && cover.headers["Content-Type"] == "image/jpeg", "\(cover.headers)")
        if jpeg {
            let picture = try JPEGDecoder.decode(cover.body)
            #expect(picture.width == 256 && picture.height == 192, "\(picture.width)×\(picture.height)")
        }
    }

    /// Each stroke's first point (in points) is a vertex of some path, within 0.2 pt: the
    /// renderer starts each fragment at its first point.
    static func checkStrokes(in svg: SVGPaths, _ strokes: [Stroke]) {
        let vertices = svg.points
        #expect(vertices.count >= strokes.count, "\(vertices.count) vertices for \(strokes.count) strokes")
        for (i, s) in strokes.enumerated() {
            let p = s.points[0]
            let (x, y) = (Double(p.x) / 10, Double(p.y) / 10)
            #expect(vertices.contains { abs($0.0 - x) <= 0.2 && abs($0.1 - y) <= 0.2 }, "stroke \(i) starting at (\(x), \(y)) is not in the SVG")
        }
    }

    /// [SYNC-96] A page's view in a real browser: the page is where the view drew it, one CSS
    /// pixel per point, and looks as lnote's own raster of the page at that scale.
    ///
    /// The bound: the browser draws the SVG with Skia, lnote with cairo; both antialias the
    /// same geometry, so they differ only along the edges of the ink by a fraction of a
    /// pixel's coverage. The mean difference (per channel, of 255) must be under a fifth of
    /// the difference between lnote's raster and a blank page, and under 0.5. Measured on
    /// these fixtures (Chromium 156, cairo 1.16): about 0.10 against an ink signal of 2.6 to
    /// 3.0 (3 to 4 % of it), while the same page one pixel off is 1.5 to 1.6 (over half the
    /// signal): a blank, misplaced, rescaled or differently drawn page fails.
    static func screenshot(url: String, dir: TempDir, fixture f: Fixture, state: PageState, seed: UInt64) async throws {
        let shot = try await Browser.screenshot(url, width: 700, height: 600, to: dir.sub("shot-\(seed).png"))
        guard let box = shot.whiteBox else {
            Issue.record("no page in the screenshot (seed \(seed))")
            return
        }
        #expect(box.width == 400 && box.height == 300, "the page is \(box.width)×\(box.height) px, not 400×300 (seed \(seed))")
        guard box.x + 400 <= shot.width, box.y + 300 <= shot.height else {
            Issue.record("the page does not fit the window at \(box) (seed \(seed))")
            return
        }
        let page = shot.crop(box.x, box.y, 400, 300)
        let own = Picture(try PageRenderer.raster(state, canvas: Fixture.canvas, maxSide: 400))
        #expect(own.width == 400 && own.height == 300)
        let blank = Picture(width: 400, height: 300, rgb: [UInt8](repeating: 255, count: 400 * 300 * 3))
        let signal = own.meanDifference(blank)
        let difference = page.meanDifference(own)
        let shifted = own.crop(1, 1, 399, 299).meanDifference(page.crop(0, 0, 399, 299))
        #expect(signal > 1, "the fixture draws too little ink to compare (seed \(seed)): \(signal)")
        #expect(difference < signal / 5 && difference < 0.5,
                "browser vs lnote: mean difference \(difference), ink signal \(signal), one pixel shift \(shifted) (seed \(seed))")
        // Ink where every stroke runs: the pixel under each point is not white in the
        // browser's picture (a thin stroke whose centre lies on a pixel edge covers it by
        // half: light, but ink), and where lnote's raster is dark the browser's is too.
        var inked = 0, total = 0
        for s in f.strokes {
            for p in s.points {
                total += 1
                if page.luma(Int(p.x / 10), Int(p.y / 10)) < 235 { inked += 1 }
            }
        }
        #expect(Double(inked) >= 0.99 * Double(total), "\(inked) of \(total) stroke points are inked in the browser (seed \(seed))")
        var dark = 0, darkToo = 0
        for y in 0..<300 {
            for x in 0..<400 where own.luma(x, y) < 128 {
                dark += 1
                if page.luma(x, y) < 192 { darkToo += 1 }
            }
        }
        #expect(dark > 500 && Double(darkToo) >= 0.97 * Double(dark),
                "\(darkToo) of the \(dark) dark pixels of lnote's raster are dark in the browser's (seed \(seed))")
    }
}
