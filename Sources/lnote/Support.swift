import CLnoteSyscalls
import Foundation
import LnoteModel
import LnoteReplication
import LnoteStore

// Shared plumbing of the local commands: opening and closing notebooks and documents,
// naming documents, pages and elements, and reading lengths in points.

/// Opens the notebook at `folder`, runs `body`, and closes it (closing flushes). A body that
/// throws still closes the notebook; its error is the one reported.
///
/// Refuses a folder that is not a notebook (no `.lnote/replica.json`): opening would
/// quietly make it one, and `lnote ls ~` should not.
func withNotebook<T>(_ folder: String, console: Console,
                     _ body: (Notebook) async throws -> T) async throws -> T {
    try requireNotebook(folder)
    let nb = try await Notebook.open(at: folder)
    if let recovery = nb.replicaFileRecovery {
        console.err("lnote: note: \(recovery)")
    }
    if let change = nb.replicaChange {
        console.err("lnote: note: this folder was copied or moved: \(change)")
    }
    let result: T
    do {
        result = try await body(nb)
    } catch {
        try? await nb.close()
        throw error
    }
    try await nb.close()
    return result
}

/// For the servers (`relay`, `serve`), which run for days: every allocation of 1 MiB or more
/// gets pages of its own from the system and gives them back when freed. glibc otherwise
/// raises that threshold to the largest block freed so far (up to 32 MiB), after which the
/// decoded points of one request's long strokes stay in the heap, held by the process for
/// as long as it runs, and every such request adds to it.
func returnLargeBuffersToTheSystem() {
    _ = lnote_set_mmap_threshold(1 << 20)
}

/// Throws `notFound` unless `folder` holds a `.lnote` directory ([PKG-66]): what marks a
/// notebook folder. A missing or damaged `.lnote/replica.json` is recovered by opening.
func requireNotebook(_ folder: String) throws {
    var isDir: ObjCBool = false
    guard FileManager.default.fileExists(atPath: folder, isDirectory: &isDir), isDir.boolValue else {
        throw LnoteError(.notFound, "no notebook folder at \(folder) (create one with lnote init)", path: folder)
    }
    // lstat: a `.lnote` that is a symlink does not make a notebook.
    var st = stat()
    guard lstat(folder + "/.lnote", &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else {
        throw LnoteError(.notFound, "\(folder) is not a notebook folder (no .lnote directory; create one with lnote init)", path: folder)
    }
}

/// Opens a document of `nb` named by id or prefix, runs `body`, then closes the document,
/// reporting on stderr anything opening it had to repair.
func withDocument<T>(_ nb: Notebook, _ name: String, console: Console,
                     _ body: (Document) async throws -> T) async throws -> T {
    let id = try await Resolve.document(name, in: nb)
    let d = try await nb.openDocument(id)
    let result: T
    do {
        result = try await body(d)
    } catch {
        for r in await d.recoveryReports { console.err("lnote: recovered: \(r)") }
        try? await d.close()
        throw error
    }
    for r in await d.recoveryReports { console.err("lnote: recovered: \(r)") }
    try await d.close()
    if let e = await d.deferredSaveFailure {
        // [PKG-23] The change is durable in the logs: success, with a word about the cache.
        console.err("lnote: note: saved in the logs; a snapshot could not be written (\(e)); the next save writes it")
    }
    return result
}

/// Names → ids. A name is a full id or a unique prefix of one, compared case-insensitively;
/// an exact match wins over longer ids it prefixes. Pages may also be named `pN` or `#N` (the N-th
/// live page, from 1).
enum Resolve {
    /// The one candidate `name` names.
    /// `label` names candidates in the ambiguity message (default: `text`).
    static func unique<T>(_ name: String, among candidates: [T], what: String, text: (T) -> String,
                          label: ((T) -> String)? = nil, in context: String? = nil) throws -> T {
        let key = name.lowercased()
        guard !key.isEmpty else { throw LnoteError(.invalidArgument, "empty \(what) name") }
        let exact = candidates.filter { text($0).lowercased() == key }
        let matches = exact.isEmpty ? candidates.filter { text($0).lowercased().hasPrefix(key) } : exact
        let where_ = context.map { " in \($0)" } ?? ""
        switch matches.count {
        case 1:
            return matches[0]
        case 0:
            throw LnoteError(.notFound, "no \(what) \"\(name)\"\(where_)")
        default:
            let shown = matches.prefix(8).map { label?($0) ?? text($0) }.joined(separator: ", ")
            let more = matches.count > 8 ? ", … (\(matches.count) in all)" : ""
            throw LnoteError(.ambiguous, "\(what) \"\(name)\" is ambiguous\(where_): \(shown)\(more)")
        }
    }

    /// The digits of a page position, `p3`, `P3` or `#3`; nil for anything else.
    static func positionDigits(_ name: String) -> Substring? {
        guard let first = name.first, first == "#" || first == "p" || first == "P", name.count > 1 else { return nil }
        return name.dropFirst()
    }

    static func document(_ name: String, in nb: Notebook) async throws -> DocumentID {
        try unique(name, among: try await nb.documentIDs(), what: "document", text: \.description)
    }

    /// A page by position, `pN` or `#N` (live pages, in order: `p1` needs no quoting in a
    /// shell, where an unquoted `#1` starts a comment), id or prefix (deleted pages included).
    /// Ids are hexadecimal, so `p` never begins one.
    static func page(_ name: String, in d: Document) async throws -> PageID {
        if let digits = positionDigits(name) {
            let live = await d.pageList
            guard let n = Int(digits), n >= 1 else {
                throw Arguments.UsageError(message: "page position \"\(name)\" must be p1, p2, … (or #1, #2, …)")
            }
            guard n <= live.count else {
                throw LnoteError(.notFound, "no page \(name): document \(d.id) has \(live.count) live page\(live.count == 1 ? "" : "s")")
            }
            return live[n - 1].id
        }
        return try unique(name, among: await d.allPageIDs, what: "page", text: \.description,
                          in: "document \(d.id)")
    }

    /// Live elements of a page, each by id (`replicahex.counter`), unique prefix, or `.counter`
    /// when one replica alone made an element with that counter. Duplicates are dropped,
    /// order kept.
    static func elements(_ names: [String], on page: PageID, in d: Document) async throws -> [ElementRecord] {
        let live = try await d.elements(page)
        var seen = Set<ElementID>()
        var out: [ElementRecord] = []
        for n in names {
            let e: ElementRecord
            do {
                e = try element(n, among: live, id: \.id, on: page)
            } catch let error as LnoteError where error.code == .notFound {
                // Not live: an erased element is named as such, not as unknown.
                let erased = try await d.pageState(page).tombstones.filter(\.isErased)
                guard let t = try? element(n, among: erased, id: \.id, on: page) else { throw error }
                throw LnoteError(.notFound, "element \(t.id) on page \(page) is erased (lnote restore-element brings it back)")
            }
            if seen.insert(e.id).inserted { out.append(e) }
        }
        return out
    }

    /// The one of `candidates` that `name` names: an id, a unique prefix, or `.counter`.
    /// A complete id (16 hex digits, a dot, the counter) names that element alone, never as a
    /// prefix of others (`….5` of `….50`): an erased one is then said to be erased.
    static func element<T>(_ name: String, among candidates: [T], id: @escaping (T) -> ElementID, on page: PageID) throws -> T {
        if let dot = name.firstIndex(of: "."), name.distance(from: name.startIndex, to: dot) == 16,
           let full = OpID(parsing: name), full.description.lowercased() == name.lowercased() {
            return try unique(name, among: candidates.filter { id($0) == full }, what: "element",
                              text: { id($0).description }, in: "page \(page)")
        }
        if name.hasPrefix("."), name.count > 1 {
            // ".17": the element with counter 17, whichever replica made it (when only one did).
            return try unique(name, among: candidates.filter { id($0).description.hasSuffix(name) }, what: "element",
                              text: { "." + String(id($0).counter) }, label: { id($0).description }, in: "page \(page)")
        }
        return try unique(name, among: candidates, what: "element", text: { id($0).description }, in: "page \(page)")
    }
}

/// Lengths given in points on the command line, stored in tenths of a point.
enum Units {
    /// `--name PT` in tenths of a point (nil when absent).
    static func length(_ args: Arguments, _ name: String) throws -> Int32? {
        guard let v = try args.double(name) else { return nil }
        do { return try Quantization.coordinate(v) } catch {
            throw Arguments.UsageError(message: "--\(name) \(v) is out of range")
        }
    }

    /// A length that must be positive.
    static func positive(_ args: Arguments, _ name: String) throws -> Int32? {
        guard let q = try length(args, name) else { return nil }
        guard q > 0 else { throw Arguments.UsageError(message: "--\(name) must be positive (at least 0.1 pt)") }
        return q
    }

    /// `--width PT --height PT` as a canvas (A4 for whichever is absent).
    static func canvas(_ args: Arguments) throws -> CanvasSize {
        CanvasSize(width: try positive(args, "width") ?? CanvasSize.a4.width,
                   height: try positive(args, "height") ?? CanvasSize.a4.height)
    }

    /// Tenths of a point as points, e.g. `12.3`, `-0.5`, `7` (what `%.1f`, or `%.0f` for a
    /// whole number, prints of `Quantization.points(q)`), from the integer: `show --points`
    /// prints four of these per point, and `String(format:)` was half of its time.
    static func pt(_ q: Int32) -> String {
        let a = abs(Int64(q))
        let whole = (q < 0 ? "-" : "") + String(a / 10)
        return a % 10 == 0 ? whole : whole + "." + String(a % 10)
    }
}

/// Where a page goes: `--first`, `--after PAGE`, or (`default`) the end.
func placement(_ args: Arguments, in d: Document, required: Bool) async throws -> PagePlacement {
    let after = args.option("after")
    if args.flag("first") && after != nil { throw Arguments.UsageError(message: "give --first or --after, not both") }
    if args.flag("first") { return .first }
    if let after { return .after(try await Resolve.page(after, in: d)) }
    if required { throw Arguments.UsageError(message: "say where: --first or --after PAGE") }
    return .last
}

/// ms since 1970 as `2024-05-01 14:03:22Z` (UTC), or `-` for 0.
func timestamp(_ ms: Int64) -> String {
    guard ms != 0 else { return "-" }
    return utc("yyyy-MM-dd HH:mm:ss'Z'", Date(timeIntervalSince1970: Double(ms) / 1000))
}

/// ms since 1970 as `2026-12-04T21:08:05.780Z`: exact, and a form `--at` takes back (a
/// time shown to the second would leave out a step stamped later in that second).
func preciseTimestamp(_ ms: Int64) -> String {
    // Whole seconds through the formatter, the milliseconds as integers (a Double's
    // fraction could print one less); floor division, so that times before 1970 print right.
    let milli = (ms % 1000 + 1000) % 1000
    return utc("yyyy-MM-dd'T'HH:mm:ss", Date(timeIntervalSince1970: Double((ms - milli) / 1000)))
        + String(format: ".%03dZ", Int(milli))
}

/// `date` in UTC with `format` (POSIX locale).
private func utc(_ format: String, _ date: Date) -> String {
    let f = DateFormatter()
    f.locale = Locale(identifier: "en_US_POSIX")
    f.timeZone = TimeZone(identifier: "UTC")
    f.dateFormat = format
    return f.string(from: date)
}

/// Left-aligned columns separated by two spaces (the last column is not padded).
func table(_ rows: [[String]]) -> [String] {
    // Escaped before measuring, so that a cell with control characters (printed escaped by
    // Console, which leaves escaped text as it is) keeps its columns aligned.
    let rows = rows.map { $0.map(PrintableText.escaped) }
    guard let n = rows.map(\.count).max() else { return [] }
    var widths = Array(repeating: 0, count: n)
    for r in rows { for (i, c) in r.enumerated() { widths[i] = max(widths[i], c.count) } }
    return rows.map { r in
        r.enumerated().map { i, c in i == r.count - 1 ? c : c.padding(toLength: widths[i], withPad: " ", startingAt: 0) }
            .joined(separator: "  ")
    }
}
