import Foundation
import LnoteModel
import LnoteReplication

/// One step of a replica's undo history: one app action (a stroke, an erase of a selection,
/// an import, a revert), with what takes each of its operations back ([MERGE-73]).
public struct UndoStep: Hashable, Sendable {
    /// What the step did, as the app named it (`add`, `erase`, `undo add`, …).
    public var label: String
    /// Author's wall time of the step, ms since 1970.
    public var wallTime: Int64
    /// Its operations in the order made, each with what takes it back.
    public var entries: [UndoEntry]
    public init(label: String, wallTime: Int64, entries: [UndoEntry]) {
        self.label = label
        self.wallTime = wallTime
        self.entries = entries
    }
}

/// A handle's copy of its document's undo journal: valid while the file has this size and
/// inode (another process's append changes the size).
struct UndoCache {
    /// The replica id the stacks are of (a new id starts a new history).
    var replica: ReplicaID
    var size: UInt64
    var inode: UInt64
    var journal: UndoJournal
}

/// The undo and redo stacks of one replica for one document, kept in
/// `.lnote/undo/<document-uuid>.jsonl` (document-package.md [PKG-100]).
///
/// The file is a journal of JSON lines, each one change of the stacks: `do` (a new step:
/// pushed on the undo stack, the redo stack cleared), `undo` (the undo step at `at`, counted
/// from the top, 0 by default, taken off; this step — what redoes it — pushed on the redo
/// stack), `redo` (the same from the redo stack onto the undo stack), `drop` (the step at `at`
/// of `stack` taken off: nothing of it was left to do), `keep` (a step pushed on `stack`, nothing else changed: a rewritten journal). Lines of another replica id are ignored (a replica given a new id starts a
/// new history), and so is a line that does not parse (a write cut by a crash). Lines are
/// appended without `fsync`: undo history is a convenience of the replica that made the
/// steps, and a crash may forget its last lines, never an operation.
struct UndoJournal {
    var undo: [UndoStep] = []
    var redo: [UndoStep] = []

    /// Steps kept per stack; older ones are forgotten when the journal is rewritten.
    static let maxSteps = 200
    /// A journal longer than this is rewritten with only the current stacks.
    static let rewriteBytes = 1 << 18

    enum Change: String { case `do`, undo, redo, drop, keep }

    /// One line of the journal: a change, the step it pushes (none for `drop`), the stack
    /// it names (`keep` and `drop`; nil is the undo stack) and the position it takes from.
    struct Line {
        var change: Change
        var step: UndoStep?
        var stack: String? = nil
        var at = 0
    }

    static func read(_ bytes: [UInt8], replica: ReplicaID) -> UndoJournal {
        var j = UndoJournal()
        for line in bytes.split(separator: UInt8(ascii: "\n")) {
            if let l = parse(line, replica: replica) { j.apply(l) }
        }
        return j
    }

    /// A journal line's change, or nil when it does not parse or is of another replica.
    static func parse(_ line: ArraySlice<UInt8>, replica: ReplicaID) -> Line? {
        guard let o = (try? JSONSerialization.jsonObject(with: Data(line))) as? [String: Any],
              o["replica"] as? String == replica.description,
              let kind = (o["change"] as? String).flatMap(Change.init(rawValue:)) else { return nil }
        // `at`: the position of the step taken, counted from the top (0, the default).
        return Line(change: kind, step: o["step"].flatMap(UndoJournal.decodeStep), stack: o["stack"] as? String,
                    at: (o["at"] as? NSNumber)?.intValue ?? 0)
    }

    /// Applies one change (a line that pushes a step but has none is ignored).
    mutating func apply(_ l: Line) {
        let at = l.at
        func take(_ stack: inout [UndoStep]) {
            guard at >= 0, at < stack.count else { return }
            stack.remove(at: stack.count - 1 - at)
        }
        switch l.change {
        case .do:
            guard let step = l.step else { return }
            undo.append(step)
            redo = []
        case .undo:
            guard let step = l.step else { return }
            take(&undo)
            redo.append(step)
        case .redo:
            guard let step = l.step else { return }
            take(&redo)
            undo.append(step)
        case .keep:
            guard let step = l.step else { return }
            if l.stack == "redo" { redo.append(step) } else { undo.append(step) }
        case .drop:
            if l.stack == "redo" { take(&redo) } else { take(&undo) }
        }
        if undo.count > UndoJournal.maxSteps { undo.removeFirst(undo.count - UndoJournal.maxSteps) }
        if redo.count > UndoJournal.maxSteps { redo.removeFirst(redo.count - UndoJournal.maxSteps) }
    }

    /// The text of a line: one compact JSON object, members in key order, ending in a newline.
    /// Written directly (a line is written for every edit: going through
    /// `JSONSerialization` cost a quarter of a stroke's append).
    static func encode(_ l: Line, replica: ReplicaID) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(160 + (l.step?.entries.count ?? 0) * 200)
        func raw(_ s: StaticString) { s.withUTF8Buffer { out.append(contentsOf: $0) } }
        // Strings written straight as bytes, as `CanonicalJSON.writeString` would write them:
        // names and labels escaped; ids, digits and base64 need no escape (they are written
        // between quotes without a `String` made for them: a line is written at every edit).
        func string(_ s: String) { CanonicalJSON.writeString(s, into: &out) }
        raw("{")
        if l.at != 0 {
            raw("\"at\":")
            if l.at < 0 { raw("-") }
            LineBytes.decimal(UInt64(l.at.magnitude), into: &out)
            raw(",")
        }
        raw("\"change\":")
        string(l.change.rawValue)
        raw(",\"replica\":\"")
        LineBytes.hex16(replica.rawValue, into: &out)
        raw("\"")
        if let stack = l.stack {
            raw(",\"stack\":")
            string(stack)
        }
        if let s = l.step {
            raw(",\"step\":{\"entries\":[")
            for (i, e) in s.entries.enumerated() {
                if i > 0 { raw(",") }
                raw("{\"inverse\":\"")
                LineBytes.base64(encodeBody(e.inverse), into: &out)
                raw("\"")
                if let made = e.made {
                    raw(",\"made\":\"")
                    LineBytes.base64(encodeBody(made), into: &out)
                    raw("\"")
                }
                raw(",\"op\":\"")
                LineBytes.hex16(e.op.replica.rawValue, into: &out)
                raw(".")
                LineBytes.decimal(e.op.counter, into: &out)
                raw("\",\"page\":\"")
                LineBytes.uuid(e.page.uuid, into: &out)
                raw("\"}")
            }
            raw("],\"label\":")
            string(s.label)
            raw(",\"wallTime\":")
            if s.wallTime < 0 { raw("-") }
            LineBytes.decimal(s.wallTime.magnitude, into: &out)
            raw("}")
        }
        raw("}\n")
        return out
    }

    /// The lines that rebuild these stacks (a rewritten journal): `keep` lines, which push
    /// a step on the stack they name and change nothing else.
    func lines(replica: ReplicaID) -> [UInt8] {
        undo.flatMap { UndoJournal.encode(Line(change: .keep, step: $0, stack: "undo"), replica: replica) }
            + redo.flatMap { UndoJournal.encode(Line(change: .keep, step: $0, stack: "redo"), replica: replica) }
    }

    static func decodeStep(_ any: Any) -> UndoStep? {
        guard let o = any as? [String: Any], let label = o["label"] as? String,
              let wall = (o["wallTime"] as? NSNumber)?.int64Value, let list = o["entries"] as? [[String: Any]] else { return nil }
        var entries: [UndoEntry] = []
        for e in list {
            guard let p = (e["page"] as? String).flatMap({ UUID(uuidString: $0) }).map(PageID.init),
                  let op = (e["op"] as? String).flatMap(OpID.init(parsing:)),
                  let b64 = e["inverse"] as? String, let data = Data(base64Encoded: b64),
                  let body = decodeBody(Array(data)) else { return nil }
            var made: Op.Body?
            if let m = e["made"] {
                guard let b = m as? String, let d = Data(base64Encoded: b), let body = decodeBody(Array(d)) else { return nil }
                made = body
            }
            entries.append(UndoEntry(page: p, op: op, inverse: body, made: made))
        }
        return UndoStep(label: label, wallTime: wall, entries: entries)
    }

    /// A body in the operation encoding (operation-log.md §3), under a placeholder header.
    static func encodeBody(_ body: Op.Body) -> [UInt8] {
        OperationCodec.encode(placeholder(body), form: .hash)
    }

    static func decodeBody(_ bytes: [UInt8]) -> Op.Body? {
        guard let frames = try? Frame.decodeAll(bytes), frames.count == 1,
              let op = try? OperationCodec.decode(frames[0]), op.body.isPageOperation else { return nil }
        return op.body
    }

    /// The placeholder header: replica 1, counter 1, and a context of 2⁴⁰ operations of
    /// replica 2, so that its Lamport timestamp (2⁴⁰ + 1, [LOG-4]) admits the z keys of any
    /// page ([MERGE-12]: `|layer| ≤ lamport`).
    private static func placeholder(_ body: Op.Body) -> Op {
        let others: UInt64 = 1 << 40
        return Op(id: OpID(replica: ReplicaID(1), counter: 1), lamport: others + 1,
                  context: VectorClock([(ReplicaID(2), others)]), wallTime: 0, body: body)
    }
}

/// What a journal line holds besides escaped strings, written as the bytes `String`'s
/// descriptions would give (`ReplicaID.description`, `OpID.description`, `UUID.uuidString`,
/// `Data.base64EncodedString()`, decimal integers), without making the strings.
enum LineBytes {
    private static let lower: [UInt8] = Array("0123456789abcdef".utf8)
    private static let upper: [UInt8] = Array("0123456789ABCDEF".utf8)
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// 16 lowercase hex digits, zero-padded: `ReplicaID.description`.
    static func hex16(_ v: UInt64, into out: inout [UInt8]) {
        for shift in stride(from: 60, through: 0, by: -4) { out.append(lower[Int((v >> UInt64(shift)) & 15)]) }
    }

    /// Decimal digits, no sign, no leading zero: `String(v)`.
    static func decimal(_ v: UInt64, into out: inout [UInt8]) { PointText.decimal(v, into: &out) }

    /// `UUID.uuidString`: uppercase, 8-4-4-4-12.
    static func uuid(_ u: UUID, into out: inout [UInt8]) {
        withUnsafeBytes(of: u.uuid) { b in
            for i in 0..<16 {
                if i == 4 || i == 6 || i == 8 || i == 10 { out.append(UInt8(ascii: "-")) }
                out.append(upper[Int(b[i] >> 4)])
                out.append(upper[Int(b[i] & 15)])
            }
        }
    }

    /// `Data(bytes).base64EncodedString()`: the standard alphabet, `=` padding, no line breaks.
    static func base64(_ bytes: [UInt8], into out: inout [UInt8]) {
        var i = 0
        let n = bytes.count
        while i + 3 <= n {
            let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out.append(alphabet[Int(v >> 18)])
            out.append(alphabet[Int((v >> 12) & 63)])
            out.append(alphabet[Int((v >> 6) & 63)])
            out.append(alphabet[Int(v & 63)])
            i += 3
        }
        if n - i == 1 {
            let v = UInt32(bytes[i]) << 16
            out.append(alphabet[Int(v >> 18)])
            out.append(alphabet[Int((v >> 12) & 63)])
            out.append(UInt8(ascii: "="))
            out.append(UInt8(ascii: "="))
        } else if n - i == 2 {
            let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out.append(alphabet[Int(v >> 18)])
            out.append(alphabet[Int((v >> 12) & 63)])
            out.append(alphabet[Int((v >> 6) & 63)])
            out.append(UInt8(ascii: "="))
        }
    }
}
