import LnoteModel
import LnoteSync

/// A request a server refuses because of what it would let in (`Protocol/sync-protocol.md`
/// §6), with the code of its JSON error body ([SYNC-22]). Nothing of a refused request is
/// stored.
///
/// The servers throw it so that the code is a value; `SyncHTTPService` answers it with
/// `reason.status` and `reason.code`, and a caller in-process reads `error`, an
/// `LnoteError` whose code is the one a client reports for that status.
public struct ServerRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Reason: Sendable, Equatable {
        /// [SYNC-57] The push holds `operation` of `log`, which the server does not hold
        /// byte for byte, authored under `replica`, which `owner` owns (a device of the
        /// relay, or the peer server itself).
        case replicaOwned(replica: ReplicaID, owner: String, operation: OpID, log: LogRef)
        /// [SYNC-59] The checkpoint of `log` is not what the operations the relay holds give.
        case badCheckpoint(log: LogRef)

        /// The `error` code of the JSON body.
        public var code: String {
            switch self {
            case .replicaOwned: SyncErrorCode.forbidden.rawValue
            case .badCheckpoint: "bad_checkpoint"
            }
        }

        /// The HTTP status that carries `code`.
        public var status: Int {
            switch self {
            case .replicaOwned: 403
            case .badCheckpoint: 400
            }
        }
    }

    public var reason: Reason
    /// What an in-process caller reports: `.unauthorized` for an owned replica (as a client
    /// reports 403), `.invalidArgument` for a bad checkpoint (as it reports 400).
    public var error: LnoteError

    public init(_ reason: Reason, message: String, path: String? = nil, file: StaticString = #fileID, line: UInt = #line) {
        self.reason = reason
        let code: LnoteError.Code = switch reason {
        case .replicaOwned: .unauthorized
        case .badCheckpoint: .invalidArgument
        }
        error = LnoteError(code, message, path: path, file: file, line: line)
    }

    /// [SYNC-57] A new operation authored under a replica another device owns.
    public static func replicaOwned(_ replica: ReplicaID, owner: String, operation: OpID, log: LogRef,
                                    file: StaticString = #fileID, line: UInt = #line) -> ServerRefusal {
        ServerRefusal(.replicaOwned(replica: replica, owner: owner, operation: operation, log: log),
                      message: "replica \(replica) is owned by device \"\(owner)\": the push holds its operation "
                          + "\(operation) of log \(log), which this server does not hold; nothing was stored",
                      path: "push", file: file, line: line)
    }

    /// [SYNC-59] A checkpoint the relay does not keep, and why.
    public static func badCheckpoint(_ log: LogRef, _ why: String,
                                     file: StaticString = #fileID, line: UInt = #line) -> ServerRefusal {
        ServerRefusal(.badCheckpoint(log: log), message: "checkpoint of log \(log) refused: \(why)",
                      path: "checkpoints/\(log)", file: file, line: line)
    }

    public var description: String { "\(reason.code): \(error)" }

    public static func == (l: ServerRefusal, r: ServerRefusal) -> Bool { l.reason == r.reason }
}
