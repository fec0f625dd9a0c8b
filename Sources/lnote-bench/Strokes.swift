import Foundation
import CLnoteZlib
import LnoteModel

/// Where the benchmark's strokes come from: the seeded handwriting generator, or real
/// strokes read from `--strokes FILE.jsonl`.
struct StrokeSource: Sendable {
    let seed: UInt64
    /// Real strokes by page (file order), when a file was given.
    let realPages: [(page: String, strokes: [Stroke])]?
    let realPath: String?

    init(seed: UInt64, strokesPath: String?) throws {
        self.seed = seed
        self.realPath = strokesPath
        guard let strokesPath else {
            realPages = nil
            return
        }
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: strokesPath)) } catch {
            throw LnoteError(.notFound, "cannot read strokes file", path: strokesPath, underlying: "\(error.localizedDescription)")
        }
        var pages: [(page: String, strokes: [Stroke])] = []
        var index: [String: Int] = [:]
        for line in try StrokeImport.parse([UInt8](data), path: strokesPath) {
            let stroke: Stroke
            do { stroke = try Stroke(samples: line.samples) } catch var e as LnoteError {
                e.path = strokesPath
                e.index = line.lineNumber
                e.message = "line \(line.lineNumber): \(e.message)"
                throw e
            }
            let key = line.page ?? ""
            if let i = index[key] { pages[i].strokes.append(stroke) } else {
                index[key] = pages.count
                pages.append((key, [stroke]))
            }
        }
        guard !pages.isEmpty else { throw LnoteError(.invalidArgument, "no strokes in file", path: strokesPath) }
        realPages = pages
    }

    var realStrokes: [Stroke]? { realPages?.flatMap(\.strokes) }

    /// `count` strokes of everyday handwriting: generated from `seed + stream`, or the real
    /// strokes (repeated in order when the file holds fewer than `count`).
    func handwriting(_ count: Int, stream: UInt64) -> [Stroke] {
        if let real = realStrokes, !real.isEmpty {
            let start = Int(stream % UInt64(real.count))
            return (0..<count).map { real[(start + $0) % real.count] }
        }
        return HandwritingGenerator.strokes(seed: seed &+ stream &* 0x9E37_79B9, count: count)
    }

    /// `count` strokes of the generator's `.pen` profile (issue 15: pen recordings at
    /// 60–240 Hz on a digitizer grid, short strokes, missing channels), from `seed + stream`:
    /// always generated, even with a file of real strokes.
    func pen(_ count: Int, stream: UInt64) -> [Stroke] {
        var o = HandwritingGenerator.Options()
        o.profile = .pen
        return HandwritingGenerator.strokes(seed: seed &+ stream &* 0x9E37_79B9, count: count, options: o)
    }

    /// The strokes of one ink profile of the benchmark: `.smooth` is `handwriting` (the
    /// file's strokes when one was given), `.pen` is `pen`.
    func strokes(_ profile: InkProfile, _ count: Int, stream: UInt64) -> [Stroke] {
        switch profile {
        case .smooth: handwriting(count, stream: stream)
        case .pen: pen(count, stream: stream)
        }
    }

    /// `count` generated strokes of exactly `points` points each (always generated: a file's
    /// strokes have their own lengths).
    func generated(_ count: Int, points: Int, stream: UInt64) -> [Stroke] {
        var o = HandwritingGenerator.Options()
        o.pointsPerStroke = points...points
        return HandwritingGenerator.strokes(seed: seed &+ stream &* 0x9E37_79B9, count: count, options: o)
    }

    /// Generated strokes with lengths in `points`.
    func generated(_ count: Int, pointRange points: ClosedRange<Int>, stream: UInt64) -> [Stroke] {
        var o = HandwritingGenerator.Options()
        o.pointsPerStroke = points
        return HandwritingGenerator.strokes(seed: seed &+ stream &* 0x9E37_79B9, count: count, options: o)
    }
}

/// The two kinds of ink cases 1 and 4 and `--codec` report side by side.
enum InkProfile: String, CaseIterable, Sendable {
    /// The generator's smooth cursive (240 Hz, 20–400 points a stroke), or the real strokes
    /// of `--strokes`.
    case smooth
    /// The generator's pen-recording profile (issue 15).
    case pen

    /// How a row names the ink (`real` when the smooth ink is replaced by a file's strokes).
    func label(_ source: StrokeSource) -> String {
        switch self {
        case .smooth: source.realStrokes == nil ? "smooth ink" : "real strokes"
        case .pen: "pen ink"
        }
    }
}

/// The naive encoding the article's SQLite migration describes: 16 bytes per sample point,
/// little-endian, here four 32-bit floats `x, y` (points), `t` (ms from the stroke's
/// start), `pressure` (0…1), the columns of the import format.
struct NaivePoint: Sendable {
    var x: Float32, y: Float32, t: Float32, pressure: Float32
}

enum Naive {
    static let bytesPerPoint = 16

    /// The BLOB of one stroke's points.
    static func encode(_ points: [StrokePoint]) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: points.count * bytesPerPoint) { buf, count in
            let raw = UnsafeMutableRawBufferPointer(buf)
            for (i, p) in points.enumerated() {
                let o = i * bytesPerPoint
                raw.storeBytes(of: Float32(Quantization.points(p.x)).bitPattern.littleEndian, toByteOffset: o, as: UInt32.self)
                raw.storeBytes(of: Float32(Quantization.points(p.y)).bitPattern.littleEndian, toByteOffset: o + 4, as: UInt32.self)
                raw.storeBytes(of: Float32(p.t).bitPattern.littleEndian, toByteOffset: o + 8, as: UInt32.self)
                raw.storeBytes(of: Float32(Quantization.pressure(p.pressure)).bitPattern.littleEndian, toByteOffset: o + 12, as: UInt32.self)
            }
            count = points.count * bytesPerPoint
        }
    }

    /// The points of a BLOB (what an app reading strokes from SQLite would hold).
    static func decode(_ blob: [UInt8]) -> [NaivePoint] {
        let n = blob.count / bytesPerPoint
        return [NaivePoint](unsafeUninitializedCapacity: n) { buf, count in
            blob.withUnsafeBytes { raw in
                for i in 0..<n {
                    let o = i * bytesPerPoint
                    buf[i] = NaivePoint(x: Float32(bitPattern: UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: o, as: UInt32.self))),
                                        y: Float32(bitPattern: UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: o + 4, as: UInt32.self))),
                                        t: Float32(bitPattern: UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: o + 8, as: UInt32.self))),
                                        pressure: Float32(bitPattern: UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: o + 12, as: UInt32.self))))
                }
            }
            count = n
        }
    }

    /// zlib `compress2` at the default level (6).
    static func zlibSize(_ bytes: [UInt8], level: Int32 = Z_DEFAULT_COMPRESSION) throws -> Int {
        var destLen = compressBound(uLong(bytes.count))
        var dest = [UInt8](repeating: 0, count: Int(destLen))
        let rc = dest.withUnsafeMutableBufferPointer { d in
            bytes.withUnsafeBufferPointer { s in
                compress2(d.baseAddress, &destLen, s.baseAddress, uLong(s.count), level)
            }
        }
        guard rc == Z_OK else { throw LnoteError(.io, "zlib compress2 failed (\(rc))") }
        return Int(destLen)
    }
}
