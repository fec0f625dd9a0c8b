import Testing
@testable import LnoteModel

/// [PKG-110]–[PKG-112], [LOG-33]: a page log's anchor, and its writer's strokes in log form.
@Suite("Log anchors and log-form frames")
struct LogAnchorTests {
    static func hex(_ s: String) -> [UInt8] {
        let digits = Array(s.filter { !$0.isWhitespace })
        return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(digits[$0...$0 + 1]), radix: 16)! }
    }

    /// operation-log.md §3.3's first vector: an `addStroke3` by replica b0, counter 2, wall
    /// time 1,700,000,000,900.
    static let addStroke3 = hex("""
        23000000 8cad518b 0a b000000000000000 02 88aeabfef962 00 08 28 03 0e 0a8d06e00f7d413f402824310405
        """)

    /// The reference, written from operation-log.md §3.4 alone: the payload is the counter,
    /// the wall time minus the base (svarint), then the `addStroke3` payload's bytes from the
    /// context on; the CRC runs over the anchor's CRC field, the length field, the type and
    /// the payload.
    static func referenceLogForm(_ standard: [UInt8], anchor: LogAnchor) -> [UInt8]? {
        var r = ByteReader(standard, range: 9..<standard.count)
        guard standard[8] == 0x0A, let replica = try? r.u64(), replica == anchor.writer,
              let counter = try? r.varint(), let wall = try? r.svarint() else { return nil }
        let (delta, overflow) = wall.subtractingReportingOverflow(anchor.baseWallTime)
        guard !overflow else { return nil }
        var payload = ByteWriter()
        payload.varint(counter)
        payload.svarint(delta)
        payload.append(standard[r.offset...])
        var length = ByteWriter()
        length.u32(UInt32(1 + payload.count))
        let crc = CRC32C.checksum(Array(anchor.frame[4..<8]) + length.bytes + [0x8A] + payload.bytes)
        var out = ByteWriter()
        out.append(length.bytes)
        out.u32(crc)
        out.u8(0x8A)
        out.append(payload.bytes)
        return out.bytes
    }

    @Test("[PKG-110] [LOG-33] the vectors of document-package.md 5.4 and operation-log.md 3.4")
    func vectors() throws {
        let anchor = LogAnchor(writer: 0xB0, baseWallTime: 1_700_000_000_000)
        #expect(anchor.frame == Self.hex("0f000000 5d119988 30 b000000000000000 80a0abfef962"))
        let logForm = try #require(anchor.logForm(Self.addStroke3))
        #expect(logForm == Self.hex("17000000 fca1d548 8a 02 880e 00 08 28 03 0e 0a8d06e00f7d413f402824310405"))
        #expect(logForm.count == 31 && Self.addStroke3.count == 43)
        // Read back: checked from the anchor's CRC, expanded to the very frame it stands for.
        guard case .frame(let f, let range) = Frame.scan(logForm, at: 0, chain: anchor.chainSeed) else {
            Issue.record("the log-form vector does not scan")
            return
        }
        #expect(range == 0..<31)
        let (expanded, shift) = try #require(anchor.expand(f.payload))
        #expect(expanded.encoded == Self.addStroke3)
        // The expanded header is the replica (8) plus a 6-byte wall time, against 2 bytes.
        #expect(shift == 8 + 6 - 2)
        #expect(LogAnchor.parse(try #require(Frame.decodeAll(anchor.frame).first)) == anchor)
    }

    @Test("[LOG-33] without its anchor, or against another, a log-form frame is not a frame")
    func onlyItsAnchorReadsIt() throws {
        let anchor = LogAnchor(writer: 0xB0, baseWallTime: 1_700_000_000_000)
        let logForm = try #require(anchor.logForm(Self.addStroke3))
        guard case .corrupt = Frame.scan(logForm, at: 0) else {
            Issue.record("a log-form frame read with no anchor was accepted")
            return
        }
        // Another writer, or the same writer with another base: the CRC fails, so the frame is
        // never given to the wrong replica or the wrong time.
        for other in [LogAnchor(writer: 0xB1, baseWallTime: 1_700_000_000_000), LogAnchor(writer: 0xB0, baseWallTime: 1_700_000_000_001)] {
            guard case .corrupt = Frame.scan(logForm, at: 0, chain: other.chainSeed) else {
                Issue.record("a log-form frame read against anchor \(other.writer)/\(other.baseWallTime) was accepted")
                continue
            }
        }
        // The wire has no anchor: a body holding one is refused, also with a CRC computed as
        // for any other frame (what a peer that ignores the rule would send).
        #expect(throws: LnoteError(.corrupt)) { try Frame.decodeAll(logForm) }
        let plainCRC = Frame(type: LogAnchor.logFormAddStroke3, payload: Array(logForm[9...])).encoded
        #expect(throws: LnoteError(.corrupt)) { try Frame.decodeAll(plainCRC) }
        guard case .corrupt = Frame.scan(plainCRC, at: 0, chain: anchor.chainSeed) else {
            Issue.record("a log-form frame with a plain CRC was accepted in a log")
            return
        }
        // Other writers' frames, and other types, stay as they are.
        #expect(LogAnchor(writer: 0xB1, baseWallTime: 0).logForm(Self.addStroke3) == nil)
        let move = Frame(type: 0x04, payload: Array(Self.addStroke3[9...])).encoded
        #expect(anchor.logForm(move) == nil)
    }

    @Test("[LOG-33] random strokes of random replicas and times: the log form matches the reference and expands to the frame")
    func roundTrips() throws {
        for seed in testSeeds(0x106F_0A, count: 30) {
            var g = SplitMix64(seed: seed)
            let writer = UInt64.random(in: 1...3, using: &g)
            let base = [Int64.min, -1, 0, 1_700_000_000_000, Int64.max][Int.random(in: 0..<5, using: &g)]
                &+ Int64.random(in: -5...5, using: &g)
            let anchor = LogAnchor(writer: writer, baseWallTime: base)
            var formed = 0
            for _ in 0..<40 {
                var payload = ByteWriter()
                payload.u64(UInt64.random(in: 1...3, using: &g))
                payload.varint([1, 127, 128, 1 << 40, 1 << 62][Int.random(in: 0..<5, using: &g)])
                let wall = Bool.random(using: &g) ? base &+ Int64.random(in: -1_000_000...1_000_000, using: &g)
                    : [Int64.min, Int64.max, 0, -1][Int.random(in: 0..<4, using: &g)]
                payload.svarint(wall)
                payload.append((0..<Int.random(in: 0...60, using: &g)).map { _ in UInt8.random(in: 0...255, using: &g) })
                let standard = Frame(type: 0x0A, payload: payload.bytes).encoded
                let got = anchor.logForm(standard)
                #expect(got == Self.referenceLogForm(standard, anchor: anchor), "seed \(seed)")
                guard let got else { continue }
                formed += 1
                guard case .frame(let f, _) = Frame.scan(got, at: 0, chain: anchor.chainSeed),
                      let (expanded, _) = anchor.expand(f.payload) else {
                    Issue.record("seed \(seed): a log-form frame does not read back")
                    continue
                }
                #expect(expanded.encoded == standard, "seed \(seed)")
            }
            #expect(formed > 0, "seed \(seed): no frame took the log form")
        }
    }

    @Test("[LOG-33] a log-form payload whose counter or wall time is not in its shortest form, a counter of 0 or above 2^62, or a wall time that overflows does not expand")
    func expansionRefuses() {
        let anchor = LogAnchor(writer: 0xB0, baseWallTime: Int64.max - 10)
        let rest: [UInt8] = [0, 8, 40, 3, 14]
        func payload(_ counter: [UInt8], _ delta: [UInt8]) -> [UInt8] { counter + delta + rest }
        #expect(anchor.expand(payload([0x02], [0x02])) != nil)  // delta 1
        #expect(anchor.expand(payload([0x82, 0x00], [0x02])) == nil)  // counter not shortest
        #expect(anchor.expand(payload([0x02], [0x82, 0x00])) == nil)  // delta not shortest
        #expect(anchor.expand(payload([0x00], [0x02])) == nil)  // counter 0
        var big = ByteWriter()
        big.varint((1 << 62) + 1)
        #expect(anchor.expand(payload(big.bytes, [0x02])) == nil)  // counter above 2^62
        var over = ByteWriter()
        over.svarint(11)
        #expect(anchor.expand(payload([0x02], over.bytes)) == nil)  // base + 11 overflows
        #expect(anchor.expand([0x02]) == nil)  // no wall time
        // An expansion longer than a frame may be: it could not be sent.
        let base0 = LogAnchor(writer: 0xB0, baseWallTime: 0)
        let long = [0x02, 0x00] + [UInt8](repeating: 7, count: Frame.maxLength - 3)
        #expect(base0.expand(long) == nil)
        #expect(base0.expand(Array(long.dropLast(8))) != nil)
        // An anchor's own payload: a zero writer, a wall time not shortest, or trailing bytes.
        #expect(LogAnchor.parse(Frame(type: 0x30, payload: [0, 0, 0, 0, 0, 0, 0, 0, 0])) == nil)
        #expect(LogAnchor.parse(Frame(type: 0x30, payload: [1, 0, 0, 0, 0, 0, 0, 0, 0x80, 0])) == nil)
        #expect(LogAnchor.parse(Frame(type: 0x30, payload: [1, 0, 0, 0, 0, 0, 0, 0, 0, 0])) == nil)
        #expect(LogAnchor.parse(Frame(type: 0x30, payload: [1, 0, 0, 0, 0, 0, 0, 0, 0])) != nil)
    }

    @Test("[PKG-37] [LOG-33] damaged bytes holding log-form frames: the search finds what trying every position with the anchor finds")
    func searchWithAnAnchor() {
        let anchor = LogAnchor(writer: 0xB0, baseWallTime: 1_700_000_000_000)
        var found = 0, logForm = 0
        for seed in testSeeds(0x5EA_4C40, count: 30) {
            var g = SplitMix64(seed: seed)
            var bytes: [UInt8] = []
            for _ in 0..<Int.random(in: 4...20, using: &g) {
                switch Int.random(in: 0..<4, using: &g) {
                case 0:
                    var p = ByteWriter()
                    p.u64(0xB0)
                    p.varint(UInt64.random(in: 1...1000, using: &g))
                    p.svarint(1_700_000_000_000 + Int64.random(in: 0...100_000, using: &g))
                    let n = [3, 30, FrameSearch.directLimit + 40, 3000][Int.random(in: 0..<4, using: &g)]
                    p.append((0..<n).map { _ in UInt8.random(in: 0...255, using: &g) })
                    bytes += anchor.logForm(Frame(type: 0x0A, payload: p.bytes).encoded)!
                case 1: bytes += FrameSearchTests.frame(Int.random(in: 1...700, using: &g), &g)
                case 2: bytes += (0..<Int.random(in: 1...300, using: &g)).map { _ in UInt8.random(in: 0...255, using: &g) }
                default:
                    // A log-form frame of another anchor: never valid here.
                    var p = ByteWriter()
                    p.u64(0xB1)
                    p.varint(1)
                    p.svarint(0)
                    p.append((0..<Int.random(in: 1...900, using: &g)).map { _ in UInt8.random(in: 0...255, using: &g) })
                    bytes += LogAnchor(writer: 0xB1, baseWallTime: 0).logForm(Frame(type: 0x0A, payload: p.bytes).encoded)!
                }
            }
            var search = FrameSearch(bytes, chain: anchor.chainSeed)
            var p = -1
            while true {
                var q = p + 1
                var expected: Int?
                while q <= bytes.count - Frame.headerSize - 1 {
                    if case .frame = Frame.scan(bytes, at: q, chain: anchor.chainSeed) { expected = q; break }
                    q += 1
                }
                let got = search.next(after: p)
                #expect(got == expected, "seed \(seed): after \(p)")
                guard let next = expected, got == expected else { break }
                found += 1
                if bytes[next + 8] == LogAnchor.logFormAddStroke3 { logForm += 1 }
                p = next
            }
        }
        #expect(found >= 60 && logForm >= 20, "\(found) frames found, \(logForm) in log form")
    }
}
