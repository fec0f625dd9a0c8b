#if canImport(Glibc)
import Glibc
#endif
import Foundation
import LnoteModel
import LnoteRelayPostgres
import LnoteServer
import LnoteStore
import LnoteSync

/// `lnote relay` processes of cases 15 and 16: one or several on one database, each on its
/// own port of 127.0.0.1, the release `lnote` beside this program (as case 10).
final class BenchRelay: @unchecked Sendable {
    let name: String
    let processes: [Process]
    /// `http://127.0.0.1:PORT`, one per process.
    let baseURLs: [String]

    private init(name: String, processes: [Process], baseURLs: [String]) {
        self.name = name
        self.processes = processes
        self.baseURLs = baseURLs
    }

    /// Starts `count` processes of `lnote relay STORE…` and waits for their `url:` lines.
    @MainActor
    static func start(_ lnote: String, store: [String], count: Int = 1, dir: String, name: String) async throws -> BenchRelay {
        var processes: [Process] = []
        var urls: [String] = []
        do {
            for i in 0..<count {
                let log = dir + "/\(name)-\(i)"
                let p = try Bench.start(lnote, ["relay"] + store + ["--port", "0", "--max-connections-per-ip", "0"], log: log)
                processes.append(p)
                urls.append(try await Bench.waitForLine(prefix: "url: ", in: log + ".out"))
            }
        } catch {
            for p in processes where p.isRunning { kill(p.processIdentifier, SIGKILL) }
            throw LnoteError(.network, "\(name): lnote relay did not start: \(error) "
                             + Bench.tail(dir + "/\(name)-\(processes.count - 1).err"))
        }
        return BenchRelay(name: name, processes: processes, baseURLs: urls)
    }

    /// CPU seconds (utime + stime) of the relay's processes so far.
    func cpuSeconds() -> Double {
        processes.reduce(0) { $0 + (ProcStat.read($1.processIdentifier)?.cpu ?? 0) }
    }

    /// SIGTERM, then waits for the processes to end.
    func stop() {
        for p in processes where p.isRunning { kill(p.processIdentifier, SIGTERM) }
        for p in processes { p.waitUntilExit() }
    }

    /// Creates `count` notebooks, one token each (device `client-I`), in a relay database
    /// before any relay process serves it; returns (notebook, token) pairs.
    static func makeNotebooks(_ store: RelayStore, count: Int) throws -> [(notebook: NotebookID, token: String)] {
        defer { try? store.close() }
        return try (0..<count).map { i in
            let nb = try store.createNotebook()
            return (nb, try store.createToken(notebook: nb, label: "bench", device: "client-\(i)"))
        }
    }

    /// One notebook with one token per device (nil: a token for any device).
    static func makeNotebook(_ store: RelayStore, devices: [String?]) throws -> (notebook: NotebookID, tokens: [String]) {
        defer { try? store.close() }
        let nb = try store.createNotebook()
        return (nb, try devices.map { try store.createToken(notebook: nb, label: "bench", device: $0) })
    }

    /// The same on a PostgreSQL relay database (schema created as `lnote relay migrate` does).
    static func makeNotebooks(postgres url: String, count: Int) throws -> [(notebook: NotebookID, token: String)] {
        try makeNotebooks(try RelayStore(database: try RelayPostgresDatabase(url: url, poolSize: 1)), count: count)
    }
}

/// One client of case 15: a notebook folder with one document, kept open as an app keeps
/// it, and its own `HTTPRemote` (libcurl) to one relay process. Used by one task at a time.
final class PushClient: @unchecked Sendable {
    let notebook: Notebook
    let document: Document
    let page: PageID
    let remote: HTTPRemote
    private let strokes: [Stroke]
    private var next = 0
    /// Per sync: operations the relay accepted, round trips.
    private(set) var accepted = 0
    private(set) var syncs = 0
    private(set) var roundTrips: [Int] = []

    static var storeOptions: StoreOptions {
        var o = StoreOptions()
        o.autosave = false
        return o
    }

    /// Opens (creates) the folder, makes its document with a first stroke and syncs it once,
    /// so that every later sync pushes exactly one new stroke.
    init(folder: String, url: String, token: String, strokes: [Stroke]) async throws {
        self.strokes = strokes
        notebook = try await Notebook.open(at: folder, create: true, options: Self.storeOptions)
        document = try await notebook.createDocument(title: "bench")
        page = await document.pageList[0].id
        _ = try await document.addStroke(strokes[0], to: page)
        next = 1
        remote = try HTTPRemote(url: url, options: .init(token: token))
        _ = try await SyncSession(notebook: notebook, remote: remote).run()
    }

    /// One new stroke (a durable append to the client's page log), then one sync.
    func push() async throws {
        _ = try await document.addStroke(strokes[next % strokes.count], to: page)
        next += 1
        try await sync()
    }

    /// One sync (nothing to push when called alone).
    func sync() async throws {
        let r = try await SyncSession(notebook: notebook, remote: remote).run()
        accepted += r.opsAccepted
        syncs += 1
        roundTrips.append(r.roundTrips)
    }

    func close() async {
        try? remote.close()
        try? await notebook.close()
    }
}
