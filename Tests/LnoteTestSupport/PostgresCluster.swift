import Foundation
import Synchronization

/// A throwaway PostgreSQL cluster for tests: `initdb` in a fresh temporary directory,
/// a server listening on a Unix socket in that directory only (no TCP port to collide
/// with), so several clusters can run side by side.
///
/// As root (`initdb` refuses to run as root) the server tools run as the `postgres` user
/// through `runuser`; as any other user they run as that user. Everything the tools print
/// goes to `logPath`, and errors quote its tail. Nothing here is skipped: when PostgreSQL
/// cannot be started, `start()` throws a `PostgresCluster.Failure` saying why and how to
/// fix it. Call `remove()` when done (it stops the server first). A test process that
/// crashes leaves its server running: `pg_ctl -D /tmp/lnote-pg-XXXXXX/data stop -m fast`
/// (as `postgres`) ends it, and a server whose directory was deleted exits by itself
/// within about a minute.
///
/// The methods wait for child processes without blocking Swift's shared threads.
public final class PostgresCluster: Sendable {
    /// Why a cluster could not be started or stopped, with the log's last lines.
    public struct Failure: Error, CustomStringConvertible {
        public var message: String
        public var logTail: String
        public var description: String {
            var s = "PostgreSQL test cluster: \(message)"
            if !logTail.isEmpty { s += "\n--- last lines of the cluster log ---\n\(logTail)" }
            return s
        }
    }

    /// The temporary directory: data directory, log and socket.
    public let directory: String
    public let dataDirectory: String
    public let logPath: String
    /// Where `initdb`, `pg_ctl` live.
    public let binDirectory: String
    /// The superuser `initdb` created (trust authentication).
    public let user = "lnote"
    private let runAsPostgres: Bool
    /// Commits durable as PostgreSQL's defaults make them (fsync on), for benchmarks;
    /// otherwise fast and throwaway.
    public let durable: Bool
    /// More `-c name=value` server options (a later one wins over an earlier one).
    public let serverOptions: String

    /// `postgresql:///postgres?host=DIR&user=lnote&connect_timeout=5`.
    public var url: String {
        "postgresql:///postgres?host=\(directory)&user=\(user)&connect_timeout=5"
    }

    private init(directory: String, binDirectory: String, runAsPostgres: Bool, durable: Bool, serverOptions: String) {
        self.directory = directory
        self.dataDirectory = directory + "/data"
        self.logPath = directory + "/log"
        self.binDirectory = binDirectory
        self.runAsPostgres = runAsPostgres
        self.durable = durable
        self.serverOptions = serverOptions
    }

    /// Creates and starts a new cluster (about two seconds here).
    ///
    /// - Parameters:
    ///   - binDirectory: PostgreSQL's binaries; by default `$LNOTE_PG_BIN`, else the newest
    ///     `/usr/lib/postgresql/*/bin` holding `initdb`.
    ///   - parent: where the cluster's directory is made (/tmp: the disk; /dev/shm: tmpfs).
    ///     Its path must stay short: the socket path must fit in 107 bytes.
    ///   - durable: keep PostgreSQL's durable defaults (fsync, synchronous commit, full page
    ///     writes), as a benchmark comparing durable stores needs; tests run without them.
    ///   - serverOptions: more `-c name=value` options for the server.
    /// - Throws: `Failure` when the binaries are missing, the temporary directory cannot be
    ///   prepared, or `initdb` / `pg_ctl start` fails (with the log's tail).
    public static func start(binDirectory: String? = nil, parent: String = "/tmp", durable: Bool = false,
                             serverOptions: String = "") async throws -> PostgresCluster {
        guard let bin = binDirectory ?? findBinDirectory() else {
            throw Failure(message: "PostgreSQL server binaries not found (no /usr/lib/postgresql/*/bin/initdb, "
                + "LNOTE_PG_BIN unset). Install them with `scripts/setup.sh --deps-only` "
                + "(Debian packages postgresql and libpq-dev).", logTail: "")
        }
        let asRoot = geteuid() == 0
        if asRoot && getpwnam("postgres") == nil {
            throw Failure(message: "running as root, but there is no `postgres` user to run the server as. "
                + "Install Debian's postgresql package (`scripts/setup.sh --deps-only`), which creates it.",
                logTail: "")
        }
        // Short path: the socket path (DIR/.s.PGSQL.5432) must fit in 107 bytes.
        var template = Array("\(parent)/lnote-pg-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            throw Failure(message: "cannot create a temporary directory in \(parent): errno \(errno)", logTail: "")
        }
        let dir = String(cString: made)
        let cluster = PostgresCluster(directory: dir, binDirectory: bin, runAsPostgres: asRoot, durable: durable,
                                      serverOptions: serverOptions)
        do {
            try cluster.prepareDirectory()
            try await cluster.run("initdb", ["-D", cluster.dataDirectory, "-A", "trust", "-U", cluster.user,
                                             "-E", "UTF8", "--locale=C"] + (durable ? [] : ["--no-sync"]))
            try await cluster.start()
        } catch {
            await cluster.remove()
            throw error
        }
        return cluster
    }

    /// Starts the server on the existing data directory (after `stop()`).
    public func start() async throws {
        // Fast and throwaway: no fsync. Unix socket only. Room for many stores at once (each a
        // pool and a listening connection) while test suites run side by side.
        let options = "-k \(directory) -c listen_addresses='' "
            + (durable ? "" : "-c fsync=off -c synchronous_commit=off -c full_page_writes=off ")
            + "-c max_connections=400" + (serverOptions.isEmpty ? "" : " " + serverOptions)
        try await run("pg_ctl", ["-D", dataDirectory, "-o", options, "-l", logPath, "-w", "-t", "60", "start"])
    }

    /// Stops the server (`pg_ctl stop -m fast`: open sessions are ended).
    public func stop() async throws {
        try await run("pg_ctl", ["-D", dataDirectory, "-m", "fast", "-w", "-t", "60", "stop"])
    }

    /// `stop()` then `start()` on the same data directory: for outage tests.
    public func restart() async throws {
        try await stop()
        try await start()
    }

    /// The URL of another database of this cluster.
    public func url(database: String) -> String {
        "postgresql:///\(database)?host=\(directory)&user=\(user)&connect_timeout=5"
    }

    /// Creates an empty database with a new name (`lnote_` and 32 hex digits) through
    /// `psql`; returns its name and URL. Drop it with `dropDatabase`.
    public func createDatabase() async throws -> (name: String, url: String) {
        let name = "lnote_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        try await run("psql", ["-h", directory, "-U", user, "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-q",
                               "-c", "CREATE DATABASE \(name)"])
        return (name, url(database: name))
    }

    /// Drops a database, ending the sessions still connected to it. Never throws: it is
    /// cleanup.
    public func dropDatabase(_ name: String) async {
        try? await run("psql", ["-h", directory, "-U", user, "-d", "postgres", "-q",
                                "-c", "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"])
    }

    /// Whether the server is running (`postmaster.pid` exists).
    public var isRunning: Bool {
        FileManager.default.fileExists(atPath: dataDirectory + "/postmaster.pid")
    }

    /// Stops the server if it runs and deletes the directory. Never throws: it is cleanup.
    public func remove() async {
        if isRunning {
            do { try await stop() } catch {
                // Last resort, so the directory can go: SIGQUIT the postmaster.
                if let text = try? String(contentsOfFile: dataDirectory + "/postmaster.pid", encoding: .utf8),
                   let pid = Int32(text.split(separator: "\n").first ?? "") {
                    kill(pid, SIGQUIT)
                }
            }
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// The last `lines` lines of the log.
    public func logTail(lines: Int = 20) -> String {
        guard let data = FileManager.default.contents(atPath: logPath) else { return "(no log at \(logPath))" }
        let all = String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        return all.suffix(lines).joined(separator: "\n")
    }

    // MARK: - Internal

    /// Waits for `p` to end by polling `waitpid(WNOHANG)` between sleeps.
    ///
    /// Not `terminationHandler` nor `waitUntilExit`: `pg_ctl start` leaves a daemon behind,
    /// and Foundation did not report the exit of its parent here (the child stayed a
    /// zombie). Whoever reaps first has the status: when `waitpid` says ECHILD,
    /// Foundation took it and `terminationStatus` holds it once `isRunning` turns false.
    /// 128 + signal for a child ended by a signal, as a shell reports it.
    private static func exitStatus(of p: Process) async -> Int32 {
        let pid = p.processIdentifier
        var raw: Int32 = 0
        while true {
            let r = waitpid(pid, &raw, WNOHANG)
            if r == pid {
                let signal = raw & 0x7f
                return signal == 0 ? (raw >> 8) & 0xff : 128 + signal
            }
            if r == -1 && errno == ECHILD { break }
            try? await Task.sleep(for: .milliseconds(5))
        }
        for _ in 0..<10_000 where p.isRunning { try? await Task.sleep(for: .milliseconds(5)) }
        return p.terminationReason == .uncaughtSignal ? 128 + p.terminationStatus : p.terminationStatus
    }

    private static func findBinDirectory() -> String? {
        let fm = FileManager.default
        if let env = ProcessInfo.processInfo.environment["LNOTE_PG_BIN"], !env.isEmpty {
            return fm.isExecutableFile(atPath: env + "/initdb") ? env : nil
        }
        let root = "/usr/lib/postgresql"
        let versions = ((try? fm.contentsOfDirectory(atPath: root)) ?? [])
            .compactMap { Int($0) }.sorted(by: >)
        for v in versions where fm.isExecutableFile(atPath: "\(root)/\(v)/bin/initdb") {
            return "\(root)/\(v)/bin"
        }
        return nil
    }

    /// The directory is readable by everyone (the server user must enter it) and, as root,
    /// owned by `postgres` with the log file, so the server can write its socket and log.
    private func prepareDirectory() throws {
        guard FileManager.default.createFile(atPath: logPath, contents: nil) else {
            throw Failure(message: "cannot create \(logPath)", logTail: "")
        }
        guard chmod(directory, 0o755) == 0 else {
            throw Failure(message: "chmod 755 \(directory) failed: errno \(errno)", logTail: "")
        }
        if runAsPostgres, let pw = getpwnam("postgres") {
            for path in [directory, logPath] where chown(path, pw.pointee.pw_uid, pw.pointee.pw_gid) != 0 {
                throw Failure(message: "chown postgres \(path) failed: errno \(errno)", logTail: "")
            }
        }
    }

    /// Runs `tool` from the bin directory (through `runuser -u postgres` as root), its
    /// output appended to the log, and waits for it without blocking a shared thread.
    private func run(_ tool: String, _ arguments: [String]) async throws {
        let fd = open(logPath, O_WRONLY | O_APPEND | O_CLOEXEC)
        guard fd >= 0 else {
            throw Failure(message: "cannot open \(logPath): errno \(errno)", logTail: "")
        }
        let log = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        let header = "\n=== \(tool) \(arguments.joined(separator: " "))\n"
        log.write(Data(header.utf8))

        let p = Process()
        if runAsPostgres {
            p.executableURL = URL(fileURLWithPath: "/usr/sbin/runuser")
            p.arguments = ["-u", "postgres", "--", "\(binDirectory)/\(tool)"] + arguments
        } else {
            p.executableURL = URL(fileURLWithPath: "\(binDirectory)/\(tool)")
            p.arguments = arguments
        }
        // A directory the postgres user may enter (the test's may be /root/...).
        p.currentDirectoryURL = URL(fileURLWithPath: directory)
        p.standardInput = FileHandle.nullDevice
        p.standardOutput = log
        p.standardError = log
        do {
            try p.run()
        } catch {
            throw Failure(message: "cannot run \(p.executableURL?.path ?? tool): \(error). "
                + "Install PostgreSQL with `scripts/setup.sh --deps-only`.", logTail: logTail())
        }
        let status = await Self.exitStatus(of: p)
        try? log.close()
        guard status == 0 else {
            let how = runAsPostgres ? " (run as the postgres user through runuser)" : ""
            throw Failure(message: "`\(tool) \(arguments.joined(separator: " "))`\(how) exited with status \(status). "
                + "If PostgreSQL is missing or broken, `scripts/setup.sh --deps-only` installs it.",
                logTail: logTail())
        }
    }
}

// MARK: - One cluster per test process

extension PostgresCluster {
    /// The test process's cluster, started by the first caller (the others wait for it)
    /// and stopped and removed when the process exits: by an `atexit` handler on a normal
    /// exit, and by a watchdog child (`sh`, polling the test process once a second) when
    /// the process dies without running it (a crash, SIGKILL).
    ///
    /// Tests keep apart by creating a database of their own (`CREATE DATABASE`) and dropping
    /// it when done. When the cluster cannot be started, every caller throws the same
    /// `Failure`, so each test that needs it fails with the reason (never skips).
    public static func shared() async throws -> PostgresCluster {
        try await SharedPostgresCluster.instance.cluster()
    }
}

/// Starts the process's cluster once; see `PostgresCluster.shared()`.
actor SharedPostgresCluster {
    static let instance = SharedPostgresCluster()
    private var starting: Task<PostgresCluster, any Error>?

    func cluster() async throws -> PostgresCluster {
        if let starting { return try await starting.value }
        let task = Task { () async throws -> PostgresCluster in
            let cluster = try await PostgresCluster.start()
            SharedClusterCleanup.register(cluster)
            return cluster
        }
        starting = task
        return try await task.value
    }
}

/// What the exit handler and the watchdog stop: plain syscalls, safe in `atexit`.
enum SharedClusterCleanup {
    static let registered = Mutex<(directory: String, data: String)?>(nil)

    static func register(_ cluster: PostgresCluster) {
        registered.withLock { $0 = (cluster.directory, cluster.dataDirectory) }
        atexit { SharedClusterCleanup.stopAtExit() }
        startWatchdog(cluster)
    }

    /// SIGINT to the postmaster (PostgreSQL's fast shutdown), a wait of up to 20 s for it
    /// to go, then the directory is removed.
    static func stopAtExit() {
        guard let (directory, data) = registered.withLock({ r in defer { r = nil }; return r }) else { return }
        if let text = try? String(contentsOfFile: data + "/postmaster.pid", encoding: .utf8),
           let pid = Int32(text.split(separator: "\n").first ?? "") {
            kill(pid, SIGINT)
            for _ in 0..<2000 where kill(pid, 0) == 0 { usleep(10_000) }
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A shell that outlives this process by at most a second and then does what
    /// `stopAtExit` does (nothing, when it already ran: the pid file is gone).
    private static func startWatchdog(_ cluster: PostgresCluster) {
        let script = """
            while kill -0 \(getpid()) 2>/dev/null; do sleep 1; done
            pid=$(head -n 1 '\(cluster.dataDirectory)/postmaster.pid' 2>/dev/null)
            if [ -n "$pid" ]; then
              kill -INT "$pid" 2>/dev/null
              i=0; while kill -0 "$pid" 2>/dev/null && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done
            fi
            rm -rf '\(cluster.directory)'
            """
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/sh")
        p.arguments = ["-c", script]
        p.standardInput = FileHandle.nullDevice
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try? p.run()
    }
}
