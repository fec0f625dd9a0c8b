import Foundation

/// `lnote-load`'s command line: `--clients K --seconds T --kills N --seed S [--lnote PATH] [--keep]
/// [--postgres [--relays R] [--db-restart]]`.
struct LoadOptions: Sendable {
    var clients = 4
    var seconds = 20
    /// Relay kills over the run: `--kills`, else 3 with one relay, one every 4 s with several.
    var kills: Int { killsGiven ?? (relays > 1 ? max(1, seconds / 4) : 3) }
    var killsGiven: Int?
    /// The relays keep their data in a throwaway PostgreSQL cluster this program starts
    /// (initdb in a temporary directory, Unix socket only), not in an SQLite file.
    var postgres = false
    /// Relay processes on the one database (more than one needs `--postgres`); each sync
    /// round of each client goes to one of them, chosen at random.
    var relays = 1
    /// Restart PostgreSQL once mid-run (`pg_ctl stop -m fast`, a pause, `pg_ctl start`).
    var dbRestart = false
    var seed: UInt64 = UInt64.random(in: 1...999_999_999)
    /// The `lnote` binary that runs the relay; default: the one next to `lnote-load`.
    var lnote: String?
    /// Keep the temporary directory (clients' folders, relay database and log) at the end.
    var keep = false
    /// Checks the checker: at the first kill, delete one acknowledged operation from the
    /// relay's database while the relay is down (a relay that lost an acknowledged write). The
    /// run must then report a loss and fail. Not in the usage text: for the smoke test.
    var injectLoss = false

    static let usage = """
        usage: lnote-load [--clients K] [--seconds T] [--kills N] [--seed S] [--lnote PATH] [--keep]
                          [--postgres [--relays R] [--db-restart]]
          K clients (default 4) make random edits and sync with one `lnote relay` for T seconds
          (default 20) while the relay is SIGKILLed N times (default 3) at random moments and
          restarted on the same database and port; then every client syncs until nothing
          moves, and the run is checked: every acknowledged operation on every client and on
          the relay, nothing no client made, all clients' canonical JSON identical.
          --postgres: the relay keeps its data in a throwaway PostgreSQL cluster started here
          (initdb in a temporary directory, Unix socket only, removed at the end), not SQLite.
          --relays R: R `lnote relay --postgres` processes on that one database, each on its
          own port; each client sends each sync round to one of them chosen at random; the
          kills hit one process at a time, chosen at random (default N: one every 4 s).
          --db-restart: PostgreSQL is stopped (pg_ctl stop -m fast) once mid-run and started
          again after a pause; rounds that overlap it may fail, the clients must converge.
          Exit status 0: all held; 1: a check failed; 2: usage.
        """

    struct UsageError: Error, CustomStringConvertible { var description: String }

    init(_ arguments: [String]) throws {
        var i = 0
        func value(_ name: String) throws -> String {
            i += 1
            guard i < arguments.count else { throw UsageError(description: "\(name) needs a value") }
            return arguments[i]
        }
        func number(_ name: String, _ range: ClosedRange<Int>) throws -> Int {
            let v = try value(name)
            guard let n = Int(v), range.contains(n) else {
                throw UsageError(description: "\(name) must be a whole number in \(range.lowerBound)...\(range.upperBound), not \(v)")
            }
            return n
        }
        while i < arguments.count {
            switch arguments[i] {
            case "--clients": clients = try number("--clients", 1...256)
            case "--seconds": seconds = try number("--seconds", 1...86_400)
            case "--kills": killsGiven = try number("--kills", 0...10_000)
            case "--postgres": postgres = true
            case "--relays": relays = try number("--relays", 1...16)
            case "--db-restart": dbRestart = true
            case "--seed":
                let v = try value("--seed")
                guard let s = UInt64(v) else { throw UsageError(description: "--seed must be an unsigned integer, not \(v)") }
                seed = s
            case "--lnote": lnote = try value("--lnote")
            case "--keep": keep = true
            case "--inject-loss": injectLoss = true
            case "-h", "--help": throw UsageError(description: "")
            default: throw UsageError(description: "unknown argument \(arguments[i])")
            }
            i += 1
        }
        if relays > 1 && !postgres {
            throw UsageError(description: "--relays \(relays) needs --postgres (relay processes share one PostgreSQL database; an SQLite relay is one process)")
        }
        if dbRestart && !postgres { throw UsageError(description: "--db-restart needs --postgres") }
    }

    /// The arguments that rerun this configuration (with its seed).
    var rerun: String {
        var s = "lnote-load --clients \(clients) --seconds \(seconds) --kills \(kills) --seed \(seed)"
        if postgres { s += " --postgres --relays \(relays)" }
        if dbRestart { s += " --db-restart" }
        return s
    }
}
