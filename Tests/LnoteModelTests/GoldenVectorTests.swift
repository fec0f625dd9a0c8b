import Foundation
import Testing
import LnoteModel

/// The hex block that follows `<!-- vector: NAME -->` in `Protocol/page-snapshot.md`.
func specVector(_ name: String) throws -> String {
    let url = packageRoot.appendingPathComponent("Protocol/page-snapshot.md")
    let text = try String(contentsOf: url, encoding: .utf8)
    guard let marker = text.range(of: "<!-- vector: \(name) -->"),
          let open = text.range(of: "```", range: marker.upperBound..<text.endIndex),
          let lineEnd = text.range(of: "\n", range: open.upperBound..<text.endIndex),
          let close = text.range(of: "```", range: lineEnd.upperBound..<text.endIndex) else {
        throw LnoteError(.notFound, "vector \(name) not in the spec", path: url.path)
    }
    return String(text[lineEnd.upperBound..<close.lowerBound])
}

/// The tiny page of the spec's test vector, built by hand from the spec's description:
/// stroke T just below image I (its key one step deeper, under stroke S's), S erased with a
/// concurrent partial erase. `LnoteReplicationTests.TinyPageVectorTests` checks that the
/// spec's six operations give exactly this state.
enum TinyPage {
    static let a = ReplicaID(0xA1), b = ReplicaID(0xB2)
    static let t0: Int64 = 1_700_000_000_000
    /// The three points of the point-stream example (page-snapshot.md 3.3), stroke S's.
    static let points = [StrokePoint(x: 1000, y: 2000, pressure: 500, radius: 10, t: 0),
                         StrokePoint(x: 1012, y: 2003, pressure: 520, radius: 10, t: 4),
                         StrokePoint(x: 1025, y: 2005, pressure: 540, radius: 11, t: 8)]
    /// Stroke T's two points.
    static let pointsT = [StrokePoint(x: 1100, y: 2100, pressure: 500, radius: 10, t: 0),
                          StrokePoint(x: 1150, y: 2120, pressure: 600, radius: 12, t: 8)]
    static var state: PageState {
        let s1 = OpID(replica: a, counter: 1)
        let move = OpRef(id: OpID(replica: a, counter: 2), lamport: 3)
        let stroke = ElementRecord(
            id: OpID(replica: b, counter: 2), lamport: 3, wallTime: t0 + 3000,
            content: .stroke(Stroke(style: InkStyle(tool: .pen, color: .black, width: 20), points: pointsT)),
            z: LWWRegister(ZKey(layer: 1, path: [ZKey.Step(fraction: [], tag: s1)], fraction: [0x80])))
        let image = ElementRecord(
            id: OpID(replica: b, counter: 1), lamport: 1, wallTime: t0 + 1000,
            content: .image(ImageElement(asset: AssetID.of(Array("lnote".utf8)),
                                         frame: QRect(x: 500, y: 600, width: 2000, height: 1500))),
            transform: LWWRegister(.translation(30, -40), frontier: [move]),
            z: LWWRegister(ZKey(layer: 1)), frontier: [move])
        let partial = OpRef(id: OpID(replica: b, counter: 3), lamport: 4)
        // [SNAP-40] The erased stroke S, kept whole with the concurrent partial erase applied.
        let kept = ElementRecord(
            id: s1, lamport: 1, wallTime: t0,
            content: .stroke(Stroke(style: InkStyle(tool: .pen, color: .black, width: 20), points: points)),
            z: LWWRegister(ZKey(layer: 1)), erased: [PointRange(0, 1)],
            rangeErasures: [RangeErasure(ref: partial, ranges: [PointRange(0, 1)])])
        let erased = Tombstone(id: s1, erasures: [Erasure(ref: OpRef(id: OpID(replica: a, counter: 3), lamport: 4),
                                                          clock: vc((a, 2), (b, 1)))],
                               frontier: [partial], record: kept)
        return PageState(
            page: PageID(UUID(uuidString: "00112233-4455-6677-8899-AABBCCDDEEFF")!),
            clock: vc((a, 3), (b, 3)), maxLamport: 4, modified: t0 + 5000,
            elements: [stroke, image], tombstones: [erased],
            contexts: [ReplicaContext(replica: a, clock: vc((a, 3), (b, 1)),
                                      lamports: [LamportRun(from: 1, offset: 0), LamportRun(from: 2, offset: 1)]),
                       ReplicaContext(replica: b, clock: vc((a, 1), (b, 3)),
                                      lamports: [LamportRun(from: 1, offset: 0), LamportRun(from: 2, offset: 1)])])
    }
    static let coveredLogOffset: UInt64 = 380
    static let logIncarnation: UInt64 = 0x0123_4567_89AB_CDEF
}

@Suite("Golden vectors")
struct GoldenVectorTests {
    static var recording: Bool { ProcessInfo.processInfo.environment["LNOTE_RECORD_GOLDEN"] == "1" }

    /// Compares `actual` with the fixture file `name`, or rewrites it when recording.
    func checkFixture(_ name: String, _ actual: String) throws {
        let url = fixturesDirectory.appendingPathComponent(name)
        if Self.recording {
            try FileManager.default.createDirectory(at: fixturesDirectory, withIntermediateDirectories: true)
            try Data(actual.utf8).write(to: url)
            return
        }
        let expected = try String(contentsOf: url, encoding: .utf8)
        #expect(expected == actual, "fixture \(name) differs; actual:\n\(actual)")
    }

    /// [SNAP-30] The spec's vector, the fixture, and the encoder agree byte for byte.
    @Test func tinyPageSnapshot() throws {
        let state = TinyPage.state
        try PageSnapshot.validate(state)
        // Version 1, which stays readable ([SNAP-7]); version 2 of the same page is
        // `PageSnapshotV2Tests.tinyPageVector`.
        let bytes = PageSnapshot.encode(state, coveredLogOffset: TinyPage.coveredLogOffset,
                                        logIncarnation: TinyPage.logIncarnation, version: 1)
        let dump = hexDump(bytes) + "\n"
        try checkFixture("tiny-page.content.hex", dump)
        let fromSpec = try #require(parseHexDump(try specVector("tiny-page")))
        #expect(fromSpec == bytes, "the spec's vector differs; actual:\n\(dump)")
        let fromFixture = try #require(parseHexDump(try String(contentsOf: fixturesDirectory
            .appendingPathComponent("tiny-page.content.hex"), encoding: .utf8)))
        let decoded = try PageSnapshot.decode(fromFixture, path: "tiny-page.content")
        #expect(decoded.state == state)
        #expect(decoded.coveredLogOffset == TinyPage.coveredLogOffset)
        #expect(decoded.logIncarnation == TinyPage.logIncarnation)
    }

    @Test func tinyPageJSON() throws {
        let json = TinyPage.state.canonicalJSON()
        try checkFixture("tiny-page.json", json)
        #expect(try specVector("tiny-page-json") == json, "the spec's JSON differs; actual:\n\(json)")
    }

    @Test func pointStreamVector() throws {
        let bytes = StrokeCodec.encodedPoints(TinyPage.points)
        let fromSpec = try #require(parseHexDump(try specVector("points-3")))
        #expect(fromSpec == bytes, "actual: \(hexDump(bytes))")
    }
}
