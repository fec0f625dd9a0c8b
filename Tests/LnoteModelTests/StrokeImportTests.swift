import Foundation
import Testing
import LnoteModel

/// A second quantizer written from `Protocol/import-jsonl.md` §2 alone, with other
/// arithmetic than the library's: 128-bit products and `floor((2|n| + d) / 2d)` for `div`,
/// `floor` and a comparison with one half for `round`, one expression per interpolated value.
enum ReferenceImport {
    struct Rejected: Error {}

    /// `round(v)`: nearest integer, ties away from zero.
    static func round(_ v: Double) throws -> Int64 {
        guard v.isFinite else { throw Rejected() }
        let f = v.rounded(.down)
        let frac = v - f  // exact: |v| < 2^53 here, or v is an integer
        guard abs(f) < 9.3e18 else { throw Rejected() }
        if frac > 0.5 || (frac == 0.5 && v > 0) { return Int64(f) + 1 }
        return Int64(f)
    }

    /// `div(n, d)`: the exact quotient rounded to nearest, ties away from zero.
    static func div(_ n: Int128, _ d: Int128) -> Int128 {
        let m = n < 0 ? -n : n
        let q = (2 * m + d) / (2 * d)
        return n < 0 ? -q : q
    }

    static func points(_ samples: [InputSample], width: Int32) throws -> [StrokePoint] {
        let n = samples.count
        var xs: [Int32] = [], ys: [Int32] = [], T: [Int128?] = [], P: [Int128?] = []
        for s in samples {
            for (v, out) in [(s.x, 0), (s.y, 1)] {
                let q = try round(v * 10)
                guard abs(q) <= 100_000_000 else { throw Rejected() }
                if out == 0 { xs.append(Int32(q)) } else { ys.append(Int32(q)) }
            }
            if let t = s.t {
                let q = try round(t)
                guard abs(q) < 9_000_000_000_000_000 else { throw Rejected() }
                T.append(Int128(q))
            } else { T.append(nil) }
            if let p = s.pressure {
                guard p.isFinite else { throw Rejected() }
                P.append(Int128(try round(min(max(p, 0), 1) * 1000)))
            } else { P.append(nil) }
        }
        func filled(_ v: [Int128?], step: Int128, none: Int128) -> [Int128] {
            let known = v.indices.filter { v[$0] != nil }
            guard let f = known.first, let l = known.last else { return (0..<n).map { none + Int128($0) * step } }
            return (0..<n).map { i -> Int128 in
                if let k = v[i] { return k }
                if i < f { return v[f]! - Int128(f - i) * step }
                if i > l { return v[l]! + Int128(i - l) * step }
                let a = known.last { $0 < i }!, b = known.first { $0 > i }!
                return v[a]! + div((v[b]! - v[a]!) * Int128(i - a), Int128(b - a))
            }
        }
        let times = filled(T, step: 4, none: 0)
        let pressures = filled(P, step: 0, none: 500)
        var out: [StrokePoint] = []
        var last: Int128 = 0
        for i in 0..<n {
            let t = max(times[i] - times[0], last)
            guard t <= 86_400_000 else { throw Rejected() }  // [IMP-4] step 4
            last = t
            let r = div(Int128(width) * (500 + pressures[i]), 2000)
            out.append(StrokePoint(x: xs[i], y: ys[i], pressure: UInt16(pressures[i]), radius: Int32(r), t: UInt32(t)))
        }
        return out
    }
}

/// Random input samples that hit the rules' corners: ties in every rounding, unknown values
/// in runs (all, none, at the ends), times that go backwards, origins of either sign.
struct SampleGenerator {
    var g: SplitMix64
    init(seed: UInt64) { g = SplitMix64(seed: seed) }

    mutating func coordinate() -> Double {
        switch g.int(in: 0...5) {
        case 0: return Double(g.int(in: -20_000...20_000)) * 0.05  // ties at the hundredths
        case 1: return Double(g.int(in: -8...8)) * 0.25  // exact binary ties
        case 2: return g.double(-2_000, 2_000)
        case 3: return g.chance(0.5) ? -0.0 : 0
        case 4: return Double(g.int(in: -100_000_000...100_000_000)) / 10 + (g.chance(0.5) ? 0.04 : -0.04)
        default: return g.double(-1, 1) * 1e-3
        }
    }

    mutating func pressure() -> Double {
        switch g.int(in: 0...3) {
        case 0: return Double(g.int(in: 0...2000)) * 0.0005  // ties in thousandths
        case 1: return g.unit()
        case 2: return g.chance(0.5) ? 0 : 1
        default: return Double(g.int(in: 0...1000)) / 1000
        }
    }

    mutating func samples() -> [InputSample] {
        let n = g.chance(0.1) ? g.int(in: 40...300) : g.int(in: 1...12)
        let tKnown = [0.0, 0.3, 0.7, 1.0][g.int(in: 0...3)]
        let pKnown = [0.0, 0.3, 0.7, 1.0][g.int(in: 0...3)]
        var t = g.chance(0.3) ? Double(g.int(in: -2_000_000...2_000_000)) + (g.chance(0.5) ? 0.5 : 0) : g.double(-1e12, 1e12)
        var out: [InputSample] = []
        for _ in 0..<n {
            switch g.int(in: 0...9) {
            case 0: t -= Double(g.int(in: 0...50))  // backwards
            case 1: t += Double(g.int(in: 0...3)) + 0.5  // a tie
            case 2: t += g.double(0, 30)
            default: t += Double(g.int(in: 0...9))
            }
            out.append(InputSample(x: coordinate(), y: coordinate(),
                                   t: g.chance(tKnown) ? t : nil,
                                   pressure: g.chance(pKnown) ? pressure() : nil))
        }
        return out
    }
}

@Suite("Stroke import: JSON lines and quantization")
struct StrokeImportTests {
    // MARK: - Quantization (section 2)

    /// [IMP-3] [IMP-4] [IMP-5] [IMP-6] `Stroke(samples:)` gives exactly what a second
    /// quantizer written from the spec gives, on random strokes built to hit every tie and
    /// every run of unknown values.
    @Test func matchesAReferenceBuiltFromTheSpec() throws {
        for seed in testSeeds(0x1A9_0001, count: 3000) {
            var gen = SampleGenerator(seed: seed)
            let samples = gen.samples()
            let width = Int32(gen.g.int(in: 1...400))
            let expected = try? ReferenceImport.points(samples, width: width)
            do {
                let s = try Stroke(samples: samples, style: InkStyle(width: width))
                #expect(s.points == expected, "seed \(seed): \(samples)")
            } catch let e as LnoteError {
                #expect(expected == nil, "seed \(seed): refused (\(e)) but the reference accepts \(samples)")
                #expect(e.code == .invalidArgument && e.index != nil, "seed \(seed): \(e)")
            }
        }
    }

    /// [IMP-4] Times start at 0 and never decrease; known non-decreasing times are kept
    /// exactly, relative to the first point; unknown ones outside the known ones are 4 ms
    /// a point; with no time known points are 4 ms apart; shifting every known time by a
    /// whole number of ms changes nothing.
    @Test func timeProperties() throws {
        for seed in testSeeds(0x1A9_0002, count: 1500) {
            var gen = SampleGenerator(seed: seed)
            let n = gen.g.int(in: 1...60)
            var t = Double(gen.g.int(in: -1_000_000...1_000_000))
            var samples: [InputSample] = []
            for _ in 0..<n {
                t += Double(gen.g.int(in: 0...20))
                samples.append(InputSample(x: 0, y: 0, t: gen.g.chance(0.6) ? t : nil))
            }
            let ts = try Stroke(samples: samples).points.map { Int64($0.t) }
            #expect(ts.first == 0, "seed \(seed)")
            #expect(zip(ts, ts.dropFirst()).allSatisfy { $0 <= $1 }, "seed \(seed): \(ts)")
            let known = samples.indices.filter { samples[$0].t != nil }
            if let f = known.first, let l = known.last {
                for i in known {
                    #expect(ts[i] == Int64(samples[i].t! - samples[f].t!) + 4 * Int64(f), "seed \(seed): point \(i)")
                }
                for i in 0..<f { #expect(ts[i] == 4 * Int64(i), "seed \(seed): point \(i) before the first known time") }
                for i in (l + 1)..<n { #expect(ts[i] == ts[l] + 4 * Int64(i - l), "seed \(seed): point \(i) after the last") }
                for i in f..<l where samples[i].t == nil {
                    let a = known.last { $0 < i }!, b = known.first { $0 > i }!
                    #expect(ts[a] <= ts[i] && ts[i] <= ts[b], "seed \(seed): point \(i) not between its neighbours")
                }
            } else {
                #expect(ts == (0..<n).map { 4 * Int64($0) }, "seed \(seed)")
            }
            let shift = Double(gen.g.int(in: -5_000_000...5_000_000))
            let shifted = samples.map { s in InputSample(x: s.x, y: s.y, t: s.t.map { $0 + shift }, pressure: s.pressure) }
            #expect(try Stroke(samples: shifted).points.map { Int64($0.t) } == ts, "seed \(seed): shift \(shift)")
        }
    }

    /// [IMP-5] [IMP-6] Known pressures are quantized alone; filled ones lie between their
    /// known neighbours, take the nearest known one outside them, 500 when none is known;
    /// the radius is `div(w · (500 + pressure), 2000)` of the quantized pressure, for any width.
    @Test func pressureAndRadiusProperties() throws {
        for seed in testSeeds(0x1A9_0003, count: 1500) {
            var gen = SampleGenerator(seed: seed)
            let samples = gen.samples().map { InputSample(x: 0, y: 0, t: $0.t, pressure: $0.pressure) }
            let width = Int32(gen.g.int(in: 1...100_000))
            let points = try Stroke(samples: samples, style: InkStyle(width: width)).points
            let ps = points.map { Int($0.pressure) }
            let known = samples.indices.filter { samples[$0].pressure != nil }
            for i in known {
                #expect(ps[i] == Int((samples[i].pressure! * 1000).rounded(.toNearestOrAwayFromZero)), "seed \(seed): point \(i)")
            }
            if let f = known.first, let l = known.last {
                for i in 0..<f { #expect(ps[i] == ps[f], "seed \(seed)") }
                for i in (l + 1)..<ps.count { #expect(ps[i] == ps[l], "seed \(seed)") }
                for i in f..<l where samples[i].pressure == nil {
                    let a = known.last { $0 < i }!, b = known.first { $0 > i }!
                    #expect(min(ps[a], ps[b]) <= ps[i] && ps[i] <= max(ps[a], ps[b]), "seed \(seed): point \(i)")
                }
            } else {
                #expect(ps.allSatisfy { $0 == 500 }, "seed \(seed)")
            }
            for p in points {
                let exact = Double(width) * Double(500 + Int(p.pressure)) / 2000
                #expect(abs(Double(p.radius) - exact) <= 0.5, "seed \(seed)")
                #expect(p.radius == Stroke.radius(width: width, pressure: p.pressure), "seed \(seed)")
                #expect(Int64(p.radius) == Int64(ReferenceImport.div(Int128(width) * Int128(500 + Int(p.pressure)), 2000)),
                        "seed \(seed)")
            }
        }
        // Every pressure at the default width: (500 + p) / 100, ties away from zero.
        for p in UInt16(0)...1000 {
            #expect(Stroke.radius(width: 20, pressure: p) == Int32((500 + Int(p) + 50) / 100), "pressure \(p)")
        }
    }

    /// [IMP-3] The rounding of known values, the spec's examples and its limits.
    @Test func knownValueRounding() throws {
        func one(_ x: Double, _ y: Double = 0, t: Double? = nil, p: Double? = nil) throws -> StrokePoint {
            try Stroke(samples: [InputSample(x: x, y: y, t: t, pressure: p)]).points[0]
        }
        #expect(try one(1.15).x == 12)  // 1.15 ⊗ 10 is exactly 11.5
        #expect(try one(10.05).x == 101)
        #expect(try one(0.25).x == 3 && one(-0.25).x == -3)
        #expect(try one(-0.0).x == 0)
        #expect(try one(0, p: 0.5005).pressure == 500)  // 500.49999999999994
        #expect(try one(0, p: 0.2505).pressure == 251)
        #expect(try one(10_000_000.04).x == 100_000_000)
        #expect(try one(-10_000_000.04).x == -100_000_000)
        #expect(throws: LnoteError(.invalidArgument)) { try one(10_000_000.05) }
        #expect(throws: LnoteError(.invalidArgument)) { try one(0, -10_000_000.05) }
        #expect(throws: LnoteError(.invalidArgument)) { try one(.nan) }
        #expect(throws: LnoteError(.invalidArgument)) { try one(.infinity) }
        #expect(throws: LnoteError(.invalidArgument)) { try one(0, t: .nan) }
        #expect(throws: LnoteError(.invalidArgument)) { try one(0, p: .nan) }
        #expect(throws: LnoteError(.invalidArgument)) { try one(0, p: -.infinity) }
        #expect(throws: LnoteError(.invalidArgument)) { try one(0, t: 9e15) }
        #expect(throws: LnoteError(.invalidArgument)) { try one(0, t: -9e15) }
        #expect(try one(0, t: 8_999_999_999_999_999).t == 0)
        // The library clamps pressure outside 0...1 (the import rejects it first, [IMP-2]).
        #expect(try one(0, p: -3).pressure == 0 && one(0, p: 7).pressure == 1000)
        // Times: half away from zero, then relative.
        let ts = try Stroke(samples: [InputSample(x: 0, y: 0, t: -0.5), InputSample(x: 0, y: 0, t: 0.5),
                                      InputSample(x: 0, y: 0, t: 4.5)]).points.map(\.t)
        #expect(ts == [0, 2, 6])
        // The range of relative times.
        // [IMP-4] At most 24 h, what an operation may carry ([LOG-23]): 86,400,000 ms is
        // accepted, one more is not, whatever the origin of the times.
        let long = [InputSample(x: 0, y: 0, t: 1e9), InputSample(x: 0, y: 0, t: 1e9 + 86_400_000)]
        #expect(try Stroke(samples: long).points.last?.t == ContentBounds.maxStrokeDuration)
        #expect(ContentBounds.problem(.stroke(try Stroke(samples: long))) == nil)
        for tooLong in [[InputSample(x: 0, y: 0, t: 0), InputSample(x: 0, y: 0, t: 86_400_001)],
                        [InputSample(x: 0, y: 0, t: 0), InputSample(x: 0, y: 0, t: 4_294_967_296)],
                        // Rounded times count: −86,400,000.5 is −86,400,001 ms, 0.4 is 0.
                        [InputSample(x: 0, y: 0, t: -86_400_000.5), InputSample(x: 0, y: 0, t: 0.4)]] {
            do {
                _ = try Stroke(samples: tooLong)
                Issue.record("a stroke of more than 24 h accepted")
            } catch let e as LnoteError {
                #expect(e.code == .invalidArgument && e.index == 1 && e.message.contains("longer than 86400000 ms"), "\(e)")
            }
        }
        // Far-apart known times interpolate without overflow.
        let far = try Stroke(samples: [InputSample(x: 0, y: 0, t: 8e15), InputSample(x: 0, y: 0),
                                       InputSample(x: 0, y: 0, t: -8e15), InputSample(x: 0, y: 0),
                                       InputSample(x: 0, y: 0, t: 8e15 + 2)])
        #expect(far.points.map(\.t) == [0, 0, 0, 0, 2])
        #expect(throws: LnoteError(.invalidArgument)) { try Stroke(samples: []) }
    }

    // MARK: - The file (section 1)

    func parse(_ text: String) throws -> [StrokeImport.Line] {
        try StrokeImport.parse(Array(text.utf8), path: "t.jsonl")
    }

    /// [IMP-1] [IMP-2] [IMP-8] What a line may hold: numbers in every JSON form, nulls and
    /// missing values, other keys of any kind, a page as text, blank lines, CRLF, a BOM.
    @Test func acceptedLines() throws {
        let raw = ["\u{FEFF}{\"points\": [[1e3, -0, null, -0], [1E-1, 2.5e+1, 7, null], [0.5, 1]]}\r",
                   "  \t\r",
                   "{\"x\": {\"a\": [[[]], {}], \"b\": \"\\u00e9\\ud83d\\ude00\\n\\\"\"}, \"points\":[[1,2,3,1]], \"page\": \"p \\u0031\"}",
                   "{\"page\": 1e3, \"points\": [[1, 2]]}",
                   "  {\"points\": [[-1.5, 3, 4.25]], \"page\": -7} "]
        let text = raw.joined(separator: "\n")
        var starts: [Int] = [3]  // after the byte order mark
        for l in raw.dropLast() { starts.append(starts.last! + l.utf8.count + 1 - (starts.count == 1 ? 3 : 0)) }
        let lines = try parse(text)
        #expect(lines.map(\.lineNumber) == [1, 3, 4, 5])
        #expect(lines.map(\.offset) == [starts[0], starts[2], starts[3], starts[4]])
        #expect(lines.map(\.page) == [nil, "p 1", "1e3", "-7"])
        let first = lines[0].samples
        #expect(first.count == 3)
        #expect(first[0] == InputSample(x: 1000, y: 0, t: nil, pressure: 0))
        #expect(first[0].y.sign == .minus && first[0].pressure?.sign == .minus)  // `-0` is −0
        #expect(first[1] == InputSample(x: 0.1, y: 25, t: 7, pressure: nil))
        #expect(first[2] == InputSample(x: 0.5, y: 1))
        #expect(lines[3].samples == [InputSample(x: -1.5, y: 3, t: 4.25)])
        // 1,048,576 points are accepted.
        let many = "{\"points\": [" + Array(repeating: "[0,0]", count: Stroke.maxPoints).joined(separator: ",") + "]}"
        #expect(try parse(many)[0].samples.count == Stroke.maxPoints)
        // 64 levels of nesting (the object is the first).
        let deep = "{\"a\": " + String(repeating: "[", count: 63) + String(repeating: "]", count: 63) + ", \"points\": [[0, 0]]}"
        #expect(try parse(deep).count == 1)
        #expect(try parse("").isEmpty && parse("\n\r\n \n").isEmpty)
    }

    /// [IMP-1] [IMP-2] [IMP-8] [IMP-7] Every kind of bad line is refused with the line number,
    /// the line's offset and what is wrong.
    @Test func rejectedLines() throws {
        let good = "{\"points\": [[1, 2]]}\n"
        let cases: [(String, String)] = [
            ("[[1, 2]]", "expected an object"),
            ("{\"points\": 3}", "missing \"points\""),
            ("{\"point\": [[1, 2]]}", "missing \"points\""),
            ("{\"points\": []}", "empty"),
            ("{\"points\": [[1]]}", "point 0 must be"),
            ("{\"points\": [[1, 2, 3, 0.5, 9]]}", "point 0 must be"),
            ("{\"points\": [[1, 2], 3]}", "point 1 must be"),
            ("{\"points\": [[null, 2]]}", "x cannot be null"),
            ("{\"points\": [[1, null]]}", "y cannot be null"),
            ("{\"points\": [[1, true]]}", "y is not a number"),
            ("{\"points\": [[\"1\", 2]]}", "x is not a number"),
            ("{\"points\": [[1, 2, false]]}", "t is not a number"),
            ("{\"points\": [[1, 2, 0, [0.5]]]}", "pressure is not a number"),
            ("{\"points\": [[1, 2, 0, 1.0000001]]}", "outside 0...1"),
            ("{\"points\": [[1, 2, 0, -1e-9]]}", "outside 0...1"),
            ("{\"points\": [[1, 2]], \"points\": [[1, 2]]}", "\"points\" appears twice"),
            ("{\"points\": [[1, 2]], \"page\": \"a\", \"page\": \"a\"}", "\"page\" appears twice"),
            ("{\"points\": [[1, 2]], \"page\": null}", "\"page\" must be"),
            ("{\"points\": [[1, 2]], \"page\": [1]}", "\"page\" must be"),
            ("{\"points\": [[1, 2, NaN]]}", "not valid JSON"),
            ("{\"points\": [[1, 2, Infinity]]}", "not valid JSON"),
            ("{\"points\": [[1, 2, -Infinity]]}", "not valid JSON"),
            ("{\"points\": [[1, 2, 1e400]]}", "too large"),
            ("{\"points\": [[1, -1e309]]}", "too large"),
            ("{\"points\": [[01, 2]]}", "leading zero"),
            ("{\"points\": [[+1, 2]]}", "not valid JSON"),
            ("{\"points\": [[.5, 2]]}", "not valid JSON"),
            ("{\"points\": [[1., 2]]}", "not valid JSON"),
            ("{\"points\": [[1e, 2]]}", "not valid JSON"),
            ("{\"points\": [[1, 2],]}", "not valid JSON"),
            ("{\"points\": [[1, 2]],}", "not valid JSON"),
            ("{'points': [[1, 2]]}", "not valid JSON"),
            ("{\"points\": [[1, 2]]} // c", "not valid JSON"),
            ("{\"points\": [[1, 2]]} {}", "not valid JSON"),
            ("{\"points\": [[1, 2]]", "not valid JSON"),
            ("{\"s\": \"\\ud800\", \"points\": [[1, 2]]}", "unpaired surrogate"),
            ("{\"s\": \"\\udc00x\", \"points\": [[1, 2]]}", "unpaired surrogate"),
            ("{\"s\": \"\\x\", \"points\": [[1, 2]]}", "bad escape"),
            ("{\"s\": \"a\tb\", \"points\": [[1, 2]]}", "control character"),
            ("{\"s\": \"\u{FEFF}\", \"points\": [[1, 2]]}", ""),  // accepted: see below
            ("{\"a\": " + String(repeating: "[", count: 64) + String(repeating: "]", count: 64) + ", \"points\": [[0, 0]]}",
             "nested too deeply"),
            ("\u{FEFF}{\"points\": [[1, 2]]}", "not valid JSON"),  // a BOM not at the start of the file
        ]
        for (i, (line, fragment)) in cases.enumerated() {
            let text = good + "\n" + line + "\n" + good
            if fragment.isEmpty {
                #expect(try parse(text).count == 3, "case \(i)")
                continue
            }
            do {
                _ = try parse(text)
                Issue.record("case \(i) accepted: \(line)")
            } catch let e as LnoteError {
                #expect(e.code == .invalidArgument && e.index == 3 && e.offset == good.utf8.count + 1 && e.path == "t.jsonl",
                        "case \(i): \(e)")
                #expect(e.message.hasPrefix("line 3: ") && e.message.contains(fragment), "case \(i): \(e.message)")
            }
        }
        // Bytes that are not UTF-8 inside a string.
        var bytes = Array(good.utf8) + Array("{\"s\": \"".utf8) + [0xC3, 0x28] + Array("\", \"points\": [[1, 2]]}".utf8)
        #expect(throws: LnoteError(.invalidArgument)) { try StrokeImport.parse(bytes) }
        bytes = Array("{\"points\": [".utf8) + Array(repeating: Array("[0,0],".utf8), count: Stroke.maxPoints).flatMap { $0 }
            + Array("[0,0]]}".utf8)
        #expect(throws: LnoteError(.invalidArgument)) { try StrokeImport.parse(bytes) }
    }

    /// [IMP-8] Every number is the binary64 nearest to its text: random binary64 values
    /// printed in their shortest form, with 17 significant digits and with an exponent, read
    /// back bit for bit (Foundation's JSONSerialization on Linux misreads about half of them).
    @Test func numbersAreCorrectlyRounded() throws {
        for seed in testSeeds(0x1A9_0004, count: 20) {
            var g = SplitMix64(seed: seed)
            var values: [Double] = []
            while values.count < 500 {
                let v = g.chance(0.5) ? Double(bitPattern: g.next()) : g.double(-20_000, 20_000)
                if v.isFinite { values.append(v) }
            }
            let texts = values.flatMap { v -> [String] in
                [v.description, String(format: "%.17g", v), String(format: "%.16e", v)]
            }
            let line = "{\"points\": [" + texts.map { "[0, 0, \($0)]" }.joined(separator: ", ") + "]}"
            let got = try parse(line)[0].samples.map { $0.t! }
            for (k, text) in texts.enumerated() {
                #expect(got[k].bitPattern == values[k / 3].bitPattern, "seed \(seed): \(text) read as \(got[k])")
            }
        }
    }

    /// [IMP-1] [IMP-2] Random strokes written as JSON lines in varied but valid forms (key
    /// order, spacing, CRLF, nulls or missing trailing values, extra keys) read back as the
    /// same samples.
    @Test func fileRoundTrip() throws {
        for seed in testSeeds(0x1A9_0005, count: 60) {
            var gen = SampleGenerator(seed: seed)
            var strokes: [[InputSample]] = []
            var text = ""
            for _ in 0..<gen.g.int(in: 1...8) {
                let s = gen.samples()
                strokes.append(s)
                let pts = s.map { p -> String in
                    var v = ["\(p.x)", "\(p.y)", p.t.map { "\($0)" } ?? "null", p.pressure.map { "\($0)" } ?? "null"]
                    while v.count > 2, v.last == "null", gen.g.chance(0.5) { v.removeLast() }
                    return "[" + v.joined(separator: gen.g.chance(0.5) ? "," : ", ") + "]"
                }
                let points = "\"points\" : [" + pts.joined(separator: ",") + "]"
                let extra = "\"meta\": {\"k\": [1, \"two\", null, true]}"
                text += (gen.g.chance(0.5) ? "{\(points), \(extra)}" : "{ \(extra),\(points) }")
                text += gen.g.chance(0.3) ? "\r\n" : "\n"
                if gen.g.chance(0.2) { text += "\n" }
            }
            let lines = try parse(text)
            #expect(lines.map(\.samples) == strokes, "seed \(seed)")
        }
    }
}
