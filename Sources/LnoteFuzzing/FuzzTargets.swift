import Foundation
import LnoteModel
import LnoteReplication
import LnoteStore
import LnoteSync

/// The decoders and the merge, as fuzzing targets ([issue: hardening]): each takes any bytes,
/// must never crash, hang or allocate from an unchecked length, and checks the properties
/// that hold whenever decoding succeeds (canonical re-encoding, the merge as a function of
/// the set of operations). A property that fails traps, so the fuzzer reports it.
///
/// `lnote-fuzz` runs them under libFuzzer (`scripts/fuzz.sh TARGET SECONDS`) and, built
/// normally, replays files; `FuzzCorpusTests` replays the corpus and every crash kept in
/// `Fuzz/` on each test run.
public enum FuzzTargets {
    public static let names = ["frame", "op", "snapshot", "points-v2", "checkpoint", "sync-request", "sync-response", "import", "merge",
                               "merge-ops", "log"] + jsonTargets.keys.sorted()

    /// The JSON files a notebook reads, by target name: each fed to the store's own decoding
    /// and validation of that file (`NotebookJSONFiles`).
    public static let jsonTargets: [String: NotebookJSONFiles.Kind] = [
        "document-json": .document, "manifest-json": .manifest, "replica-json": .replica,
        "devices-json": .devices, "quarantine-json": .quarantine,
    ]

    /// Runs target `name` on `data`.
    public static func run(_ name: String, _ data: [UInt8]) {
        switch name {
        case "frame": frame(data)
        case "op": operations(data)
        case "snapshot": snapshot(resealed(data))
        case "points-v2": pointsV2(data)
        case "checkpoint": checkpoint(data); checkpoint(withCRC(data))
        case "sync-request": syncRequest(data)
        case "sync-response": syncResponse(data)
        case "import": importLines(data)
        case "merge": mergeScript(data)
        case "merge-ops": merge(data)
        case "log": log(data)
        case let json where jsonTargets[json] != nil: jsonFile(jsonTargets[json]!, data)
        default: preconditionFailure("unknown fuzz target \(name); known: \(names.joined(separator: ", "))")
        }
    }

    static func check(_ condition: Bool, _ what: @autoclosure () -> String) {
        if !condition { preconditionFailure(what()) }
    }

    /// Frames, and the operation in each: a decoded operation re-encodes to its bytes ([LOG-22]).
    static func frame(_ data: [UInt8]) {
        guard let frames = try? Frame.decodeAll(data) else { return }
        for f in frames {
            guard let op = try? OperationCodec.decode(f) else { continue }
            checkForms(op, f)
            check(OpValidator.violation(of: op) == nil, "decode let through an invalid operation")
        }
    }

    /// A version-2 page log ([PKG-110], [LOG-33]): the bytes after a fixed header and anchor,
    /// read as they are (damage, the search after it, log-form frames that fail their CRC),
    /// then as `chunks` each sealed as a valid frame (a chunk of type 0x8A with the CRC chained
    /// from the anchor's), so that mutations reach the expansion. Every sealed chunk is read
    /// back: the anchor's copies passed over, each log-form frame expanded to an `addStroke3`
    /// whose log form is its bytes again, or left as it is; an operation decoded from one
    /// re-encodes to it.
    static func log(_ data: [UInt8]) {
        let anchor = LogAnchor(writer: 0xB0, baseWallTime: 1_700_000_000_000)
        let start = LogHeader(kind: .page, owner: UUID(uuid: (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)),
                              incarnation: 1, version: 2).encoded + anchor.frame
        _ = try? LogFileContents(start + data)
        var sealed = start
        var written: [Int: [UInt8]] = [:]
        var copies = 0
        for chunk in chunks(data) {
            var bytes = chunk.encoded
            if chunk.type == LogAnchor.logFormAddStroke3 {
                let crc = bytes.withUnsafeBytes { raw in
                    CRC32C.update(CRC32C.update(anchor.chainSeed, UnsafeRawBufferPointer(rebasing: raw[0..<4])),
                                  UnsafeRawBufferPointer(rebasing: raw[Frame.headerSize...]))
                }
                withUnsafeBytes(of: crc.littleEndian) { for i in 0..<4 { bytes[4 + i] = $0[i] } }
            }
            if bytes == anchor.frame { copies += 1 }
            written[sealed.count] = bytes
            sealed += bytes
        }
        guard let log = try? LogFileContents(sealed) else {
            check(false, "a log of sealed frames does not read")
            return
        }
        check(log.anchor == anchor && log.frames.count == written.count - copies, "frames lost or gained")
        for lf in log.frames {
            guard let bytes = written[Int(lf.offset)] else {
                check(false, "a frame read at \(lf.offset), where none was written")
                continue
            }
            check(lf.size == bytes.count, "a frame's extent differs from what was written")
            if bytes[Frame.headerSize] == LogAnchor.logFormAddStroke3 && lf.frame.type != LogAnchor.logFormAddStroke3 {
                check(anchor.logForm(lf.frame.encoded) == bytes, "an expanded log-form frame does not give its bytes back")
            }
            guard let op = try? OperationCodec.decode(lf.frame, base: lf.payloadBase) else { continue }
            checkForms(op, lf.frame)
        }
        // [LOG-28] A listing open reads a tail's leading plain adds where they lie: what it
        // finds is what the scan finds, on the sealed frames and on the raw bytes alike.
        let tailStart = LogHeader.size + anchor.frame.count
        for bytes in [sealed, start + data] where bytes.count >= tailStart {
            let disagreement = LogScanner.listingDisagreement(Array(bytes[tailStart...]), base: UInt64(tailStart),
                                                              anchor: anchor, path: "fuzz.log")
            check(disagreement == nil, "the listing scan differs from the scan: \(disagreement ?? "")")
        }
    }

    /// Frames built from the bytes without their CRC, so that mutations reach the operation
    /// decoder: a sequence of (type u8, payload length u16 little-endian, payload).
    public static func chunks(_ data: [UInt8]) -> [Frame] {
        var out: [Frame] = []
        var i = 0
        while i + 3 <= data.count, out.count < 256 {
            let n = Int(data[i + 1]) | Int(data[i + 2]) << 8
            let end = min(data.count, i + 3 + n)
            out.append(Frame(type: data[i], payload: Array(data[(i + 3)..<end])))
            i = end
        }
        return out
    }

    /// The operation decoder on frames of `chunks`: a decoded operation re-encodes to its frame.
    static func operations(_ data: [UInt8]) {
        for f in chunks(data) {
            guard let op = try? OperationCodec.decode(f) else { continue }
            checkForms(op, f)
        }
    }

    /// [LOG-22], [LOG-24], [LOG-29], [LOG-32] A decoded operation re-encodes to its frame in
    /// the frame's form (an `add` is the hash form, an `addStroke3` the written form, an
    /// `addStroke2` and an `addStroke` the earlier written forms); its other forms decode to
    /// the same operation;
    /// and every form has one content hash ([SYNC-50]).
    static func checkForms(_ op: Op, _ f: Frame) {
        let form = OperationCodec.form(ofType: f.type)
        check(OperationCodec.frame(op, form: form) == f, "operation \(op.id) does not re-encode to its frame")
        for other in [OperationCodec.Form.written, .writtenV2, .writtenV1, .hash] where other != form {
            let frame = OperationCodec.frame(op, form: other)
            check((try? OperationCodec.decode(frame)) == op, "operation \(op.id) does not round-trip in another form")
            check(ContentHash.of(frame) == ContentHash.of(f), "operation \(op.id) has two content hashes")
        }
        check(ContentHash.of(op) == ContentHash.of(f), "operation \(op.id) has two content hashes")
    }

    /// The bytes with a snapshot's length field and CRC made right, so that mutations reach
    /// the sections.
    public static func resealed(_ data: [UInt8]) -> [UInt8] {
        guard data.count >= 56 else { return data }
        var b = data
        withUnsafeBytes(of: UInt64(b.count).littleEndian) { for i in 0..<8 { b[12 + i] = $0[i] } }
        return withCRC(b)
    }

    /// The bytes with their last four replaced by the CRC-32C of the others.
    public static func withCRC(_ data: [UInt8]) -> [UInt8] {
        guard data.count >= 8 else { return data }
        var b = data
        let crc = CRC32C.checksum(b, 0..<(b.count - 4))
        withUnsafeBytes(of: crc.littleEndian) { for i in 0..<4 { b[b.count - 4 + i] = $0[i] } }
        return b
    }

    /// Whether every section of a whole snapshot (length and CRC checked) has a tag this
    /// version knows.
    static func onlyKnownSections(_ data: [UInt8]) -> Bool {
        var at = PageSnapshot.headerSize
        let end = data.count - PageSnapshot.trailerSize
        while at + PageSnapshot.sectionHeaderSize <= end {
            let tag = UInt16(data[at]) | UInt16(data[at + 1]) << 8
            let size = Int(UInt32(data[at + 2]) | UInt32(data[at + 3]) << 8 | UInt32(data[at + 4]) << 16 | UInt32(data[at + 5]) << 24)
            guard PageSnapshot.Section(rawValue: tag) != nil else { return false }
            at += PageSnapshot.sectionHeaderSize + size
        }
        return true
    }

    /// Point streams of version 2 ([PT2-7]): the first two bytes are an ink width (Int16, little
    /// endian), then up to 64 streams coded one after the other in one context, as a chunk of
    /// snapshot records codes them. Whatever decodes re-encodes, in a fresh context, to exactly
    /// the bytes read. The same bytes are then read as streams coded each alone with written
    /// parameters, as `addStroke2` frames hold them ([PT2-10]), as streams coded each alone with
    /// written parameters and grids, as `addStroke3` frames hold them ([PT2-11]), as a chunk
    /// with grids, as a version-3 snapshot holds it, and as a chunk with grids and predictors
    /// ([PT2-12]), as a version-4 snapshot holds it, each with the same property.
    static func pointsV2(_ data: [UInt8]) {
        guard data.count >= 2 else { return }
        let width = Int32(Int16(bitPattern: UInt16(data[0]) | UInt16(data[1]) << 8))
        var r = ByteReader(data, range: 2..<data.count)
        var decoding = StrokeCodecV2.Context(), encoding = StrokeCodecV2.Context()
        var w = ByteWriter()
        for _ in 0..<64 where !r.isAtEnd {
            guard let points = try? StrokeCodecV2.decodePoints(&r, width: width, context: &decoding) else { break }
            StrokeCodecV2.encodePoints(points, width: width, context: &encoding, into: &w)
            check(w.bytes == Array(data[2..<r.position]), "a version-2 point stream is not canonical")
        }
        for standalone in [StrokeCodecV2.Context.standaloneWithParameters, .standaloneWithGrids] {
            var alone = ByteReader(data, range: 2..<data.count)
            for _ in 0..<64 where !alone.isAtEnd {
                let start = alone.position
                var context = standalone
                guard let points = try? StrokeCodecV2.decodePoints(&alone, width: width, context: &context) else { break }
                var again = standalone
                var one = ByteWriter()
                StrokeCodecV2.encodePoints(points, width: width, context: &again, into: &one)
                check(one.bytes == Array(data[start..<alone.position]), "a point stream coded alone is not canonical")
            }
        }
        // As a chunk with grids (version 3) and with grids and predictors (version 4).
        for initial in [StrokeCodecV2.Context.chunkWithGrids, StrokeCodecV2.Context.chunkWithPredictors] {
            var chunkReader = ByteReader(data, range: 2..<data.count)
            var decoding = initial, encoding = initial
            var chunk = ByteWriter()
            for _ in 0..<64 where !chunkReader.isAtEnd {
                guard let points = try? StrokeCodecV2.decodePoints(&chunkReader, width: width, context: &decoding) else { break }
                StrokeCodecV2.encodePoints(points, width: width, context: &encoding, into: &chunk)
                check(chunk.bytes == Array(data[2..<chunkReader.position]), "a point stream of a chunk is not canonical")
            }
        }
    }

    /// A page snapshot: what decodes re-encodes to bytes that decode to the same state and
    /// re-encode to themselves ([SNAP-2]; a reader may accept longer varints, [SHR-1]).
    static func snapshot(_ data: [UInt8]) {
        // [SNAP-46] A listing read that leaves the records unparsed ends, once they are read,
        // where an eager read ends: the same records once their points are decoded, or the
        // same error at the same offset. (Records with erased ranges and no erase history: an
        // eager read reads the page from its log instead, [PKG-99]; reading them on first use
        // refuses them to the same end.)
        func resolved(_ body: () throws -> [ElementRecord]?) -> Result<[ElementRecord]?, LnoteError> {
            do {
                guard var records = try body() else { return .success(nil) }
                try DeferredPoints.resolve(&records)
                return .success(records)
            } catch let e as LnoteError {
                return .failure(e)
            } catch {
                return .failure(LnoteError(.corrupt, "\(error)"))
            }
        }
        let eager = resolved {
            let c = try PageSnapshot.decode(data, deferringPoints: true)
            return c.lacksEraseHistory ? nil : c.state.elements
        }
        let listed = resolved {
            let c = try PageSnapshot.decode(data, deferringPoints: true, leavingRecordsUnbuilt: true)
            guard let u = c.unbuilt else { return c.state.elements }
            let built = try u.build().records
            check(u.ids == built.map(\.id), "records read on first use do not have the ids listed")
            return built
        }
        switch (eager, listed) {
        case (.success(nil), _): break
        case (.success(let a), .success(let b)): check(a == b, "records read on first use differ from an eager read's")
        case (.failure, .failure):
            // Both refuse. Which fault each reports first may differ on a file with several
            // (records stepped over at the open, a later section's fault found first: [SNAP-46]);
            // `PageSnapshotIDTableTests` compares the errors of single faults.
            break
        case (.success, .failure): check(false, "records read on first use refused where an eager read accepts")
        case (.failure, .success): check(false, "records read on first use accepted where an eager read refuses")
        }
        guard let c = try? PageSnapshot.decode(data) else { return }
        let bytes = PageSnapshot.encode(c)
        let again = try? PageSnapshot.decode(bytes)
        check(again == c, "a decoded snapshot does not survive re-encoding")
        // [SNAP-36] [SNAP-42] [SNAP-43] [SNAP-45] Versions 2 to 5 are canonical: what a reader accepts is
        // what the writer of that version writes, but for what a reader skips by design
        // (compatible flags, [SNAP-8]; non-critical sections it does not know, [SNAP-11]).
        if (2...5).contains(data[8]) && data[9] == 0 && data[10] == 0 && data[11] == 0 && onlyKnownSections(data) {
            let same = PageSnapshot.encode(c.state, coveredLogOffset: c.coveredLogOffset, logIncarnation: c.logIncarnation,
                                           version: UInt16(data[8]))
            check(same == data, "a version-\(data[8]) snapshot the reader accepts is not canonical")
        }
        check(again.map(PageSnapshot.encode) == bytes, "a snapshot's encoding is not a function of its state")
        // Whatever a reader accepts, local editing on top of it never traps ([SNAP-19]): the
        // next Lamport timestamp, keys on top, below and beside every element, an add, a move.
        var r = PageReplica(state: c.state)
        _ = r.conflicts()
        _ = try? r.nextLamport()
        _ = (r.topKey, r.bottomKey)
        let me = ReplicaID(0xF0F0)
        let next = OpID(replica: me, counter: r.clock[me] + 1)
        for e in r.elements.prefix(16) {
            _ = try? r.key(adjacentTo: e.id, above: true, for: next)
            _ = try? r.key(adjacentTo: e.id, above: false, for: next)
        }
        if let first = r.elements.first {
            _ = try? r.move([first.id], dx: 1, dy: -1, by: me, wallTime: 0)
            _ = try? r.add(first.content, by: me, wallTime: 0, above: first.id)
        }
        _ = try? r.add(.stroke(Stroke(points: [StrokePoint(x: 0, y: 0)])), by: me, wallTime: 0)
    }

    static func checkpoint(_ data: [UInt8]) {
        if let c = try? Checkpoint.decode(data) {
            check((try? Checkpoint.decode(c.encoded()))?.encoded() == c.encoded(), "a checkpoint does not survive re-encoding")
        }
        _ = try? Checkpoint.decodeList(data)
    }

    static func syncRequest(_ data: [UInt8]) {
        guard let q = try? SyncCodec.decodeRequest(data) else { return }
        check((try? SyncCodec.decodeRequest(SyncCodec.encode(q))) == q, "a sync request does not survive re-encoding")
    }

    static func syncResponse(_ data: [UInt8]) {
        guard let s = try? SyncCodec.decodeResponse(data) else { return }
        check((try? SyncCodec.decodeResponse(SyncCodec.encode(s))) == s, "a sync response does not survive re-encoding")
    }

    /// The import's line parser and quantizer; the file read in chunks (of a size the first
    /// byte chooses) gives the same lines, or the same error, as read whole ([IMP-9]).
    static func importLines(_ data: [UInt8]) {
        let whole = Result { try StrokeImport.parse(data) }
        let size = 1 + Int(data.first ?? 0) % 17
        var at = 0
        let chunked = Result {
            try StrokeImport.parse(chunks: {
                guard at < data.count else { return nil }
                defer { at = min(data.count, at + size) }
                return Array(data[at..<min(data.count, at + size)])
            })
        }
        switch (whole, chunked) {
        case (.success(let a), .success(let b)):
            check(a == b, "the file read in chunks of \(size) gives other lines than read whole")
        case (.failure(let a as LnoteError), .failure(let b as LnoteError)):
            check(a.code == b.code && a.message == b.message && a.offset == b.offset && a.index == b.index,
                  "the file read in chunks of \(size) fails otherwise: \(b) against \(a)")
        default:
            check(false, "the file read in chunks of \(size) and whole: one accepted, one refused")
        }
        guard case .success(let lines) = whole else { return }
        for line in lines.prefix(64) { _ = try? Stroke(samples: line.samples) }
    }

    /// A JSON file of a notebook: the store's decoder and checks never trap, and what they
    /// accept survives being written back by the store and read again.
    static func jsonFile(_ kind: NotebookJSONFiles.Kind, _ data: [UInt8]) {
        let problem: String?
        do { problem = try NotebookJSONFiles.roundTripProblem(kind, data) } catch { return }  // refused: fine
        if let problem { check(false, problem) }
    }

    /// The merge, structure-aware: the bytes are a script of edits by three replicas with
    /// partial syncs (`MergeScript`); every operation made, delivered in two orders, gives
    /// equal states and conflicts, and the authors converge to it ([MERGE-1]).
    static func mergeScript(_ data: [UInt8]) {
        if let problem = MergeScript.run(data) { check(false, "\(problem) (script of \(data.count) bytes)") }
    }

    /// The merge on decoded operations: the operations that decode from the bytes, fed to two
    /// page replicas in two orders, give equal states and conflicts ([MERGE-1]); the state
    /// survives its snapshot.
    static func merge(_ data: [UInt8]) {
        // One content per id: two contents under one id are a fork, which the doors refuse
        // before the merge sees it ([SYNC-51]); the merge itself keeps the first it applies.
        var seen = Set<OpID>()
        let ops = chunks(data).compactMap { try? OperationCodec.decode($0) }
            .filter { $0.body.isPageOperation && seen.insert($0.id).inserted }
        guard !ops.isEmpty else { return }
        let page = PageID(UUID(uuid: (0, 0, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 1)))
        var a = PageReplica(page: page), b = PageReplica(page: page)
        guard (try? a.receive(ops)) != nil else { return }
        for op in ops.reversed() { _ = try? b.receive([op]) }
        check(a.state == b.state, "two delivery orders of the same operations give different states")
        check(a.conflicts() == b.conflicts(), "two delivery orders give different conflicts")
        let bytes = PageSnapshot.encode(a.state, coveredLogOffset: 0, logIncarnation: 0)
        check((try? PageSnapshot.decode(bytes))?.state == a.state, "a merged state does not survive its snapshot")
    }
}
