#if canImport(Glibc)
import Glibc
#endif
import Foundation
import LnoteModel
import LnotePostgres
import Synchronization
import Dispatch
import LnoteTestSupport

/// A throwaway PostgreSQL cluster for cases 15 and 16: the tests' `PostgresCluster`
/// (`initdb` as the `postgres` user when root, a Unix socket only, removed by `remove()`),
/// started durable, plus what the cases read of it (pg_stat_statements, the server's CPU).
///
/// One difference from the tests' cluster, on purpose: the tests run with `fsync=off` and
/// `synchronous_commit=off` (speed, nothing to keep); this one keeps PostgreSQL's defaults
/// (`fsync=on`, `synchronous_commit=on`), so that a commit is durable as the SQLite relay's
/// is (`synchronous = FULL`) and the comparison is between durable stores. The data
/// directory is on the same disk as the bench's workspace (/tmp).
final class BenchPostgres: @unchecked Sendable {
    let cluster: PostgresCluster
    var directory: String { cluster.directory }
    var data: String { cluster.dataDirectory }

    /// `postgresql:///DB?host=DIR&user=lnote`.
    func url(_ database: String = "postgres") -> String { cluster.url(database: database) }

    private init(cluster: PostgresCluster) { self.cluster = cluster }

    /// initdb and start (about 2 s) in a new directory under `parent` (/tmp: the disk;
    /// /dev/shm: tmpfs, where fsync costs nothing); throws with the log's tail when it cannot.
    /// With `statements`, the server preloads pg_stat_statements (per-statement execution
    /// times, read by `statementSummary`; a small cost on every statement).
    static func start(parent: String = "/tmp", statements: Bool = false) async throws -> BenchPostgres {
        // Room for one pull's statements in pg_stat_statements.
        let preload = statements ? " -c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.max=60000" : ""
        do {
            return BenchPostgres(cluster: try await PostgresCluster.start(parent: parent, durable: true,
                                                                          serverOptions: "-c max_connections=200" + preload))
        } catch let f as PostgresCluster.Failure {
            throw LnoteError(.io, "PostgreSQL: \(f.message)\n\(f.logTail)")
        }
    }

    /// A new empty database; its URL.
    func createDatabase(_ name: String) throws -> String {
        let c = try PGConnection(url: url())
        defer { c.close() }
        try c.execute("CREATE DATABASE \(name)")
        return url(name)
    }

    /// pg_stat_statements in database `url` (created there; the server must preload it).
    func resetStatements(_ url: String) throws {
        let c = try PGConnection(url: url)
        defer { c.close() }
        try c.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        try c.execute("SELECT pg_stat_statements_reset()")
    }

    /// The statements database `url` ran since the reset, cursor names folded together
    /// (`lnote_cursor_N`): the total ("N statements, T ms of execution") and the `limit` most
    /// frequent kinds ("calls × statement: ms").
    func statementSummary(_ url: String, limit: Int = 4) throws -> String {
        let c = try PGConnection(url: url)
        defer { c.close() }
        let kinds = try c.execute("""
            SELECT sum(calls)::bigint, (sum(total_exec_time) * 1000)::bigint,
                   left(regexp_replace(regexp_replace(query, 'lnote_cursor_[0-9]+', 'lnote_cursor_N', 'g'), '\\s+', ' ', 'g'), 100) AS q
            FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
            AND query NOT LIKE '%pg_stat_statements%'
            GROUP BY q ORDER BY 1 DESC
            """)
        var calls: Int64 = 0, micros: Int64 = 0
        var top: [String] = []
        for i in 0..<kinds.rowCount {
            let n = try kinds.int64(i, 0), us = try kinds.int64(i, 1)
            calls += n
            micros += us
            if i < limit { top.append("\(n) × \(try kinds.string(i, 2)) (" + String(format: "%.0f ms", Double(us) / 1000) + ")") }
        }
        return "\(calls) statements, " + String(format: "%.0f ms", Double(micros) / 1000) + " of execution in the server; most frequent: "
            + top.joined(separator: "; ")
    }

    /// The postmaster's pid (first line of postmaster.pid).
    var postmasterPID: Int32? {
        (try? String(contentsOfFile: data + "/postmaster.pid", encoding: .utf8))
            .flatMap { Int32($0.split(separator: "\n").first ?? "") }
    }

    /// CPU seconds of the whole server: the postmaster, its live children (backends, WAL
    /// writer, checkpointer…) and the children it has reaped (cutime + cstime).
    func cpuSeconds() -> Double {
        guard let pm = postmasterPID else { return .nan }
        var total = ProcStat.read(pm).map { $0.cpu + $0.childrenCPU } ?? 0
        for pid in ProcStat.children(of: pm) { total += ProcStat.read(pid)?.cpu ?? 0 }
        return total
    }

    /// Stops the server (fast) and deletes the directory; never throws.
    func remove() async { await cluster.remove() }
}

/// `/proc/PID/stat`: CPU seconds of a process (utime + stime) and of its reaped children.
struct ProcStat {
    var ppid: Int32
    var cpu: Double
    var childrenCPU: Double

    static func read(_ pid: Int32) -> ProcStat? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return nil }
        // After the name: fields 3… ; ppid is field 4, utime 14, stime 15, cutime 16, cstime 17.
        let f = text[text.index(after: close)...].split(separator: " ")
        guard f.count > 14, let ppid = Int32(f[1]), let u = Double(f[11]), let s = Double(f[12]),
              let cu = Double(f[13]), let cs = Double(f[14]) else { return nil }
        let hz = Double(sysconf(Int32(_SC_CLK_TCK)))
        return ProcStat(ppid: ppid, cpu: (u + s) / hz, childrenCPU: (cu + cs) / hz)
    }

    /// Live processes whose parent is `parent`.
    static func children(of parent: Int32) -> [Int32] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { Int32($0) }
            .filter { read($0)?.ppid == parent }
    }

    /// CPU seconds of this process (every thread), from getrusage.
    static func selfCPU() -> Double {
        var u = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &u)
        return Double(u.ru_utime.tv_sec) + Double(u.ru_utime.tv_usec) / 1e6
            + Double(u.ru_stime.tv_sec) + Double(u.ru_stime.tv_usec) / 1e6
    }
}

/// What PostgreSQL's client backends of one database are doing, sampled from
/// `pg_stat_activity` every `interval` on a thread of its own (one connection of its own,
/// left out of the counts): per sample and backend, `active` with its wait event
/// (`Lock:transactionid`, `IO:WALSync`, `LWLock:WALWrite`, …, or `running` when it waits on
/// nothing: on the CPU), or its state when not active (`idle`: waiting for the relay's next
/// statement outside a transaction; `idle in transaction`: inside one, waiting for the relay).
final class WaitSampler: @unchecked Sendable {
    private let state = Mutex<(stop: Bool, counts: [String: Int], samples: Int, error: String?)>((false, [:], 0, nil))
    private let done = DispatchSemaphore(value: 0)

    init(url: String, interval: Duration = .milliseconds(10)) {
        let micros = UInt32(interval.components.attoseconds / 1_000_000_000_000) + UInt32(interval.components.seconds) * 1_000_000
        let thread = Thread { [self] in
            defer { done.signal() }
            do {
                let c = try PGConnection(url: url)
                defer { c.close() }
                while !state.withLock({ $0.stop }) {
                    let r = try c.execute("""
                        SELECT state, wait_event_type, wait_event FROM pg_stat_activity
                        WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND datname = current_database()
                        """)
                    var keys: [String] = []
                    for i in 0..<r.rowCount {
                        let st = (try? r.isNull(i, 0)) == false ? (try r.string(i, 0)) : "?"
                        if st == "active" {
                            if (try? r.isNull(i, 1)) == false {
                                keys.append("active \(try r.string(i, 1)):\(try r.string(i, 2))")
                            } else {
                                keys.append("active, running")
                            }
                        } else {
                            keys.append(st)
                        }
                    }
                    state.withLock { s in
                        s.samples += 1
                        for k in keys { s.counts[k, default: 0] += 1 }
                    }
                    usleep(micros)
                }
            } catch {
                state.withLock { $0.error = "\(error)" }
            }
        }
        thread.start()
    }

    /// Stops sampling; the share of backend-samples per key, largest first, as text.
    func stop() -> String {
        state.withLock { $0.stop = true }
        done.wait()
        return state.withLock { s in
            if let e = s.error { return "sampling failed: \(e)" }
            let total = s.counts.values.reduce(0, +)
            guard total > 0 else { return "no backend seen in \(s.samples) samples" }
            let parts = s.counts.sorted { $0.value > $1.value }.map { "\($0.key) " + String(format: "%.0f%%", Double($0.value) * 100 / Double(total)) }
            return "\(s.samples) samples, \(String(format: "%.1f", Double(total) / Double(s.samples))) backends each: " + parts.joined(separator: ", ")
        }
    }
}
