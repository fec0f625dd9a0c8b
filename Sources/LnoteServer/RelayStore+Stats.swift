import LnoteModel

/// What a relay's database holds, and who serves it (`lnote relay stats`).
public struct RelayStats: Sendable, Equatable {
    /// The database (a file's path, or a connection string without its password).
    public var location: String
    public var notebooks: Int64 = 0
    /// Operations held, and the bytes of their frames as received (`ops.frame`).
    public var operations: Int64 = 0
    public var operationBytes: Int64 = 0
    /// Assets held, and their content's bytes (`assets.bytes`).
    public var assets: Int64 = 0
    public var assetBytes: Int64 = 0
    /// Checkpoints held, and the bytes of their snapshots and clocks
    /// (`checkpoints.snapshot` + `checkpoints.clock`).
    public var checkpoints: Int64 = 0
    public var checkpointBytes: Int64 = 0
    /// Tokens (their hashes: the tokens are never stored), expired ones included.
    public var tokens: Int64 = 0
    /// The greatest change sequence held (0 with no operation).
    public var lastSequence: Int64 = 0
    /// Relay processes counted: those whose heartbeat is at most this old.
    public var windowSeconds: Int64 = 60
    /// The time the window ends at, in milliseconds since 1970: the database's clock when
    /// the stats were read (heartbeats are written by it), unless the caller gave one.
    public var now: Int64 = 0
    /// The relay processes seen in the window (`relay_presence`), by host, port, id.
    public var processes: [RelayProcessPresence] = []
    /// Relay processes whose row is older than the window (died, or stopped without a
    /// clean shutdown); not counted.
    public var staleProcesses: Int64 = 0

    /// The relay processes seen in the window.
    public var relayProcesses: Int { processes.count }
    /// The long polls ([SYNC-71]) those processes hold: the connected watchers.
    public var longPolls: Int64 { processes.reduce(0) { $0 + $1.longPolls } }

    public init(location: String) { self.location = location }
}

extension RelayStore {
    /// Counts the relay's rows and bytes in one consistent read, and the relay processes
    /// whose presence row ([`RelayPresence`]) has a heartbeat within `windowSeconds` of
    /// `now` (milliseconds since 1970; nil: the database's clock, which wrote the
    /// heartbeats, so this host's clock does not matter), with the long polls they hold.
    ///
    /// Sums read every row of `ops`, `assets` and `checkpoints` (a full scan: an operator's
    /// command, not a request's).
    /// - Throws: `.database` for storage failures.
    public func stats(windowSeconds: Int64 = 60, now given: Int64? = nil) throws -> RelayStats {
        try database.transaction(.read) { tx in
            var s = RelayStats(location: path)
            s.windowSeconds = windowSeconds
            guard let now = try given ?? tx.query("SELECT \(database.nowMillisecondsSQL)").first?.first?.int64 else {
                throw LnoteError(.database, "the database did not give its clock", path: path)
            }
            s.now = now
            func ints(_ sql: String) throws -> [Int64] {
                guard let row = try tx.query(sql).first else { return [] }
                return row.map { $0.int64 ?? 0 }
            }
            s.notebooks = try ints("SELECT count(*) FROM notebooks").first ?? 0
            let ops = try ints("SELECT count(*), coalesce(sum(length(frame)), 0), coalesce(max(seq), 0) FROM ops")
            (s.operations, s.operationBytes, s.lastSequence) = (ops[0], ops[1], ops[2])
            let assets = try ints("SELECT count(*), coalesce(sum(length(bytes)), 0) FROM assets")
            (s.assets, s.assetBytes) = (assets[0], assets[1])
            let checkpoints = try ints("SELECT count(*), coalesce(sum(length(snapshot) + length(clock)), 0) FROM checkpoints")
            (s.checkpoints, s.checkpointBytes) = (checkpoints[0], checkpoints[1])
            s.tokens = try ints("SELECT count(*) FROM tokens").first ?? 0
            let since = now - windowSeconds * 1000
            for r in try tx.query("SELECT id, host, pid, port, started, heartbeat, long_polls FROM relay_presence") {
                guard let id = r[0].string, let host = r[1].string, let pid = r[2].int64, let port = r[3].int64,
                      let started = r[4].int64, let heartbeat = r[5].int64, let polls = r[6].int64 else {
                    throw LnoteError(.corrupt, "malformed relay_presence row in the relay store", path: path)
                }
                if heartbeat >= since {
                    s.processes.append(RelayProcessPresence(id: id, host: host, pid: pid, port: port, started: started,
                                                            heartbeat: heartbeat, longPolls: polls))
                } else {
                    s.staleProcesses += 1
                }
            }
            s.processes.sort { ($0.host, $0.port, $0.id) < ($1.host, $1.port, $1.id) }
            return s
        }
    }
}
