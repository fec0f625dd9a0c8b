import Foundation
import Testing
@testable import LnoteModel

/// Point stream v2 with digitizer grids (`Protocol/page-snapshot.md` [PT2-11]) against
/// `ReferenceStrokeCodecV2`, a second codec written from the spec alone, in both contexts
/// with grids: a stroke coded alone in an `addStroke3` frame (the standalone context with
/// written parameters and grids, [LOG-32]) and the chunks of a version-3 snapshot (the
/// initial chunk context with grids, carried from stroke to stroke, [SNAP-42]). The same
/// bytes for every stroke, and for every input the same points with the reader at the same
/// offset, or the same error code, offset and path. Error messages are not compared.
///
/// Sensitivity, checked by hand once (not a committed change): with the reference's
/// `smallestPhase` returning the *largest* phase with which the values fit
/// (`for p in (0..<grid.q).reversed() …`), `encoderMatchesReference` found 56 of its 74
/// chunk encodings different (from the first stroke whose x or y fits a grid of `q ≥ 2` with
/// two phases: the phase bits differ), `decoderMatchesReferenceOnMutations` 1,368 decodings
/// that differ (production refusing what the reference reads, and the other way round) and
/// `canonicalRefusals` 710; the reference on its own stayed self-consistent
/// (`referenceRoundTripsAndIsCanonical` passed), as a wrong reading of the spec would.
/// A third context, a version-4 chunk with predictors ([PT2-12]), is compared the same way;
/// checked by hand once: with production's predictor choosing the alternative on a tie
/// (`<=` in `Predictor.choose`), the encoder, decoder and refusal comparisons and the
/// `grid-page-v4` vector failed (65 issues).
@Suite("Point codec v2 with digitizer grids against the reference")
struct StrokeCodecV2GridTests {
    typealias Ref = ReferenceStrokeCodecV2
    typealias Suite2 = StrokeCodecV2ReferenceTests
    typealias Stroke2 = Suite2.Stroke2
    typealias ChunkOutcome = Suite2.ChunkOutcome
    typealias Differences = StrokeCodecReferenceTests.Differences

    /// The two contexts with grids.
    enum Kind: CaseIterable, CustomStringConvertible {
        /// A stroke alone: `addStroke3`, written parameters and grids, a fresh context each.
        case frame
        /// A version-3 snapshot's chunk: adaptive Rice states and grids, carried.
        case chunk
        /// A version-4 snapshot's chunk: a version-3 chunk with predictors ([PT2-12]).
        case chunkWithPredictors

        var initial: Contexts {
            switch self {
            case .frame: Contexts(production: .standaloneWithGrids, reference: .standalone(writtenParameters: true, grids: true))
            case .chunk: Contexts(production: .chunkWithGrids, reference: .chunk(grids: true))
            case .chunkWithPredictors: Contexts(production: .chunkWithPredictors, reference: .chunk(grids: true, predictors: true))
            }
        }

        var description: String {
            switch self {
            case .frame: "frame"
            case .chunk: "chunk"
            case .chunkWithPredictors: "chunk with predictors"
            }
        }
    }

    /// A context of each codec, meant to be the same.
    struct Contexts {
        var production: StrokeCodecV2.Context
        var reference: Ref.Context
    }

    // MARK: Comparing

    /// Strokes read one after the other from `bytes`, from `start` (the kind's initial context
    /// by default); a frame's strokes each from a fresh context, a chunk's with one carried.
    static func outcome(_ bytes: [UInt8], widths: [Int32], kind: Kind, from start: Contexts? = nil,
                        range: Range<Int>? = nil, base: Int, path: String, reference: Bool) -> (ChunkOutcome, message: String) {
        var r = ByteReader(bytes, range: range ?? 0..<bytes.count, base: base, path: path)
        var c = start ?? kind.initial
        var strokes: [[StrokePoint]] = []
        for (i, width) in widths.enumerated() {
            if kind == .frame && i > 0 { c = kind.initial }
            do {
                strokes.append(reference ? try Ref.decodePoints(&r, width: width, context: &c.reference)
                                         : try StrokeCodecV2.decodePoints(&r, width: width, context: &c.production))
            } catch let e as LnoteError {
                return (.failure(e.code, offset: e.offset, path: e.path, stroke: i), e.message)
            } catch {
                return (.failure(.invalidState, offset: nil, path: nil, stroke: i), "\(error)")
            }
        }
        return (.points(strokes, end: r.offset), "")
    }

    /// Decodes with both codecs and records a difference. Returns the reference's outcome
    /// and message (which starts with the rule it applied).
    @discardableResult
    static func sameDecoding(_ bytes: [UInt8], widths: [Int32], kind: Kind, from start: Contexts? = nil,
                             range: Range<Int>? = nil, base: Int, path: String, _ log: Differences,
                             _ what: @autoclosure () -> String) -> (ChunkOutcome, message: String) {
        let actual = outcome(bytes, widths: widths, kind: kind, from: start, range: range, base: base, path: path, reference: false)
        let expected = outcome(bytes, widths: widths, kind: kind, from: start, range: range, base: base, path: path, reference: true)
        if actual.0 != expected.0 {
            log.record("decoders differ (\(kind)): production \(actual.0) (\(actual.message)), reference \(expected.0) (\(expected.message)): \(what())")
        }
        return expected
    }

    /// Encodes strokes with both codecs (a frame's each alone, a chunk's in one context each)
    /// and records the first stroke whose bytes differ; `observe` sees the reference's context
    /// before each stroke. Returns the reference's bytes, or nil after a difference.
    static func sameEncoding(_ strokes: [Stroke2], kind: Kind, _ log: Differences, _ what: @autoclosure () -> String,
                             observe: (Ref.Context, Stroke2) -> Void = { _, _ in }) -> [UInt8]? {
        var c = kind.initial
        var w = ByteWriter()
        w.append([0xAB, 0xCD])
        var expected: [UInt8] = []
        for (i, s) in strokes.enumerated() {
            if kind == .frame { c = kind.initial }
            observe(c.reference, s)
            let before = w.count
            StrokeCodecV2.encodePoints(s.points, width: s.width, context: &c.production, into: &w)
            let actual = Array(w.bytes[before...])
            let mine = Ref.encodedPoints(s.points, width: s.width, context: &c.reference)
            expected += mine
            if actual != mine {
                let at = (0..<min(actual.count, mine.count)).first { actual[$0] != mine[$0] } ?? min(actual.count, mine.count)
                log.record("encoders differ (\(kind)) at byte \(at) of stroke \(i) of \(strokes.count) (\(s.points.count) points, width \(s.width)): production \(hexString(actual)), reference \(hexString(mine)): \(what())")
                return nil
            }
        }
        if Array(w.bytes.prefix(2)) != [0xAB, 0xCD] { log.record("encodePoints(into:) changed the bytes before it: \(what())") }
        return expected
    }

    // MARK: Inputs

    /// How a stroke's x or y is made.
    enum Axis {
        /// On `G[index]` with the phase: `v_0 + ⌊(a·k_i + p)/q⌋` for a random walk `k_i`.
        case grid(Int, phase: Int64)
        /// Random steps, on no grid in particular.
        case none
        /// One value.
        case constant
    }

    static func randomAxis(_ g: inout SplitMix64) -> Axis {
        switch g.below(10) {
        case 0..<6:
            let i = Int(g.below(UInt64(Ref.gridList.count)))
            return .grid(i, phase: Int64(g.below(UInt64(Ref.gridList[i].q))))
        case 6..<9: return .none
        default: return .constant
        }
    }

    /// `n` values of one coordinate made as `axis` says, from a first value that is often
    /// negative or puts the stroke against `Int32.min` or `Int32.max`.
    static func axisValues(_ axis: Axis, count n: Int, _ g: inout SplitMix64) -> [Int64] {
        guard n > 0 else { return [] }
        var rel: [Int64] = []
        switch axis {
        case .constant:
            rel = Array(repeating: 0, count: n)
        case let .grid(index, p):
            let grid = Ref.gridList[index]
            var k: Int64 = 0, dk = Int64(g.int(in: -6...6))
            for i in 0..<n {
                if i > 0 {
                    dk += Int64(g.int(in: -2...2))
                    if g.chance(0.03) { dk = Int64(g.int(in: -3000...3000)) }
                    k += dk
                }
                rel.append(Ref.floorDiv(grid.a * k + p, grid.q))
            }
        case .none:
            var d = Int64(g.int(in: -20...20)), v: Int64 = 0
            for i in 0..<n {
                if i > 0 {
                    d += Int64(g.int(in: -3...3))
                    v += d + (g.chance(0.3) ? Int64(g.int(in: -1...1)) : 0)
                }
                rel.append(v)
            }
        }
        let lo = Int64(Int32.min) - rel.min()!, hi = Int64(Int32.max) - rel.max()!
        let v0: Int64
        switch g.below(8) {
        case 0: v0 = lo + Int64(g.below(20))
        case 1: v0 = hi - Int64(g.below(20))
        case 2: v0 = Int64(g.int(in: -30000...(-1)))
        case 3: v0 = Int64(g.int(in: Int(Int32.min)...Int(Int32.max)))
        default: v0 = Int64(g.int(in: 0...60000))
        }
        return rel.map { min(hi, max(lo, v0)) + $0 }
    }

    /// A stroke of `n` points whose x and y are made as the axes say, its pressure, radius
    /// and t as `StrokeCodecV2ReferenceTests` makes them (constant, linear, on an integer
    /// grid, random walks, extremes), its radius often derived.
    static func gridStroke(count n: Int, x: Axis, y: Axis, _ g: inout SplitMix64) -> Stroke2 {
        let xs = axisValues(x, count: n, &g), ys = axisValues(y, count: n, &g)
        let width: Int32 = [20, 0, -30, 13, .max, 7][Int(g.below(6))]
        let others = [Ref.pressure, Ref.radius, Ref.t].map { Suite2.channel($0, count: n, preferred: [10, 3, 4][$0 - 2], &g) }
        var points = (0..<n).map { i in
            StrokePoint(x: Int32(xs[i]), y: Int32(ys[i]), pressure: UInt16(others[0][i]), radius: Int32(others[1][i]),
                        t: UInt32(others[2][i]))
        }
        if g.chance(0.4) {
            for i in points.indices { points[i].radius = Int32(Ref.derivedRadius(width: width, pressure: Int64(points[i].pressure))) }
        }
        return Stroke2(points: points, width: width)
    }

    /// A chunk of strokes on digitizer grids: x and y each on a grid of `G` (often the same
    /// grid, each with its phase), on none, or constant; the grids kept from stroke to stroke
    /// but changed now and then mid-chunk; 0 to 4 points often, else up to `maxPoints` (and,
    /// when that is 60 or more, now and then up to 400); now and then a stroke of
    /// `StrokeCodecV2ReferenceTests.chunk` (pen and smooth handwriting, adversarial strokes,
    /// the random model's points) cut to as many points.
    static func gridChunk(_ seed: UInt64, maxStrokes: Int = 64, maxPoints: Int = 60) -> [Stroke2] {
        var g = SplitMix64(seed: seed)
        var xAxis = randomAxis(&g)
        var yAxis = randomAxis(&g)
        func sameGrid(as axis: Axis, _ g: inout SplitMix64) -> Axis {
            guard case let .grid(i, _) = axis else { return randomAxis(&g) }
            return .grid(i, phase: Int64(g.below(UInt64(Ref.gridList[i].q))))
        }
        if g.chance(0.5) { yAxis = sameGrid(as: xAxis, &g) }
        let others = g.chance(0.3) ? Suite2.chunk(seed, maxStrokes: 8) : []
        var out: [Stroke2] = []
        for _ in 0..<(1 + Int(g.below(UInt64(maxStrokes)))) {
            if g.chance(0.15) { xAxis = randomAxis(&g) }
            if g.chance(0.15) { yAxis = g.chance(0.5) ? sameGrid(as: xAxis, &g) : randomAxis(&g) }
            if !others.isEmpty, g.chance(0.15) {
                var s = others[Int(g.below(UInt64(others.count)))]
                let most = maxPoints >= 60 ? 400 : maxPoints
                if s.points.count > most { s.points.removeLast(s.points.count - most) }
                out.append(s)
                continue
            }
            let long = maxPoints >= 60 && g.chance(0.03)
            let n = long ? 61 + Int(g.below(340)) : g.below(10) < 3 ? Int(g.below(5)) : 5 + Int(g.below(UInt64(maxPoints - 4)))
            out.append(gridStroke(count: n, x: xAxis, y: yAxis, &g))
        }
        return out
    }

    // MARK: The reference on its own

    /// [PT2-11] The reference's `G` is the spec's list, entry for entry.
    @Test("[PT2-11] G is the list printed in the spec")
    func gridListIsTheSpecs() throws {
        let url = packageRoot.appendingPathComponent("Protocol/page-snapshot.md")
        let text = try String(contentsOf: url, encoding: .utf8)
        let start = try #require(text.range(of: "It has 85 entries:"))
        let end = try #require(text.range(of: "*Fitting.*", range: start.upperBound..<text.endIndex))
        // "> 0: 16/1, 1: 63/4, …": entries separated by commas, each "index: a/q".
        let listing = text[start.upperBound..<end.lowerBound].replacingOccurrences(of: ">", with: " ")
        let printed = listing.split(separator: ",").compactMap { entry -> (Int, Int64, Int64)? in
            let parts = entry.split(whereSeparator: { " :/.\n".contains($0) })
            guard parts.count == 3, let i = Int(parts[0]), let a = Int64(parts[1]), let q = Int64(parts[2]) else { return nil }
            return (i, a, q)
        }
        #expect(printed.count == 85)
        #expect(printed.map(\.0) == Array(0..<85))
        #expect(printed.map { Ref.DigitizerGrid(a: $0.1, q: $0.2) } == Ref.gridList)
    }

    /// [PT2-12] The comparisons with predictors meet both predictors of both channels: over the
    /// chunks the encoder comparison codes, pressure and t each choose second differences in
    /// some strokes and their alternative in others (by the reference's rule), ties included.
    @Test("[PT2-12] the chunks compared with predictors choose both predictors of pressure and t")
    func bothPredictorsAreMet() {
        var chosen: [Int: Set<Int>] = [Ref.pressure: [], Ref.t: []]
        var ties = 0
        for seed in testSeeds(0x5EED_0321, count: 36) {
            for s in Self.gridChunk(seed) where s.points.count >= 3 {
                let v = s.points.map(Ref.values)
                for c in [Ref.pressure, Ref.t] {
                    let (mode, g) = Ref.mode(v, channel: c, contextGrid: 1)
                    guard mode != 3 else { continue }
                    let q = (1..<v.count).map { (v[$0][c] - v[$0 - 1][c]) / g }
                    chosen[c]!.insert(Ref.predictor(q, channel: c))
                    func sum(_ r: [Int64]) -> Int128 { r.reduce(Int128(0)) { $0 + Int128($1.magnitude) } }
                    if sum(Ref.residuals(q, channel: c, predictor: 0)) == sum(Ref.residuals(q, channel: c, predictor: 1)) { ties += 1 }
                }
            }
        }
        #expect(chosen[Ref.pressure] == [0, 1] && chosen[Ref.t] == [0, 1] && ties > 0, "\(chosen), \(ties) ties")
    }

    /// [PT2-12] A stroke written with the other predictor of pressure or t (the residuals
    /// consistent with it, so the values read are the stroke's own and every other check
    /// passes): both codecs refuse it as `corrupt`, by [PT2-12]'s rule, at the same byte, in a
    /// chunk's first stroke and after a prior stroke.
    @Test("[PT2-12] canonical refusals: both codecs refuse the predictor the values do not choose")
    func predictorRefusals() {
        let log = Differences("predictors, refusals")
        var refused = [Ref.pressure: 0, Ref.t: 0], tried = 0
        for seed in testSeeds(0x5EED_0329, count: 12) {
            let chunk = Self.gridChunk(seed, maxStrokes: 24)
            var start = Kind.chunkWithPredictors.initial
            for (i, s) in chunk.enumerated() {
                let v = s.points.map(Ref.values)
                for c in [Ref.pressure, Ref.t] where s.points.count >= 3 {
                    let (mode, g) = Ref.mode(v, channel: c, contextGrid: start.reference.grid[c])
                    guard mode != 3 else { continue }
                    let q = (1..<v.count).map { (v[$0][c] - v[$0 - 1][c]) / g }
                    var forced: [Int?] = [nil, nil, nil, nil, nil]
                    forced[c] = 1 - Ref.predictor(q, channel: c)
                    var mine = start.reference
                    let bytes = Ref.encodedPoints(s.points, width: s.width, context: &mine, forcedPredictors: forced)
                    tried += 1
                    let result = Self.sameDecoding(bytes, widths: [s.width], kind: .chunkWithPredictors, from: start, base: 9,
                                                   path: "p", log, "seed \(seed), stroke \(i), channel \(c)")
                    if case .failure(.corrupt, _, _, _) = result.0, result.message.hasPrefix("[PT2-12]") {
                        refused[c]! += 1
                    } else {
                        log.record("seed \(seed), stroke \(i), channel \(c): the reference gives \(result.0) (\(result.message))")
                    }
                }
                // On to the next stroke from this one, as a chunk carries its context.
                var mine = start.reference
                let bytes = Ref.encodedPoints(s.points, width: s.width, context: &mine)
                var rp = ByteReader(bytes)
                guard (try? StrokeCodecV2.decodePoints(&rp, width: s.width, context: &start.production)) != nil else {
                    log.record("seed \(seed), stroke \(i): lnote refuses the reference's stream")
                    break
                }
                start.reference = mine
            }
        }
        log.finish()
        #expect(refused[Ref.pressure]! > 20 && refused[Ref.t]! > 20, "\(refused) refused of \(tried)")
    }

    /// [PT2-7] [PT2-11] The reference alone: every chunk round-trips in both contexts (points,
    /// reader at the end, the same context as the writer's), and whatever a mutated stroke
    /// decodes to re-encodes to exactly the bytes read, leaving the same context.
    @Test("[PT2-7] [PT2-11] the reference round-trips and is canonical with grids")
    func referenceRoundTripsAndIsCanonical() {
        var decodedMutations = 0
        for seed in testSeeds(0x5EED_0320, count: 30) {
            let strokes = Self.gridChunk(seed, maxStrokes: 16, maxPoints: 30)
            for kind in Kind.allCases {
                var w = kind.initial.reference, d = kind.initial.reference
                var g = SplitMix64(seed: seed)
                for (i, s) in strokes.enumerated() {
                    if kind == .frame { (w, d) = (kind.initial.reference, kind.initial.reference) }
                    let before = w
                    let bytes = Ref.encodedPoints(s.points, width: s.width, context: &w)
                    var r = ByteReader(bytes)
                    do {
                        let back = try Ref.decodePoints(&r, width: s.width, context: &d)
                        #expect(back == s.points && r.isAtEnd, "seed \(seed), \(kind), stroke \(i)")
                        #expect(w == d, "seed \(seed), \(kind), stroke \(i): contexts differ")
                    } catch {
                        Issue.record("seed \(seed), \(kind), stroke \(i): the reference rejects its own stream: \(error)")
                        break
                    }
                    for _ in 0..<6 where !bytes.isEmpty {
                        var mutated = bytes
                        let j = g.chance(0.6) ? Int(g.below(UInt64(min(bytes.count, 6)))) : Int(g.below(UInt64(bytes.count)))
                        mutated[j] ^= g.chance(0.7) ? 1 << UInt8(g.below(8)) : UInt8(truncatingIfNeeded: g.next())
                        var m = ByteReader(mutated)
                        var e = before, f = before
                        guard let p = try? Ref.decodePoints(&m, width: s.width, context: &e) else { continue }
                        decodedMutations += 1
                        let again = Ref.encodedPoints(p, width: s.width, context: &f)
                        #expect(again == Array(mutated[0..<m.position]), "seed \(seed), \(kind), stroke \(i), byte \(j): not canonical")
                        #expect(e == f, "seed \(seed), \(kind), stroke \(i), byte \(j): contexts differ after a mutation")
                    }
                }
            }
        }
        #expect(decodedMutations > 100, "seeds from 0x5EED_0320: \(decodedMutations) mutations decoded")
    }

    // MARK: Production against the reference

    /// [PT2-11] [LOG-32] [SNAP-42] Strokes alone (`standaloneWithGrids`) and chunks of up to 64
    /// strokes in one carried context (`chunkWithGrids`): the same bytes as the reference, which
    /// both codecs decode back to the points, the reader stopping at the chunk's end. Checked
    /// to be reached: every entry of `G` chosen, the `same` bit 1 and 0, `on` 0, y taking x's
    /// grid as its preferred one (and keeping it), every phase of a grid of 4.
    @Test("[PT2-11] encoder matches the reference, alone and in chunks, and both decode it")
    func encoderMatchesReference() {
        let log = Differences("grids, encoder")
        var chosen = Set<Int>(), paths: [String: Int] = [:], phases = Set<Int64>()
        var strokes = 0
        // Random chunks, then one stroke on each grid of G in turn (x and y on it, each with a
        // random phase), so that every grid is met whatever the seeds.
        let seeds = testSeeds(0x5EED_0321, count: 36)
        for (round, seed) in (seeds + [seeds[0] ^ 0xE7E4]).enumerated() {
            var chunk: [Stroke2]
            if round < seeds.count {
                chunk = Self.gridChunk(seed)
            } else {
                var g = SplitMix64(seed: seed)
                chunk = Ref.gridList.indices.map { i in
                    let q = UInt64(Ref.gridList[i].q)
                    return Self.gridStroke(count: 12 + Int(g.below(30)), x: .grid(i, phase: Int64(g.below(q))),
                                           y: .grid(i, phase: Int64(g.below(q))), &g)
                }
            }
            for kind in Kind.allCases {
                let bytes = Self.sameEncoding(chunk, kind: kind, log, "seed \(seed)") { context, s in
                    guard let plans = Ref.gridPlans(s.points, context: context) else { return }
                    for (c, plan) in plans.enumerated() {
                        if let i = plan.chosen {
                            chosen.insert(i)
                            if Ref.gridList[i].q == 4 { phases.insert(plan.phase) }
                        } else {
                            paths["on 0", default: 0] += 1
                        }
                        if plan.preferred != nil { paths[plan.chosen == plan.preferred ? "same 1" : "same 0", default: 0] += 1 }
                        if c == Ref.y, context.lastGrid[Ref.y] == nil, plan.preferred != nil, plan.chosen == plan.preferred {
                            paths["y prefers x's grid", default: 0] += 1
                        }
                    }
                }
                strokes += chunk.count
                guard let bytes else { continue }
                let base = Int(seed % 3000)
                let back = Self.sameDecoding(bytes + [0x5A, 0x01], widths: chunk.map(\.width), kind: kind, range: 0..<(bytes.count + 1),
                                             base: base, path: "g\(seed % 5)", log, "seed \(seed)")
                if back.0 != .points(chunk.map(\.points), end: base + bytes.count) {
                    log.record("seed \(seed) (\(kind)): the reference's chunk does not decode back: \(back.0) \(back.message)")
                }
            }
        }
        log.finish()
        let from = "seeds from 0x5EED_0321"
        #expect(strokes > 2500, "\(from)")
        #expect(chosen == Set(0..<85), "\(from): grids never chosen: \(Set(0..<85).subtracting(chosen).sorted())")
        #expect(phases == [0, 1, 2, 3], "\(from): phases of grids of 4: \(phases.sorted())")
        for path in ["same 1", "same 0", "on 0", "y prefers x's grid"] {
            #expect(paths[path, default: 0] >= 50, "\(from): path \(path) taken \(paths[path, default: 0]) times: \(paths)")
        }
    }

    /// [PT2-8] [PT2-11] A few hundred strokes, each in the context its chunk gives it (or
    /// alone): every bit of the first bytes of the bits flipped (`derived`, the grid bits,
    /// the modes), every byte replaced several ways, every cut. Both decoders agree (points
    /// and end, or error code, offset and path); the reference meets each of [PT2-11]'s read
    /// checks, and whatever it accepts after a bit flip re-encodes to the bytes read. Then
    /// noise behind a plausible header.
    @Test("[PT2-8] [PT2-11] decoder matches the reference on every bit of the grid bits flipped, every byte replaced, every cut")
    func decoderMatchesReferenceOnMutations() {
        let log = Differences("grids, mutations")
        var rules: [String: Int] = [:]
        var cases = 0, strokesMutated = 0
        for seed in testSeeds(0x5EED_0322, count: 44) {
            var g = SplitMix64(seed: seed)
            let chunk = Self.gridChunk(seed, maxStrokes: 6, maxPoints: 20)
            for kind in Kind.allCases {
                var before = kind.initial
                for (i, s) in chunk.enumerated() {
                    if kind == .frame { before = kind.initial }
                    var mine = before.reference
                    let bytes = Ref.encodedPoints(s.points, width: s.width, context: &mine)
                    let widths = [s.width]
                    func check(_ b: [UInt8], _ path: String, _ what: @autoclosure () -> String) {
                        cases += 1
                        let result = Self.sameDecoding(b, widths: widths, kind: kind, from: before, base: 11, path: path, log,
                                                       "seed \(seed), stroke \(i), \(what())")
                        switch result.0 {
                        case .failure:
                            if let end = result.message.firstIndex(of: ":") { rules[String(result.message[..<end]), default: 0] += 1 }
                        case let .points(p, end) where path == "bit":
                            // The reference's canonical form: what it accepts it writes back.
                            var again = before.reference
                            let re = Ref.encodedPoints(p[0], width: s.width, context: &again)
                            if re != Array(b[0..<(end - 11)]) {
                                log.record("the reference accepts a stream it would not write: seed \(seed), stroke \(i), \(what())")
                            }
                        case .points:
                            break
                        }
                    }
                    var r = ByteReader(bytes)
                    let bitsAt = ((try? r.varint()) ?? 0) > 0 && (try? r.varint()) != nil ? r.position : bytes.count
                    strokesMutated += 1
                    for bit in 0..<(8 * min(4, bytes.count - bitsAt)) {
                        var b = bytes
                        b[bitsAt + bit / 8] ^= 1 << UInt8(bit % 8)
                        check(b, "bit", "bit \(bit)")
                    }
                    for j in bytes.indices {
                        for v in [bytes[j] ^ 0x01, UInt8(truncatingIfNeeded: g.next())] where v != bytes[j] {
                            var b = bytes
                            b[j] = v
                            check(b, "m", "byte \(j) = \(v)")
                        }
                        check(Array(bytes[..<j]), "cut", "cut at \(j)")
                    }
                    // The next stroke's context: each codec's, from reading this stroke.
                    var rp = ByteReader(bytes), rr = ByteReader(bytes)
                    do {
                        _ = try StrokeCodecV2.decodePoints(&rp, width: s.width, context: &before.production)
                        _ = try Ref.decodePoints(&rr, width: s.width, context: &before.reference)
                    } catch {
                        log.record("seed \(seed), stroke \(i) (\(kind)): a valid stroke is refused: \(error)")
                        break
                    }
                }
            }
        }
        // Noise behind a plausible header, from the initial contexts and from the contexts a
        // stroke on a grid leaves (so that x and y have preferred grids): random bits biased
        // towards zeros (`same` 0, `on` 0, long unary runs, escapes).
        for seed in testSeeds(0x5EED_0324, count: 1200) {
            var g = SplitMix64(seed: seed)
            let kind: Kind = g.chance(0.5) ? .frame : (g.chance(0.5) ? .chunk : .chunkWithPredictors)
            var start = kind.initial
            if g.chance(0.6) {
                let i = Int(g.below(85))
                let prior = Self.gridStroke(count: 10, x: .grid(i, phase: 0), y: g.chance(0.5) ? .grid(i, phase: 0) : .none, &g)
                var mine = start.reference
                let bytes = Ref.encodedPoints(prior.points, width: prior.width, context: &mine)
                var rp = ByteReader(bytes), rr = ByteReader(bytes)
                _ = try? StrokeCodecV2.decodePoints(&rp, width: prior.width, context: &start.production)
                _ = try? Ref.decodePoints(&rr, width: prior.width, context: &start.reference)
            }
            let n = [3, 4, 5, 9, 30][Int(g.below(5))]
            let bits = (0..<(1 + Int(g.below(30)))).map { _ in
                UInt8(truncatingIfNeeded: g.chance(0.5) ? g.next() & g.next() & g.next() : g.next())
            }
            var w = ByteWriter()
            w.varint(UInt64(n)); w.varint(UInt64(bits.count)); w.append(bits)
            let width: Int32 = [20, 0, -7][Int(g.below(3))]
            cases += 1
            let result = Self.sameDecoding(w.bytes, widths: [width], kind: kind, from: start, base: 3, path: "n", log,
                                           "seed \(seed), noise (\(kind))")
            if case .failure = result.0, let end = result.message.firstIndex(of: ":") { rules[String(result.message[..<end]), default: 0] += 1 }
        }
        log.finish()
        let from = "seeds from 0x5EED_0322"
        #expect(strokesMutated >= 300, "\(from): \(strokesMutated) strokes mutated")
        #expect(cases > 25_000, "\(from): \(cases) cases")
        for rule in ["[PT2-11] index", "[PT2-11] preferred in full", "[PT2-11] phase", "[PT2-11] choice", "[PT2-11] rebuilt value",
                     "[PT2-8] 1 mode 1 on grid 1", "[PT2-8] 2 unary", "[PT2-8] 4 value", "[PT2-8] 5 gcd", "[PT2-8] 7 past L"] {
            #expect(rules[rule, default: 0] > 0, "\(from): rule \(rule) never met: \(rules)")
        }
    }

    /// [PT2-11] Streams a reader must refuse, built with the reference's writer: for each
    /// coordinate of strokes coded alone and of strokes coded after another (so that both
    /// have a preferred grid), a grid index one off the choice (where the values fit it too),
    /// the preferred grid written in full, a phase other than the smallest (where the values
    /// fit it), a phase of `q` or more, an index of 85 or more, `on` 0 where a grid fits, a
    /// rebuilt value past `Int32.max`; both codecs refuse them as `corrupt` at the byte where
    /// the channel's grid bits begin. A grid written where none fits is compared too, but
    /// cannot be refused as such: the values a reader rebuilds always fit the grid written.
    @Test("[PT2-11] canonical refusals: both codecs refuse every non-canonical grid choice at its grid bits")
    func canonicalRefusals() {
        let log = Differences("grids, refusals")
        var refused: [String: Int] = [:]
        var compared: [String: Int] = [:]
        let base = 5
        let seed: UInt64 = testSeeds(0x5EED_0323, count: 1)[0]
        var g = SplitMix64(seed: seed)

        /// Writes `s` after `prior` (if any) with `forced` on channel `c` and compares; when
        /// `expect` is a rule, both must refuse with it at the channel's grid bits.
        func attempt(_ kind: Kind, prior: Stroke2?, _ s: Stroke2, channel c: Int, _ forced: Ref.ForcedGrid,
                     expect rule: String?, _ label: String, _ what: String) {
            var start = kind.initial
            if let prior {
                var mine = start.reference
                let bytes = Ref.encodedPoints(prior.points, width: prior.width, context: &mine)
                var rp = ByteReader(bytes), rr = ByteReader(bytes)
                guard (try? StrokeCodecV2.decodePoints(&rp, width: prior.width, context: &start.production)) != nil,
                      (try? Ref.decodePoints(&rr, width: prior.width, context: &start.reference)) != nil else {
                    log.record("seed \(seed): a prior stroke is refused: \(what)")
                    return
                }
            }
            var mine = start.reference
            var forcedGrids: [Ref.ForcedGrid?] = [nil, nil]
            forcedGrids[c] = forced
            let (bytes, gridBitsAt) = Ref.encodedPointsTraced(s.points, width: s.width, context: &mine, forcedGrids: forcedGrids)
            let result = Self.sameDecoding(bytes, widths: [s.width], kind: kind, from: start, base: base, path: "r", log,
                                           "seed \(seed), \(label), \(what)")
            compared[label, default: 0] += 1
            guard let rule else {
                if case .failure = result.0 { refused[label, default: 0] += 1 }
                return
            }
            let at = base + (gridBitsAt[c] ?? -1000)
            if result.0 == .failure(.corrupt, offset: at, path: "r", stroke: 0), result.message.hasPrefix(rule) {
                refused[label, default: 0] += 1
            } else {
                log.record("\(label): the reference gives \(result.0) (\(result.message)), not \(rule) at \(at): seed \(seed), \(what)")
            }
        }

        for trial in 0..<450 {
            // Short strokes fit several grids and phases; longer ones rarely do.
            let n = g.chance(0.5) ? 3 + Int(g.below(3)) : 6 + Int(g.below(30))
            let x = Self.randomAxis(&g)
            let y: Axis = g.chance(0.5) ? x : Self.randomAxis(&g)
            let s = Self.gridStroke(count: n, x: x, y: y, &g)
            let prior: Stroke2? = g.chance(0.5) ? nil : (g.chance(0.5) ? Self.gridStroke(count: 3 + Int(g.below(20)), x: x, y: y, &g)
                                                                       : Self.gridStroke(count: 8, x: Self.randomAxis(&g), y: Self.randomAxis(&g), &g))
            let kind: Kind = g.chance(0.5) ? .frame : (g.chance(0.5) ? .chunk : .chunkWithPredictors)
            // The context the stroke is coded in, for its plans.
            var context = kind.initial.reference
            if let prior { _ = Ref.encodedPoints(prior.points, width: prior.width, context: &context) }
            guard let plans = Ref.gridPlans(s.points, context: context) else { continue }
            let v = s.points.map(Ref.values)
            for c in [Ref.x, Ref.y] {
                let what = "trial \(trial) (\(kind), \(prior == nil ? "alone" : "after a stroke")), channel \(c)"
                let column = v.map { $0[c] }
                let plan = plans[c]
                if let i = plan.chosen {
                    let grid = Ref.gridList[i]
                    for j in [i - 1, i + 1] where Ref.gridList.indices.contains(j) {
                        let phase = Ref.smallestPhase(column, Ref.gridList[j])
                        attempt(kind, prior: prior, s, channel: c, Ref.ForcedGrid(index: j, phase: phase ?? 0),
                                expect: phase == nil ? nil : "[PT2-11] choice",
                                phase == nil ? "index one off, not fitting" : "index one off", what + ", grid \(j) for \(i)")
                    }
                    if let p = plan.preferred, p == i {
                        attempt(kind, prior: prior, s, channel: c, Ref.ForcedGrid(index: i, phase: plan.phase, inFull: true),
                                expect: "[PT2-11] preferred in full", "preferred in full", what)
                    }
                    for phase in (plan.phase + 1)..<max(plan.phase + 1, grid.q) {
                        let fitting = Ref.fits(column, grid, phase: phase)
                        attempt(kind, prior: prior, s, channel: c, Ref.ForcedGrid(index: i, phase: phase),
                                expect: fitting ? "[PT2-11] choice" : nil,
                                fitting ? "phase not the smallest" : "phase not fitting", what + ", phase \(phase)")
                    }
                    if grid.q == 3 {
                        attempt(kind, prior: prior, s, channel: c, Ref.ForcedGrid(index: i, phase: 3),
                                expect: "[PT2-11] phase", "phase q", what)
                    }
                    attempt(kind, prior: prior, s, channel: c, Ref.ForcedGrid(index: nil),
                            expect: "[PT2-11] choice", "on 0 where a grid fits", what)
                } else {
                    let j = Int(g.below(85))
                    attempt(kind, prior: prior, s, channel: c, Ref.ForcedGrid(index: j, phase: Int64(g.below(UInt64(Ref.gridList[j].q)))),
                            expect: nil, "a grid where none fits", what + ", grid \(j)")
                }
                attempt(kind, prior: prior, s, channel: c, Ref.ForcedGrid(index: 85 + Int(g.below(43))),
                        expect: "[PT2-11] index", "index 85 or more", what)
            }
        }

        // Rebuilt values past Int32.max: the coded k_i = ⌈(q·(v_i − v_0) − p)/a⌉ rebuild to
        // v_0 + ⌊(a·k_i + p)/q⌋ ≥ v_i, past the top when the values do not fit the grid.
        for trial in 0..<60 {
            let n = 3 + Int(g.below(10))
            var s = Self.gridStroke(count: n, x: .none, y: .none, &g)
            let c = g.chance(0.5) ? Ref.x : Ref.y
            for i in s.points.indices {
                let v = i == n - 1 ? Int32.max : Int32.max - 5 - Int32(g.below(20))
                if c == Ref.x { s.points[i].x = v } else { s.points[i].y = v }
            }
            let j = Int(g.below(12))  // a/q of 14.25 or more
            let column = s.points.map { Ref.values($0)[c] }, grid = Ref.gridList[j]
            let past = Ref.gridUnits(column, grid, phase: 0).contains {
                Ref.rebuilt($0, first: column[0], grid, phase: 0) > Int64(Int32.max)
            }
            guard past else { continue }
            attempt(.frame, prior: nil, s, channel: c, Ref.ForcedGrid(index: j, phase: 0),
                    expect: "[PT2-11] rebuilt value", "rebuilt value past Int32.max", "trial \(trial), channel \(c), grid \(j)")
        }
        log.finish()
        for label in ["index one off", "preferred in full", "phase not the smallest", "phase q", "index 85 or more",
                      "on 0 where a grid fits", "rebuilt value past Int32.max"] {
            #expect(refused[label, default: 0] >= 20, "seed \(seed): \(label): \(refused[label, default: 0]) refused of \(compared[label, default: 0])")
        }
        for label in ["index one off, not fitting", "phase not fitting", "a grid where none fits"] {
            #expect(compared[label, default: 0] >= 20, "seed \(seed): \(label): compared \(compared[label, default: 0]) times")
        }
    }

    /// [PT2-11] The order of the checks made after the second differences: "for x then y: a
    /// rebuilt value out of its channel's range, then a grid or phase other than the choice".
    /// Read as x's two checks, then y's: x constant but written on grid 2/1 (the choice is
    /// 16/1: refused at x's grid bits), y written on 16/1 with values that rebuild past
    /// `Int32.max` (refused at y's grid bits, a byte later). Both codecs give x's fault.
    @Test("[PT2-11] x's choice is checked before y's rebuilt values")
    func orderOfTheLateChecks() {
        let log = Differences("grids, order of checks")
        let top = Int32.max
        let points = [StrokePoint(x: 100, y: top - 20, pressure: 500, radius: 0, t: 0),
                      StrokePoint(x: 100, y: top - 9, pressure: 500, radius: 0, t: 4),
                      StrokePoint(x: 100, y: top, pressure: 500, radius: 0, t: 8)]
        var mine = Kind.frame.initial.reference
        let (bytes, at) = Ref.encodedPointsTraced(points, width: 0, context: &mine,
                                                  forcedGrids: [Ref.ForcedGrid(index: 84), Ref.ForcedGrid(index: 0, inFull: true)])
        // x: `on` 1 and 7 bits of index from bit 1; y from bit 9 (x's grid, 84, preferred by y,
        // written in full would be refused at once: here y's grid is 0, not the preferred).
        #expect(at == [2, 3], "grid bits at \(at)")
        let result = Self.sameDecoding(bytes, widths: [0], kind: .frame, base: 0, path: "o", log, "x off its choice, y past the top")
        #expect(result.0 == .failure(.corrupt, offset: 2, path: "o", stroke: 0) && result.message.hasPrefix("[PT2-11] choice"),
                "\(result.0) \(result.message)")
        // y alone past the top: refused at y's grid bits.
        var again = Kind.frame.initial.reference
        let (yOnly, atY) = Ref.encodedPointsTraced(points, width: 0, context: &again, forcedGrids: [nil, Ref.ForcedGrid(index: 1)])
        let alone = Self.sameDecoding(yOnly, widths: [0], kind: .frame, base: 0, path: "o", log, "y past the top")
        #expect(alone.0 == .failure(.corrupt, offset: atY[Ref.y]!, path: "o", stroke: 0) && alone.message.hasPrefix("[PT2-11] rebuilt value"),
                "\(alone.0) \(alone.message)")
        log.finish()
    }
}
