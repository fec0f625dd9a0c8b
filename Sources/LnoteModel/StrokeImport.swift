import Foundation

/// Reads strokes from JSON lines: one stroke per line,
/// `{"points": [[x, y, t_ms, pressure], ...]}` (see `Protocol/import-jsonl.md`).
///
/// Bad input is rejected whole with an error naming the file, the line (as `index`, 1-based)
/// and the byte offset of that line; nothing is imported from a file with a bad line.
public enum StrokeImport {
    /// One parsed line: its samples and the optional keys the importer understands.
    public struct Line: Sendable, Equatable {
        public var samples: [InputSample]
        /// `"page"`, when present (used by the benchmark's real-stroke files).
        public var page: String?
        public var lineNumber: Int
    }

    /// Largest import file accepted (a notebook page of strokes is a few MB).
    public static let maxBytes = 256 << 20

    public static func parse(_ data: [UInt8], path: String? = nil) throws -> [Line] {
        guard data.count <= maxBytes else {
            throw LnoteError(.limitExceeded, "import file is \(data.count) bytes; the limit is \(maxBytes)", path: path)
        }
        var out: [Line] = []
        var lineStart = 0
        var lineNumber = 0
        while lineStart < data.count {
            lineNumber += 1
            let end = data[lineStart...].firstIndex(of: UInt8(ascii: "\n")) ?? data.count
            let slice = data[lineStart..<end]
            defer { lineStart = end + 1 }
            if slice.allSatisfy({ $0 == 32 || $0 == 9 || $0 == 13 }) { continue }
            func fail(_ m: String) -> LnoteError {
                LnoteError(.invalidArgument, "line \(lineNumber): \(m)", path: path, offset: lineStart, index: lineNumber)
            }
            let obj: Any
            do { obj = try JSONSerialization.jsonObject(with: Data(slice), options: []) } catch {
                throw fail("not valid JSON")
            }
            guard let o = obj as? [String: Any] else { throw fail("expected an object") }
            guard let pts = o["points"] as? [Any] else { throw fail("missing \"points\" array") }
            guard !pts.isEmpty else { throw fail("\"points\" is empty") }
            guard pts.count <= Stroke.maxPoints else { throw fail("more than \(Stroke.maxPoints) points") }
            var samples: [InputSample] = []
            samples.reserveCapacity(pts.count)
            for (k, p) in pts.enumerated() {
                guard let a = p as? [Any], (2...4).contains(a.count) else {
                    throw fail("point \(k) must be [x, y], [x, y, t] or [x, y, t, pressure]")
                }
                func num(_ i: Int, _ what: String, nullable: Bool) throws -> Double? {
                    guard i < a.count else { return nil }
                    if a[i] is NSNull {
                        guard nullable else { throw fail("point \(k): \(what) cannot be null") }
                        return nil
                    }
                    guard !isBoolean(a[i]), let n = a[i] as? NSNumber, n.doubleValue.isFinite else {
                        throw fail("point \(k): \(what) is not a number")
                    }
                    return n.doubleValue
                }
                let x = try num(0, "x", nullable: false)!, y = try num(1, "y", nullable: false)!
                let t = try num(2, "t", nullable: true)
                let pr = try num(3, "pressure", nullable: true)
                if let pr, !(0...1).contains(pr) { throw fail("point \(k): pressure \(pr) is outside 0...1") }
                samples.append(InputSample(x: x, y: y, t: t, pressure: pr))
            }
            var page: String? = nil
            if let pv = o["page"] {
                if let s = pv as? String { page = s } else if let n = pv as? NSNumber, !isBoolean(pv) { page = n.stringValue }
                else { throw fail("\"page\" must be a string or a number") }
            }
            out.append(Line(samples: samples, page: page, lineNumber: lineNumber))
        }
        return out
    }

    /// Reads a file and builds quantized strokes with `style`.
    public static func strokes(contentsOf path: String, style: InkStyle = InkStyle()) throws -> [Stroke] {
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            throw LnoteError(.notFound, "cannot read import file", path: path, underlying: "\(error.localizedDescription)")
        }
        return try parse([UInt8](data), path: path).map { line in
            do { return try Stroke(samples: line.samples, style: style) } catch var e as LnoteError {
                e.path = path
                e.index = line.lineNumber
                e.message = "line \(line.lineNumber): \(e.message)"
                throw e
            }
        }
    }

    static func isBoolean(_ v: Any) -> Bool {
        type(of: v) == Bool.self || String(describing: type(of: v)) == "__NSCFBoolean"
    }
}
