import CLnoteCairo
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import Testing
import LnoteModel
import LnoteRender
import LnoteStore
import LnoteSync
import LnoteServer
import LnoteTestSupport

/// A temporary directory removed when the test ends.
final class TempDir: @unchecked Sendable {
    let url: URL
    var path: String { url.path }
    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("lnote-webview-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    func sub(_ name: String) -> String { url.appendingPathComponent(name).path }
    deinit { try? FileManager.default.removeItem(at: url) }
}

/// A title no view may show as markup: every character HTML gives a meaning.
let hostileTitle = "<script>alert(\"x\")</script> & 'quotes' <img src=x onerror=alert(1)>"

/// A notebook folder with one document (`hostileTitle`) whose first page, 400 × 300 pt,
/// holds `strokes` opaque strokes made from `seed`, and a second, empty A4 page.
struct Fixture {
    let document: DocumentID
    let page: PageID
    let second: PageID
    let strokes: [Stroke]
    static let canvas = CanvasSize(width: 4000, height: 3000)

    static var quiet: StoreOptions {
        var o = StoreOptions()
        o.autosave = false
        return o
    }

    /// Strokes of 20 to 60 points, a seeded walk inside the page's margin, black or blue,
    /// 1 to 3 pt wide.
    static func strokes(_ n: Int, seed: UInt64) -> [Stroke] {
        var rng = SplitMix64(seed: seed)
        func next(_ range: ClosedRange<Int32>) -> Int32 {
            range.lowerBound + Int32(rng.next() % UInt64(range.upperBound - range.lowerBound + 1))
        }
        return (0..<n).map { _ in
            var x = next(400...3600), y = next(400...2600)
            let count = Int(next(20...60))
            let radius = next(5...15)
            var points: [StrokePoint] = []
            for i in 0..<count {
                points.append(StrokePoint(x: x, y: y, pressure: 500, radius: radius, t: UInt32(i * 4)))
                x = min(3800, max(200, x + next(-40...40)))
                y = min(2800, max(200, y + next(-40...40)))
            }
            let color = rng.next() % 2 == 0 ? RGBA.black : RGBA(r: 0x20, g: 0x40, b: 0xC0)
            return Stroke(style: InkStyle(tool: .pen, color: color, width: radius * 2), points: points)
        }
    }

    static func make(at path: String, strokes n: Int = 12, seed: UInt64) async throws -> Fixture {
        let nb = try await Notebook.open(at: path, create: true, options: quiet)
        let d = try await nb.createDocument(title: hostileTitle, firstPage: canvas)
        let page = await d.pageList[0].id
        let second = try await d.addPage(canvas: .a4)
        let strokes = strokes(n, seed: seed)
        _ = try await d.addStrokes(strokes, to: page)
        let f = Fixture(document: d.id, page: page, second: second, strokes: strokes)
        try await d.close()
        try await nb.close()
        return f
    }

    /// Syncs a folder with a URL in this process.
    static func sync(_ path: String, _ url: String, token: String) async throws {
        let nb = try await Notebook.open(at: path, create: true, options: quiet)
        do {
            let remote = try HTTPRemote(url: url, options: .init(token: token))
            defer { try? remote.close() }
            _ = try await SyncSession(notebook: nb, remote: remote).run()
            try await nb.close()
        } catch {
            try? await nb.close()
            throw error
        }
    }
}

/// A GET through libcurl (`HTTPClient`), with a bearer token when given.
struct Fetched {
    var status: Int
    var headers: HTTPHeaders
    var body: [UInt8]
    var text: String { String(decoding: body, as: UTF8.self) }
}

func get(_ client: HTTPClient, _ url: String, token: String?) async throws -> Fetched {
    var r = HTTPRequest(method: "GET", url: url)
    if let token { r.setBearerToken(token) }
    let resp = try await client.send(r)
    return Fetched(status: resp.status, headers: resp.headers, body: resp.body)
}

/// The root's name and every `d` attribute of the `<path>` elements of an SVG, parsed by
/// Foundation's XML parser (nil when the text is not well-formed XML).
final class SVGPaths: NSObject, XMLParserDelegate {
    var root: String?
    var paths: [String] = []
    func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
                attributes: [String: String] = [:]) {
        if root == nil { root = name }
        if name == "path", let d = attributes["d"] { paths.append(d) }
    }

    static func parse(_ bytes: [UInt8]) -> SVGPaths? {
        let p = XMLParser(data: Data(bytes))
        let delegate = SVGPaths()
        p.delegate = delegate
        return p.parse() ? delegate : nil
    }

    /// Every coordinate pair of every path (numbers taken two by two after each command letter).
    var points: [(Double, Double)] {
        var out: [(Double, Double)] = []
        for d in paths {
            var numbers: [Double] = []
            func flush() {
                var i = 0
                while i + 1 < numbers.count { out.append((numbers[i], numbers[i + 1])); i += 2 }
                numbers = []
            }
            var token = ""
            for c in d {
                if c.isLetter && c != "e" && c != "E" {
                    if let v = Double(token) { numbers.append(v) }
                    token = ""
                    flush()
                } else if c == " " || c == "," {
                    if let v = Double(token) { numbers.append(v) }
                    token = ""
                } else if c == "-" && !token.isEmpty && !token.hasSuffix("e") {
                    if let v = Double(token) { numbers.append(v) }
                    token = "-"
                } else {
                    token.append(c)
                }
            }
            if let v = Double(token) { numbers.append(v) }
            flush()
        }
        return out
    }
}

// MARK: - The browser

/// Debian's headless Chromium ([SYNC-96] tests): installed by `scripts/setup.sh --deps-only`.
enum Browser {
    static let binary = "/usr/bin/chromium-headless-shell"

    /// A screenshot of `url` in a `width` × `height` window, after the page's fetches ran
    /// (virtual time: the browser runs its clock forward until the page is idle or 5 s of
    /// page time passed).
    static func screenshot(_ url: String, width: Int, height: Int, to file: String) async throws -> Picture {
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            Issue.record("\(binary) is missing: run scripts/setup.sh --deps-only (it installs chromium-headless-shell)")
            throw CancellationError()
        }
        let child = try Subprocess.start(binary, ["--no-sandbox", "--headless", "--disable-gpu", "--hide-scrollbars",
                                                  "--window-size=\(width),\(height)", "--virtual-time-budget=5000",
                                                  "--user-data-dir=\(file).profile", "--screenshot=\(file)", url])
        // A browser that hangs is killed (by its pid) after 60 s instead of holding the suite.
        let watchdog = Task {
            try await Task.sleep(for: .seconds(60))
            child.kill()
        }
        let r = await child.wait()
        watchdog.cancel()
        guard r.code == 0, FileManager.default.fileExists(atPath: file) else {
            Issue.record("chromium failed (\(r.code)): \(r.errText.suffix(2000))")
            throw CancellationError()
        }
        return try Picture(png: file)
    }
}

/// RGB pixels, row by row.
struct Picture {
    let width: Int
    let height: Int
    var rgb: [UInt8]

    init(width: Int, height: Int, rgb: [UInt8]) {
        self.width = width
        self.height = height
        self.rgb = rgb
    }

    init(_ t: Thumbnail) {
        var rgb = [UInt8](repeating: 0, count: t.width * t.height * 3)
        for i in 0..<(t.width * t.height) {
            rgb[i * 3] = t.pixels[i * 4]
            rgb[i * 3 + 1] = t.pixels[i * 4 + 1]
            rgb[i * 3 + 2] = t.pixels[i * 4 + 2]
        }
        self.init(width: t.width, height: t.height, rgb: rgb)
    }

    /// A PNG file decoded by cairo (composited over white).
    init(png path: String) throws {
        let s = cairo_image_surface_create_from_png(path)
        defer { cairo_surface_destroy(s) }
        guard cairo_surface_status(s) == CAIRO_STATUS_SUCCESS else {
            throw LnoteError(.corrupt, "not a PNG cairo reads", path: path)
        }
        let w = Int(cairo_image_surface_get_width(s)), h = Int(cairo_image_surface_get_height(s))
        let stride = Int(cairo_image_surface_get_stride(s))
        let data = cairo_image_surface_get_data(s)!
        var rgb = [UInt8](repeating: 0, count: w * h * 3)
        for y in 0..<h {
            let row = UnsafeRawPointer(data + y * stride).assumingMemoryBound(to: UInt32.self)
            for x in 0..<w {
                let v = row[x]
                let a = Int((v >> 24) & 0xff)
                // Premultiplied: over white, c + (255 - a).
                for (k, shift) in [16, 8, 0].enumerated() {
                    rgb[(y * w + x) * 3 + k] = UInt8(min(255, Int((v >> UInt32(shift)) & 0xff) + 255 - a))
                }
            }
        }
        self.init(width: w, height: h, rgb: rgb)
    }

    func pixel(_ x: Int, _ y: Int) -> (Int, Int, Int) {
        let o = (y * width + x) * 3
        return (Int(rgb[o]), Int(rgb[o + 1]), Int(rgb[o + 2]))
    }

    func isWhite(_ x: Int, _ y: Int) -> Bool { pixel(x, y) == (255, 255, 255) }

    /// The bounding box of the pure white pixels (the page: the view draws nothing else white).
    var whiteBox: (x: Int, y: Int, width: Int, height: Int)? {
        var minX = Int.max, minY = Int.max, maxX = -1, maxY = -1
        for y in 0..<height {
            for x in 0..<width where isWhite(x, y) {
                minX = min(minX, x); maxX = max(maxX, x); minY = min(minY, y); maxY = max(maxY, y)
            }
        }
        return maxX < 0 ? nil : (minX, minY, maxX - minX + 1, maxY - minY + 1)
    }

    /// The `w` × `h` region at (`x`, `y`).
    func crop(_ x: Int, _ y: Int, _ w: Int, _ h: Int) -> Picture {
        var out = [UInt8](repeating: 255, count: w * h * 3)
        for r in 0..<h {
            for c in 0..<w {
                let (a, b, d) = pixel(x + c, y + r)
                out[(r * w + c) * 3] = UInt8(a); out[(r * w + c) * 3 + 1] = UInt8(b); out[(r * w + c) * 3 + 2] = UInt8(d)
            }
        }
        return Picture(width: w, height: h, rgb: out)
    }

    /// Mean absolute difference per channel (0...255) with a picture of the same size.
    func meanDifference(_ o: Picture) -> Double {
        precondition(width == o.width && height == o.height)
        var sum = 0
        for i in rgb.indices { sum += abs(Int(rgb[i]) - Int(o.rgb[i])) }
        return Double(sum) / Double(rgb.count)
    }

    /// Luma of a pixel (0...255).
    func luma(_ x: Int, _ y: Int) -> Int {
        let (r, g, b) = pixel(x, y)
        return (r * 299 + g * 587 + b * 114) / 1000
    }
}
