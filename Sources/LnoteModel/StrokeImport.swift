import Foundation

/// Reads strokes from JSON lines: one stroke per line,
/// `{"points": [[x, y, t_ms, pressure], ...]}` (see `Protocol/import-jsonl.md`).
///
/// Bad input is rejected whole with an error naming the file, the line (as `index`, 1-based)
/// and the byte offset of that line; nothing is imported from a file with a bad line.
///
/// The file is parsed as a stream ([IMP-9]): it is read in chunks, each line's points go
/// straight into samples (no tree of JSON values, no copy of the file), and each line becomes
/// its stroke before the next is read, so memory follows the strokes, not the text; the
/// first byte that makes the file unacceptable (a point past the limit, a bad value) stops
/// the reading there.
///
/// The lines are read by a small strict JSON parser of its own ([IMP-1]) rather than
/// Foundation's `JSONSerialization`, whose Linux implementation turns many numbers with 17
/// significant digits (what most programs print for a `Double`) into a `Decimal` and then
/// into a `Double` one unit in the last place off: the same file would quantize differently
/// on Linux and macOS, and differently from any correctly rounded reader. Here every number
/// is the nearest binary64 to its decimal text (`Double.init(_: String)`, correctly
/// rounded).
public enum StrokeImport {
    /// One parsed line: its samples and the optional keys the importer understands.
    public struct Line: Sendable, Equatable {
        public var samples: [InputSample]
        /// `"page"`, when present (used by the benchmark's real-stroke files): a string, or a
        /// number's text exactly as written.
        public var page: String?
        public var lineNumber: Int
        /// Byte offset of the line's first byte in the file.
        public var offset: Int = 0
        /// Whether `page` was a JSON string or a number ([IMP-10] reads them differently).
        public var pageKind: PageKind? = nil
    }

    /// The JSON type of a line's `"page"` value.
    public enum PageKind: Sendable, Equatable { case string, number }

    /// Largest import file accepted (a notebook page of strokes is a few MB).
    public static let maxBytes = 256 << 20

    /// Deepest nesting of arrays and objects accepted in a line (a stroke needs 3).
    public static let maxDepth = 64

    /// Bytes read from the file at a time.
    static let chunkSize = 1 << 20

    /// Parses every line of `data` (an import file held in memory).
    ///
    /// - Throws: `limitExceeded` for more than `maxBytes` bytes; `invalidArgument` naming the
    ///   line for the first bad line ([IMP-7]).
    public static func parse(_ data: [UInt8], path: String? = nil) throws -> [Line] {
        guard data.count <= maxBytes else {
            throw LnoteError(.limitExceeded, "import file is \(data.count) bytes; the limit is \(maxBytes)", path: path)
        }
        var reader = ImportLineReader(ImportByteStream(bytes: data), path: path)
        var out: [Line] = []
        while let line = try reader.next() { out.append(line) }
        return out
    }

    /// The lines of a file given a chunk at a time (`next` gives nil at its end): the path
    /// `strokes(contentsOf:)` takes, without the file. No size limit is applied here.
    ///
    /// - Throws: `invalidArgument` naming the line for the first bad line ([IMP-7]), and
    ///   whatever `next` throws.
    public static func parse(chunks next: @escaping () throws -> [UInt8]?, path: String? = nil) throws -> [Line] {
        var reader = ImportLineReader(ImportByteStream(refill: next), path: path)
        var out: [Line] = []
        while let line = try reader.next() { out.append(line) }
        return out
    }

    /// Reads a file as a stream and builds quantized strokes with `style`, one line at a time.
    ///
    /// - Throws: `notFound` or `io` when the file cannot be read; `limitExceeded` for a file
    ///   over `maxBytes`; `invalidArgument` naming the line, its offset and the point for the
    ///   first bad line ([IMP-7]), read no further than that.
    public static func strokes(contentsOf path: String, style: InkStyle = InkStyle()) throws -> [Stroke] {
        try pagedStrokes(contentsOf: path, style: style).map(\.stroke)
    }

    /// One stroke of a file with the line's `"page"` value (nil without one) and its line.
    public struct PagedStroke: Sendable {
        public var page: String?
        public var pageKind: PageKind?
        public var lineNumber: Int
        public var offset: Int
        public var stroke: Stroke
    }

    /// Why an import file does not open, in the system's words (`notFound` when it does not
    /// exist, else `io`): `FileHandle` says nothing.
    package static func openFailure(_ path: String) -> LnoteError {
        let fd = open(path, O_RDONLY)
        let code = errno
        if fd >= 0 {
            close(fd)
            return LnoteError(.io, "cannot read import file", path: path)
        }
        return LnoteError(code == ENOENT || code == ENOTDIR ? .notFound : .io, "cannot read import file", path: path,
                          underlying: String(cString: strerror(code)))
    }

    /// `strokes(contentsOf:style:)` keeping each line's `"page"` ([IMP-10]); `-` reads standard
    /// input (a pipe has no size: the limit is applied as it is read).
    public static func pagedStrokes(contentsOf path: String, style: InkStyle = InkStyle(),
                                    budget: ImportBudget = ImportBudget()) throws -> [PagedStroke] {
        let handle: FileHandle
        if path == "-" {
            handle = FileHandle.standardInput
        } else {
            guard let h = FileHandle(forReadingAtPath: path) else { throw openFailure(path) }
            handle = h
        }
        defer { if path != "-" { try? handle.close() } }
        // A regular file says its size: one over the limit is refused before any byte is read.
        if let size = try? handle.seekToEnd() {
            guard size <= UInt64(maxBytes) else {
                throw LnoteError(.limitExceeded, "import file is \(size) bytes; the limit is \(maxBytes)", path: path)
            }
            do { try handle.seek(toOffset: 0) } catch {
                throw LnoteError(.io, "cannot read import file", path: path, underlying: "\(error.localizedDescription)")
            }
        }
        // Whatever the size said (a pipe, a file still growing), no more than the limit is read.
        var total = 0
        let stream = ImportByteStream { () throws -> [UInt8]? in
            let data: Data?
            do { data = try handle.read(upToCount: chunkSize) } catch {
                throw LnoteError(.io, "cannot read import file", path: path, offset: total, underlying: "\(error.localizedDescription)")
            }
            guard let data, !data.isEmpty else { return nil }
            total += data.count
            guard total <= maxBytes else {
                throw LnoteError(.limitExceeded, "import file is more than \(maxBytes) bytes", path: path)
            }
            return [UInt8](data)
        }
        var reader = ImportLineReader(stream, path: path)
        var out: [PagedStroke] = []
        var budget = budget
        while let line = try reader.next() {
            // [IMP-11] The import's budget, checked at the line that passes it.
            if let problem = budget.add(pointCount: line.samples.count) {
                throw LnoteError(.limitExceeded, "line \(line.lineNumber): \(problem)", path: path, offset: line.offset, index: line.lineNumber)
            }
            out.append(PagedStroke(page: line.page, pageKind: line.pageKind, lineNumber: line.lineNumber, offset: line.offset,
                                   stroke: try stroke(line, style: style, path: path)))
        }
        return out
    }

    /// The stroke of one parsed line, an error naming the line when [IMP-3] or [IMP-4] refuse it.
    static func stroke(_ line: Line, style: InkStyle, path: String?) throws -> Stroke {
        do { return try Stroke(samples: line.samples, style: style) } catch var e as LnoteError {
            e.path = path
            e.index = line.lineNumber
            e.offset = line.offset
            e.message = "line \(line.lineNumber): \(e.message)"
            throw e
        }
    }
}
