import Foundation
import Testing
@testable import LnoteModel

/// [IMP-9] The import reads its file as a stream: the same lines, values and errors whatever
/// the chunks the file arrives in, and a file that cannot be accepted is read no further
/// than the byte that shows it.
@Suite("Stroke import: streaming")
struct StrokeImportStreamingTests {
    /// The outcome of a parse, comparable: the lines, or the error's code, message, offset, index.
    enum Outcome: Equatable {
        case lines([StrokeImport.Line])
        case error(LnoteError.Code, String, Int?, Int?)
    }

    static func outcome(_ body: () throws -> [StrokeImport.Line]) -> Outcome {
        do { return .lines(try body()) } catch let e as LnoteError {
            return .error(e.code, e.message, e.offset, e.index)
        } catch {
            return .error(.invalidState, "\(error)", nil, nil)
        }
    }

    /// `bytes` served `size` bytes at a time.
    static func chunked(_ bytes: [UInt8], _ size: Int) -> () throws -> [UInt8]? {
        var at = 0
        return {
            guard at < bytes.count else { return nil }
            defer { at = min(bytes.count, at + size) }
            return Array(bytes[at..<min(bytes.count, at + size)])
        }
    }

    /// [IMP-9] Every split of a file into chunks reads as the file whole: accepted lines
    /// (with a byte order mark, CRLF, blank lines, escapes, multi-byte UTF-8 across chunk
    /// ends) and every kind of rejected line, with the same error.
    @Test func chunksReadAsTheWhole() throws {
        var texts = [
            "\u{FEFF}{\"points\": [[1e3, -0, null, -0], [1E-1, 2.5e+1, 7, null], [0.5, 1]]}\r\n  \t\r\n"
                + "{\"x\": {\"a\": [[[]], {}], \"b\": \"\\u00e9\\ud83d\\ude00\\n\\\"é😀\"}, \"points\":[[1,2,3,1]], \"page\": \"p \\u0031\"}\n"
                + "{\"page\": 1e3, \"points\": [[1, 2]]}\n  {\"points\": [[-1.5, 3, 4.25]], \"page\": -7} ",
            "\u{FEFF}",
            "\u{FE}",
            "\n\n",
        ]
        let good = "{\"points\": [[1, 2]]}\n"
        for bad in ["{\"points\": [[1, 2, 0, 1.0000001]]}", "{\"s\": \"\\ud800\", \"points\": [[1, 2]]}",
                    "{\"points\": [[1, 2]]} {}", "{\"points\": [[1, 2]]", "{\"points\": [[1, 2], 3]}", "[[1, 2]]",
                    "{\"a\": " + String(repeating: "[", count: 64) + String(repeating: "]", count: 64) + "}",
                    "{\"s\": \"\u{E9}\", \"points\": [[01, 2]]}", "{\"points\": [[1, 2]], \"page\": [1]}"] {
            texts.append(good + "\n" + bad + "\n" + good)
        }
        var bytes = texts.map { Array($0.utf8) }
        // Invalid UTF-8 in a string, split anywhere.
        bytes.append(Array(good.utf8) + Array("{\"s\": \"".utf8) + [0xE2, 0x82, 0x28] + Array("\", \"points\": [[1, 2]]}".utf8))
        var compared = 0
        for b in bytes {
            let whole = Self.outcome { try StrokeImport.parse(b, path: "t.jsonl") }
            for size in [1, 2, 3, 5, 7, 64, 1 << 20] {
                let streamed = Self.outcome { try StrokeImport.parse(chunks: Self.chunked(b, size), path: "t.jsonl") }
                #expect(streamed == whole, "chunks of \(size): \(String(decoding: b, as: UTF8.self))")
                compared += 1
            }
        }
        #expect(compared == bytes.count * 7)
    }

    /// [IMP-9] A line with one point more than allowed is refused when that point starts,
    /// naming the line, its offset and the point's byte offset in the file, and nothing after
    /// it is read: the file served here would otherwise go on for 64 MiB of points.
    @Test func readsNoFurtherThanThePointOverTheLimit() throws {
        let head = Array("{\"points\": [".utf8)
        let point = Array("[0,0],".utf8)
        let chunk = 1 << 16
        var served = 0
        var pending: [UInt8] = head
        let source: () throws -> [UInt8]? = {
            guard served < 64 << 20 else { return nil }
            while pending.count < chunk { pending += point }
            let out = Array(pending[..<chunk])
            pending.removeFirst(chunk)
            served += out.count
            return out
        }
        let limitAt = head.count + Stroke.maxPoints * point.count
        do {
            _ = try StrokeImport.parse(chunks: source, path: "big.jsonl")
            Issue.record("a line of more than \(Stroke.maxPoints) points accepted")
        } catch let e as LnoteError {
            #expect(e.code == .invalidArgument && e.index == 1 && e.offset == 0 && e.path == "big.jsonl", "\(e)")
            #expect(e.message == "line 1: more than \(Stroke.maxPoints) points: point \(Stroke.maxPoints) starts at byte \(limitAt) of the file",
                    "\(e)")
        }
        #expect(served < limitAt + 2 * chunk, "read \(served) bytes; the point over the limit starts at \(limitAt)")
    }

    /// [IMP-9] [IMP-1] A file over 256 MiB is refused from its size, before its lines are read.
    @Test func fileSizeLimit() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lnote-import-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("big.jsonl").path
        // A sparse file: 256 MiB + 1 of zero bytes, the first line a bad one.
        #expect(FileManager.default.createFile(atPath: path, contents: Data("not json\n".utf8)))
        let h = try #require(FileHandle(forWritingAtPath: path))
        try h.truncate(atOffset: UInt64(StrokeImport.maxBytes) + 1)
        try h.close()
        do {
            _ = try StrokeImport.strokes(contentsOf: path)
            Issue.record("a file over the limit accepted")
        } catch let e as LnoteError {
            // The size, not the bad first line: nothing was parsed.
            #expect(e.code == .limitExceeded && e.path == path && e.message.contains("\(StrokeImport.maxBytes + 1) bytes"), "\(e)")
        }
        // Exactly at the limit the lines are read (and the first one is refused).
        let h2 = try #require(FileHandle(forWritingAtPath: path))
        try h2.truncate(atOffset: UInt64(StrokeImport.maxBytes))
        try h2.close()
        #expect(throws: LnoteError(.invalidArgument)) { try StrokeImport.strokes(contentsOf: path) }
        #expect(throws: LnoteError(.notFound)) { try StrokeImport.strokes(contentsOf: dir.appendingPathComponent("none").path) }
    }
}
