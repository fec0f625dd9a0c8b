import LnoteModel

/// The error codes of the sync protocol's JSON error body, `{"error": CODE, "message": …}`
/// (`Protocol/sync-protocol.md` [SYNC-22]): one list for the servers that write them and
/// the client that reads them.
public enum SyncErrorCode: String, Sendable, CaseIterable {
    /// 400: a malformed body, a bad CRC, a bad id (the message names the byte offset).
    case badRequest = "bad_request"
    /// 401: a missing or wrong token.
    case unauthorized
    /// 401: a token the relay knows, whose time ran out ([SYNC-29]).
    case tokenExpired = "token_expired"
    /// 403: a token of another notebook, or a push holding new operations of a replica that
    /// another device owns ([SYNC-57]).
    case forbidden
    /// 400: a checkpoint the relay does not keep ([SYNC-59]).
    case badCheckpoint = "bad_checkpoint"
    /// 404: no such notebook, route or asset.
    case notFound = "not_found"
    /// 405: a route that exists, with another method.
    case methodNotAllowed = "method_not_allowed"
    /// 409: an operation of the push references an asset the server does not hold ([SYNC-8]).
    case assetMissing = "asset_missing"
    /// 409: the operations the client lacks include some the server never held: it was
    /// installed from a checkpoint ([SYNC-43]).
    case historyNotHeld = "history_not_held"
    /// 413: a body or a part of it over a limit ([SYNC-24]).
    case tooLarge = "too_large"
    /// 426: a protocol or body version the server does not speak ([SYNC-21]).
    case unsupportedVersion = "unsupported_version"
    /// 500: the server failed (storage, I/O).
    case serverError = "server_error"
    /// 503: the server is shutting down (a long poll it held, or a request that came while it
    /// stopped, [SYNC-74]); sent with `Retry-After`. Transient: the client retries ([SYNC-26]).
    case unavailable

    /// The HTTP status that carries this code.
    public var status: Int {
        switch self {
        case .badRequest, .badCheckpoint: 400
        case .unauthorized, .tokenExpired: 401
        case .forbidden: 403
        case .notFound: 404
        case .methodNotAllowed: 405
        case .assetMissing, .historyNotHeld: 409
        case .tooLarge: 413
        case .unsupportedVersion: 426
        case .serverError: 500
        case .unavailable: 503
        }
    }

    /// The `LnoteError` code a client reports for this error: the code the same failure has
    /// when the other side is reached in-process (a folder), so that callers match on one
    /// code whatever the transport.
    public var clientCode: LnoteError.Code {
        switch self {
        case .badRequest, .badCheckpoint, .methodNotAllowed: .invalidArgument
        case .unauthorized, .tokenExpired, .forbidden: .unauthorized
        // An asset the operation names does not exist there, as [PKG-14] says of a
        // package that lacks one.
        case .notFound, .assetMissing: .notFound
        case .historyNotHeld: .invalidState
        case .tooLarge: .limitExceeded
        case .unsupportedVersion: .protocolMismatch
        case .serverError, .unavailable: .network
        }
    }
}

/// A sync request refused because of what the server holds rather than because of its
/// bytes: the push names an asset not uploaded first, or the pull would need history the
/// server never held. The HTTP binding answers it 409 with `reason.code` as the error code
/// ([SYNC-22]); a remote reached in-process reports `error`.
///
/// Endpoints (`SyncEndpoint.sync`, `RelayStore.sync`) throw it so that the error code is a
/// value, never recovered from a message; clients (`SyncRemote`, `SyncSession`) throw the
/// `LnoteError`, whose code is `reason.code.clientCode`. An `assetMissing` refusal stored
/// nothing; a `historyNotHeld` one is found while the answer is built, after the push was
/// stored ([SYNC-22]).
public struct SyncRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Reason: Sendable, Equatable {
        /// Operation `operation` of `log` references `asset`, which the server does not hold.
        case assetMissing(asset: AssetID, operation: OpID, log: LogRef)
        /// The server cannot give the operations of `log` that the client lacks: it was
        /// installed from a checkpoint and never held `operation`.
        case historyNotHeld(log: LogRef, operation: OpID)

        public var code: SyncErrorCode {
            switch self {
            case .assetMissing: .assetMissing
            case .historyNotHeld: .historyNotHeld
            }
        }
    }

    public var reason: Reason
    /// What a client reports: code `reason.code.clientCode`, a message naming the log, the
    /// operation and (for an asset) the asset.
    public var error: LnoteError

    public init(_ reason: Reason, message: String, path: String? = nil,
                file: StaticString = #fileID, line: UInt = #line) {
        self.reason = reason
        self.error = LnoteError(reason.code.clientCode, message, path: path, file: file, line: line)
    }

    /// An operation that references an asset the server does not hold ([SYNC-8]).
    public static func assetMissing(_ asset: AssetID, operation: OpID, log: LogRef,
                                    file: StaticString = #fileID, line: UInt = #line) -> SyncRefusal {
        SyncRefusal(.assetMissing(asset: asset, operation: operation, log: log),
                    message: "operation \(operation) of log \(log) references asset \(asset), which was not uploaded first",
                    path: "documents/\(log.document)/assets/\(asset)", file: file, line: line)
    }

    public var description: String { "\(reason.code.rawValue): \(error)" }

    public static func == (l: SyncRefusal, r: SyncRefusal) -> Bool { l.reason == r.reason }
}

/// A push refused because it holds new operations authored under a replica id that another
/// device owns ([SYNC-57]): the 403's body names the replica and its owner. A client drops
/// that replica's operations from its push and sends the rest (they reach the relay from
/// their author); its own replica named here means another device holds its id.
public struct OwnerRefusal: Error, Sendable, CustomStringConvertible {
    public var replica: ReplicaID
    public var device: String
    /// The error the client reports when it cannot go on without that replica's operations.
    public var error: LnoteError
    public init(replica: ReplicaID, device: String, error: LnoteError) {
        self.replica = replica
        self.device = device
        self.error = error
    }
    public var description: String { error.description }
}
