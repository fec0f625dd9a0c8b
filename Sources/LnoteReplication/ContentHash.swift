import LnoteModel

/// What tells two operations with one id apart ([SYNC-50], [SYNC-52]).
public enum ContentHash {
    /// An operation's content hash: the SHA-256 of its frame's type byte followed by its
    /// payload (the frame without its length and CRC). Operations have one encoding
    /// ([LOG-22]), so equal operations have equal hashes wherever they are stored.
    public static func of(_ frame: Frame) -> [UInt8] {
        var h = SHA256()
        h.update([frame.type])
        h.update(frame.payload)
        return h.finalize()
    }

    public static func of(_ op: Op) -> [UInt8] { of(OperationCodec.frame(op)) }

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
