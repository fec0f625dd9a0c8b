import LnoteModel

/// What tells two operations with one id apart ([SYNC-50], [SYNC-52]).
public enum ContentHash {
    /// An operation's content hash ([SYNC-50]): the SHA-256 of the type byte and payload of
    /// its frame in hash form (`OperationCodec.Form.hash`). Every frame but a compact stroke
    /// (`addStroke` 0x06, `addStroke2` 0x09, `addStroke3` 0x0A) is its own hash form and is
    /// hashed as it is; those three are decoded and their operation re-encoded as an `add`
    /// (0x01), so an operation has the same hash in every form ([LOG-22]). One that does not
    /// decode (refused at every door anyway) is hashed as it is: no valid operation's hash
    /// starts from the type byte 0x06, 0x09 or 0x0A, so it never equals one.
    public static func of(_ frame: Frame) -> [UInt8] {
        guard OperationCodec.isCompactStroke(frame.type) else { return raw(frame) }
        guard let op = try? OperationCodec.decode(frame) else { return raw(frame) }
        return of(op)
    }

    /// The content hash of `frame`, already decoded to `op`: no second decode of an
    /// `addStroke`.
    public static func of(_ frame: Frame, decoded op: Op) -> [UInt8] {
        OperationCodec.isCompactStroke(frame.type) ? of(op) : raw(frame)
    }

    public static func of(_ op: Op) -> [UInt8] { raw(OperationCodec.frame(op, form: .hash)) }

    /// SHA-256 of the type byte followed by the payload.
    static func raw(_ frame: Frame) -> [UInt8] {
        var h = SHA256()
        h.update([frame.type])
        h.update(frame.payload)
        return h.finalize()
    }

    /// The chain digest of a replica's operations in one log, 16 bytes: `d₀` is 16 zero
    /// bytes and `dₖ = SHA-256(dₖ₋₁ ‖ first 16 bytes of the content hash of operation k)`,
    /// first 16 bytes. Two sides holding counters 1…k of a replica agree on `dₖ` exactly when
    /// they hold the same operations ([SYNC-52]).
    public static let emptyChain = [UInt8](repeating: 0, count: 16)

    public static func chain(_ previous: [UInt8], _ contentHash: [UInt8]) -> [UInt8] {
        var h = SHA256()
        h.update(previous)
        h.update(Array(contentHash.prefix(16)))
        return Array(h.finalize().prefix(16))
    }
}

/// A replica's chain digest in one log ([SYNC-52]): its operations `1…counter` hashed in order
/// (`ContentHash.chain`). The store computes and caches them; sync bodies carry them.
public struct ChainDigest: Sendable, Hashable {
    public var replica: ReplicaID
    public var counter: UInt64
    /// 16 bytes.
    public var digest: [UInt8]
    public init(replica: ReplicaID, counter: UInt64, digest: [UInt8]) {
        self.replica = replica
        self.counter = counter
        self.digest = digest
    }
}
