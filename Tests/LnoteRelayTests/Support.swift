import Foundation
import Dispatch
import LnoteModel
import LnotePostgres
import LnoteReplication
import LnoteSQLite
import LnoteRelayPostgres
import LnoteServer
import LnoteSync
import LnoteTestSupport
import Synchronization
import Testing

/// A fresh directory under the system temp dir, removed when `body` ends, with the
/// PostgreSQL databases made for it (`RelayBackendKind.database(in:)`), also when it throws.
func withTempDirectory<T>(_ body: (String) async throws -> T) async throws -> T {
    let dir = FileManager.default.temporaryDirectory
        .appendingPathComponent("lnote-relay-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    let result: Result<T, any Error>
    do { result = .success(try await body(dir)) } catch { result = .failure(error) }
    await PostgresTestDatabases.drop(for: dir)
    try? FileManager.default.removeItem(atPath: dir)
    return try result.get()
}

/// The databases tests create in the process's PostgreSQL cluster, by the temporary
/// directory of the test that made them.
enum PostgresTestDatabases {
    static let made = Mutex<[String: [String]]>([:])

    /// Creates an empty database for the test whose directory is `dir`; returns its URL.
    static func create(for dir: String) async throws -> String {
        let cluster = try await PostgresCluster.shared()
        let name = "lnote_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        try await blocking {
            let conn = try PGConnection(url: cluster.url)
            defer { conn.close() }
            try conn.execute("CREATE DATABASE \(name)")
        }
        made.withLock { $0[dir, default: []].append(name) }
        return url(cluster, database: name)
    }

    /// The cluster's URL for `database`.
    static func url(_ cluster: PostgresCluster, database: String) -> String {
        cluster.url.replacingOccurrences(of: "postgresql:///postgres?", with: "postgresql:///\(database)?")
    }

    /// Drops (with `FORCE`: connections left open are ended) what was made for `dir`.
    static func drop(for dir: String) async {
        guard let names = made.withLock({ $0.removeValue(forKey: dir) }), !names.isEmpty,
              let cluster = try? await PostgresCluster.shared() else { return }
        _ = try? await blocking {
            let conn = try PGConnection(url: cluster.url)
            defer { conn.close() }
            for name in names { _ = try? conn.execute("DROP DATABASE IF EXISTS \(name) WITH (FORCE)") }
        }
    }
}

/// Runs blocking work (libpq calls, thread fan-outs) on a dispatch thread, off Swift
/// concurrency's shared threads.
func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(with: Result { try body() }) }
    }
}

/// One test's database of one backend: where it is, and how to open a store on it (again
/// after a close, or a second one beside the first, as a second relay process would).
struct RelayTestDatabase: Sendable {
    let backend: RelayBackendKind
    /// SQLite: the file's path; PostgreSQL: the database's URL.
    let location: String

    /// A backend connection to the database, not yet opened as a store.
    func connect() throws -> any RelayDatabase {
        switch backend {
        case .sqlite: try RelaySQLiteDatabase(path: location)
        case .postgres: try RelayPostgresDatabase(url: location, poolSize: 4)
        }
    }

    /// A store on the database; `wrap` may put a test decorator around the backend.
    func open(pullLimit: Int = RelayStore.defaultPullLimit,
              wrap: (any RelayDatabase) -> any RelayDatabase = { $0 }) throws -> RelayStore {
        try RelayStore(database: wrap(try connect()), pullLimit: pullLimit)
    }
}

extension RelayBackendKind {
    /// A new, empty database of this backend for a test whose temporary directory is `dir`
    /// (a PostgreSQL one is dropped when `withTempDirectory` ends).
    func database(in dir: String, name: String = "relay") async throws -> RelayTestDatabase {
        switch self {
        case .sqlite: RelayTestDatabase(backend: self, location: dir + "/" + name + ".sqlite")
        case .postgres: RelayTestDatabase(backend: self, location: try await PostgresTestDatabases.create(for: dir))
        }
    }
}

/// A relay store of `backend` in a temp directory with one notebook, closed when `body` ends.
func withRelay<T>(_ backend: RelayBackendKind = .sqlite, pullLimit: Int = RelayStore.defaultPullLimit,
                  _ body: (RelayStore, NotebookID, RelayTestDatabase) async throws -> T) async throws -> T {
    try await withTempDirectory { dir in
        let database = try await backend.database(in: dir)
        let store = try database.open(pullLimit: pullLimit)
        defer { try? store.close() }
        let nb = try store.createNotebook()
        return try await body(store, nb, database)
    }
}

/// The seeded generator the model ships (SplitMix64): one definition for every test.
typealias SeededRNG = SplitMix64

func randomBytes(_ n: Int, _ rng: inout SeededRNG) -> [UInt8] {
    (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) }
}

/// A UUID made of 16 bytes from `rng` (ids that sort the same way on every run of a seed).
func seededUUID(_ rng: inout SeededRNG) -> UUID {
    let a = rng.next(), b = rng.next()
    func byte(_ w: UInt64, _ i: UInt64) -> UInt8 { UInt8(truncatingIfNeeded: w >> (8 * i)) }
    return UUID(uuid: (byte(a, 0), byte(a, 1), byte(a, 2), byte(a, 3), byte(a, 4), byte(a, 5), byte(a, 6), byte(a, 7),
                       byte(b, 0), byte(b, 1), byte(b, 2), byte(b, 3), byte(b, 4), byte(b, 5), byte(b, 6), byte(b, 7)))
}

func randomStroke(_ rng: inout SeededRNG) -> Stroke {
    let n = Int.random(in: 1...12, using: &rng)
    var x = Int32.random(in: 0...5000, using: &rng), y = Int32.random(in: 0...5000, using: &rng)
    var pts: [StrokePoint] = []
    for i in 0..<n {
        x += Int32.random(in: -30...30, using: &rng)
        y += Int32.random(in: -30...30, using: &rng)
        pts.append(StrokePoint(x: x, y: y, pressure: UInt16.random(in: 0...1000, using: &rng),
                               radius: Int32.random(in: 1...40, using: &rng), t: UInt32(i * 4)))
    }
    return Stroke(style: InkStyle(tool: .pen, color: .black, width: 20), points: pts)
}

/// Row counts and the greatest sequence of a relay file, read through a second connection
/// (WAL lets it read beside the store's).
struct RelayCounts: Equatable, CustomStringConvertible {
    var ops: Int64
    var maxSeq: Int64
    var assets: Int64
    var checkpoints: Int64
    var tokens: Int64
    var notebooks: Int64
    var description: String {
        "ops \(ops) maxSeq \(maxSeq) assets \(assets) checkpoints \(checkpoints) tokens \(tokens) notebooks \(notebooks)"
    }

    static func read(_ path: String) throws -> RelayCounts {
        let db = try SQLiteDatabase(path: path, options: .init(create: false, readOnly: true))
        defer { try? db.close() }
        func one(_ sql: String) throws -> Int64 { try db.query(sql).first?.first?.int64 ?? 0 }
        return RelayCounts(ops: try one("SELECT count(*) FROM ops"), maxSeq: try one("SELECT ifnull(max(seq), 0) FROM ops"),
                           assets: try one("SELECT count(*) FROM assets"),
                           checkpoints: try one("SELECT count(*) FROM checkpoints"),
                           tokens: try one("SELECT count(*) FROM tokens"), notebooks: try one("SELECT count(*) FROM notebooks"))
    }

    /// The same counts through the store's backend, in one read transaction (any backend).
    static func read(_ store: RelayStore) throws -> RelayCounts {
        try store.database.transaction(.read) { tx in
            func one(_ sql: String) throws -> Int64 { try tx.query(sql).first?.first?.int64 ?? 0 }
            return RelayCounts(ops: try one("SELECT count(*) FROM ops"), maxSeq: try one("SELECT coalesce(max(seq), 0) FROM ops"),
                               assets: try one("SELECT count(*) FROM assets"),
                               checkpoints: try one("SELECT count(*) FROM checkpoints"),
                               tokens: try one("SELECT count(*) FROM tokens"),
                               notebooks: try one("SELECT count(*) FROM notebooks"))
        }
    }
}

/// A client's notebook held in memory: any number of documents, one replica per log, every
/// operation kept in its log. Enough of a `SyncableNotebook` to drive `SyncSession`.
final class TestNotebook: SyncableNotebook {
    struct State {
        var docs: [DocumentID: DocumentReplica] = [:]
        var pages: [LogRef: PageReplica] = [:]
        var logs: [LogRef: [Op]] = [:]
        var assets: [AssetID: [UInt8]] = [:]
        var remoteStates: [String: [UInt8]] = [:]
        var wall: Int64 = 1_700_000_000_000
    }
    let replicaID: ReplicaID
    let state = Mutex(State())
    /// When set, a sync may offer checkpoints of this notebook's pages (their states as they
    /// are); otherwise it offers none, as before.
    let offersCheckpoints: Bool

    init(replica: ReplicaID, offersCheckpoints: Bool = false) {
        replicaID = replica
        self.offersCheckpoints = offersCheckpoints
    }

    func checkpointState(of log: LogRef) async throws -> PageState? {
        offersCheckpoints ? state.withLock { $0.pages[log]?.state } : nil
    }

    // MARK: Local edits

    @discardableResult
    func createDocument(_ title: String, id: DocumentID = DocumentID()) throws -> DocumentID {
        try state.withLock { s in
            var d = DocumentReplica(id: id)
            s.wall += 1
            let op = try d.make(.createDocument(title: title), by: replicaID, wallTime: s.wall)
            s.docs[id] = d
            s.logs[LogRef(document: id), default: []].append(op)
            return id
        }
    }

    @discardableResult
    func addPage(_ doc: DocumentID, id p: PageID = PageID()) throws -> PageID {
        try state.withLock { s in
            guard var d = s.docs[doc] else { throw LnoteError(.notFound, "no document \(doc)") }
            s.wall += 1
            let op = try d.make(.addPage(p, position: d.endPosition, canvas: .a4), by: replicaID, wallTime: s.wall)
            s.docs[doc] = d
            s.logs[LogRef(document: doc), default: []].append(op)
            s.pages[LogRef(document: doc, page: p)] = PageReplica(page: p)
            return p
        }
    }

    /// Applies one page edit made with the page's replica and logs it.
    @discardableResult
    func edit(_ log: LogRef, _ f: (inout PageReplica, ReplicaID, Int64) throws -> Op) throws -> Op {
        try state.withLock { s in
            guard var r = s.pages[log] else { throw LnoteError(.notFound, "no page log \(log)") }
            s.wall += 1
            let op = try f(&r, replicaID, s.wall)
            s.pages[log] = r
            s.logs[log, default: []].append(op)
            return op
        }
    }

    @discardableResult
    func addStroke(_ log: LogRef, _ stroke: Stroke) throws -> ElementID {
        try edit(log) { r, me, t in try r.add(.stroke(stroke), by: me, wallTime: t) }.id
    }

    /// Stores the asset locally, then adds an image element referencing it.
    @discardableResult
    func addImage(_ log: LogRef, _ bytes: [UInt8]) throws -> ElementID {
        let id = AssetID.of(bytes)
        state.withLock { $0.assets[id] = bytes }
        let image = ImageElement(asset: id, frame: QRect(x: 10, y: 10, width: 500, height: 300))
        return try edit(log) { r, me, t in try r.add(.image(image), by: me, wallTime: t) }.id
    }

    func live(_ log: LogRef) -> [ElementID] { state.withLock { $0.pages[log]?.elements.map(\.id) ?? [] } }
    var pageLogs: [LogRef] { state.withLock { $0.pages.keys.sorted() } }
    var documents: [DocumentID] { state.withLock { $0.docs.keys.sorted() } }

    /// Everything that must be equal between converged replicas.
    struct View: Equatable {
        var docs: [DocumentID: DocumentState]
        var pages: [LogRef: PageState]
        var ops: [LogRef: Set<OpID>]
    }
    /// Pages made locally that have no operation yet exist only here, so they are left out.
    var view: View {
        state.withLock { s in
            View(docs: s.docs.mapValues(\.state), pages: s.pages.filter { !$0.value.clock.isEmpty }.mapValues(\.state),
                 ops: s.logs.filter { !$0.value.isEmpty }.mapValues { Set($0.map(\.id)) })
        }
    }

    /// Where two views differ, in a few words (nil when equal).
    static func difference(_ a: View, _ b: View) -> String? {
        var out: [String] = []
        for d in Set(a.docs.keys).union(b.docs.keys) where a.docs[d] != b.docs[d] {
            out.append("document \(d): \(a.docs[d].map { "\($0.clock)" } ?? "absent") vs \(b.docs[d].map { "\($0.clock)" } ?? "absent")")
        }
        for p in Set(a.pages.keys).union(b.pages.keys) where a.pages[p] != b.pages[p] {
            out.append("page \(p): \(a.pages[p].map { "\($0.clock) \($0.elements.count) elements" } ?? "absent") vs \(b.pages[p].map { "\($0.clock) \($0.elements.count) elements" } ?? "absent")")
        }
        for l in Set(a.ops.keys).union(b.ops.keys) where a.ops[l] != b.ops[l] {
            out.append("log \(l): \(a.ops[l]?.count ?? 0) ops vs \(b.ops[l]?.count ?? 0)")
        }
        return out.isEmpty ? nil : out.sorted().joined(separator: "; ")
    }

    /// Clocks of the logs that hold operations (what a relay can know of).
    func nonEmptyClocks() async throws -> [LogClock] { try await logClocks().filter { !$0.clock.isEmpty } }
    var opCount: Int { state.withLock { $0.logs.values.reduce(0) { $0 + $1.count } } }

    // MARK: SyncableNotebook

    func logClocks() async throws -> [LogClock] {
        state.withLock { s in
            s.docs.map { LogClock(log: LogRef(document: $0.key), clock: $0.value.clock) }
                + s.pages.map { LogClock(log: $0.key, clock: $0.value.clock) }
        }.sorted { $0.log < $1.log }
    }

    func frames(in log: LogRef, notCoveredBy clock: VectorClock) async throws -> [Frame] {
        state.withLock { s in (s.logs[log] ?? []).filter { !clock.covers($0.id) }.map(OperationCodec.frame) }
    }

    func receive(_ batches: [LogBatch]) async throws -> Int {
        let decoded = try batches.map { ($0.log, try $0.ops()) }
        return try state.withLock { s in
            var new = 0
            for (log, ops) in decoded {
                var seen = Set<OpID>()
                if let p = log.page {
                    var r = s.pages[log] ?? PageReplica(page: p)
                    let fresh = ops.filter { !r.contains($0.id) && seen.insert($0.id).inserted }
                    for op in fresh {
                        for a in op.referencedAssets where s.assets[a] == nil {
                            throw LnoteError(.invalidState, "received \(op.id) before its asset \(a)")
                        }
                    }
                    try r.receive(fresh)
                    s.pages[log] = r
                    s.logs[log, default: []] += fresh
                    new += fresh.count
                } else {
                    var d = s.docs[log.document] ?? DocumentReplica(id: log.document)
                    let fresh = ops.filter { !d.contains($0.id) && seen.insert($0.id).inserted }
                    try d.receive(fresh)
                    s.docs[log.document] = d
                    s.logs[log, default: []] += fresh
                    new += fresh.count
                }
            }
            return new
        }
    }

    func hasAsset(_ id: AssetID, document: DocumentID) async throws -> Bool { state.withLock { $0.assets[id] != nil } }
    func readAsset(_ id: AssetID, document: DocumentID) async throws -> [UInt8] {
        guard let b = state.withLock({ $0.assets[id] }) else { throw LnoteError(.notFound, "no asset \(id)") }
        return b
    }
    func writeAsset(_ bytes: [UInt8], document: DocumentID) async throws -> AssetID {
        let id = AssetID.of(bytes)
        state.withLock { $0.assets[id] = bytes }
        return id
    }
    func loadRemoteState(key: String) async throws -> [UInt8]? { state.withLock { $0.remoteStates[key] } }
    func saveRemoteState(_ bytes: [UInt8], key: String) async throws { state.withLock { $0.remoteStates[key] = bytes } }
}

/// A remote that records the encoded size of every sync answer.
final class RecordingRemote: SyncRemote {
    let inner: LocalRemote
    let answers = Mutex<[SyncResponse]>([])
    var key: String { inner.key }
    init(endpoint: any SyncEndpoint, key: String = "relay") { inner = LocalRemote(key: key, endpoint: endpoint) }
    func sync(_ request: SyncRequest) async throws -> SyncResponse {
        let a = try await inner.sync(request)
        answers.withLock { $0.append(a) }
        return a
    }
    func missingAssets(_ ids: [AssetID], document: DocumentID) async throws -> [AssetID] {
        try await inner.missingAssets(ids, document: document)
    }
    func putAsset(_ bytes: [UInt8], id: AssetID, document: DocumentID) async throws {
        try await inner.putAsset(bytes, id: id, document: document)
    }
    func getAsset(_ id: AssetID, document: DocumentID) async throws -> [UInt8] {
        try await inner.getAsset(id, document: document)
    }
    var traffic: (sent: Int, received: Int) { (0, 0) }
}

extension TestNotebook {
    /// One sync of this notebook with `endpoint`.
    @discardableResult
    func sync(_ endpoint: any SyncEndpoint, key: String = "relay") async throws -> SyncReport {
        try await SyncSession(notebook: self, remote: LocalRemote(key: key, endpoint: endpoint)).run()
    }
}

/// An operation with an arbitrary id, for building logs with gaps: `setTitle` for a
/// document log, an `erase` of an element that need not exist for a page log.
func syntheticOp(replica: UInt64, counter: UInt64, page: Bool) -> Op {
    Op(id: OpID(replica: ReplicaID(replica), counter: counter), lamport: counter,
       context: VectorClock([(ReplicaID(replica), counter - 1)]), wallTime: 1_700_000_000_000,
       body: page ? .erase([OpID(replica: ReplicaID(1), counter: 1)]) : .setTitle("t\(counter)"))
}

/// Searches `haystack` for `needle`.
func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard !needle.isEmpty, haystack.count >= needle.count else { return false }
    let first = needle[0]
    var i = 0
    let last = haystack.count - needle.count
    while i <= last {
        if haystack[i] == first && haystack[i..<(i + needle.count)].elementsEqual(needle) { return true }
        i += 1
    }
    return false
}

/// The state operations give a page (replayed with the merge), as a checkpoint would carry it.
func replayedState(_ ops: [Op], page: PageID) throws -> PageState {
    var r = PageReplica(page: page)
    _ = try r.receive(ops)
    return r.state
}

/// A valid checkpoint of `log` at `clock`: the state of the operations of `ops` it covers,
/// encoded as [SYNC-40] says (covered offset 0, incarnation 0).
func checkpoint(_ log: LogRef, _ ops: [Op], at clock: VectorClock) throws -> Checkpoint {
    let state = try replayedState(ops.filter { clock.covers($0.id) }, page: log.page!)
    return Checkpoint(log: log, clock: state.clock, snapshot: PageSnapshot.encode(state, coveredLogOffset: 0, logIncarnation: 0))
}

extension TestNotebook {
    /// A checkpoint of one of this notebook's pages as it is now.
    func checkpoint(_ log: LogRef) -> Checkpoint {
        let state = self.state.withLock { $0.pages[log]!.state }
        return Checkpoint(log: log, clock: state.clock, snapshot: PageSnapshot.encode(state, coveredLogOffset: 0, logIncarnation: 0))
    }
}
