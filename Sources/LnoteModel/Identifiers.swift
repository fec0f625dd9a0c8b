import Foundation

/// The identity of one replica: one notebook folder on one machine.
///
/// A 64-bit random number minted when a folder is created (or found to be a copy).
/// Printed as 16 lowercase hex digits. Ties between concurrent operations are broken
/// by comparing replica ids as unsigned integers.
public struct ReplicaID: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    public var rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    public init(_ rawValue: UInt64) { self.rawValue = rawValue }

    /// A fresh random replica id (never zero).
    public static func random() -> ReplicaID {
        var g = SystemRandomNumberGenerator()
        return ReplicaID(UInt64.random(in: 1...UInt64.max, using: &g))
    }

    /// Parses 1 to 16 hex digits.
    public init?(hex: String) {
        guard (1...16).contains(hex.count), let v = UInt64(hex, radix: 16) else { return nil }
        rawValue = v
    }

    public var description: String {
        let s = String(rawValue, radix: 16)
        return String(repeating: "0", count: 16 - s.count) + s
    }

    public static func < (l: ReplicaID, r: ReplicaID) -> Bool { l.rawValue < r.rawValue }
}

/// The unique id of an operation: the replica that made it and that replica's counter
/// in the log the operation belongs to (counters start at 1 and have no gaps per log).
public struct OpID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var replica: ReplicaID
    public var counter: UInt64
    public init(replica: ReplicaID, counter: UInt64) {
        self.replica = replica
        self.counter = counter
    }
    /// `<replica hex>.<counter>`, e.g. `00000000000000a1.17`.
    public var description: String { "\(replica).\(counter)" }

    public init?(parsing s: String) {
        let parts = s.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, let r = ReplicaID(hex: String(parts[0])),
              let c = UInt64(parts[1]), c > 0 else { return nil }
        self.init(replica: r, counter: c)
    }

    public static func < (l: OpID, r: OpID) -> Bool {
        (l.replica, l.counter) < (r.replica, r.counter)
    }
}

/// An element's id is the id of the operation that added it: unique, stable, and
/// known to every replica that has the element.
public typealias ElementID = OpID

/// An operation id with its Lamport timestamp: what last-writer-wins compares.
///
/// Order: Lamport timestamp, then replica id, then counter. Two distinct operations
/// never compare equal.
public struct OpRef: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var id: OpID
    public var lamport: UInt64
    public init(id: OpID, lamport: UInt64) {
        self.id = id
        self.lamport = lamport
    }
    public static func < (l: OpRef, r: OpRef) -> Bool {
        (l.lamport, l.id.replica, l.id.counter) < (r.lamport, r.id.replica, r.id.counter)
    }
    public var description: String { "\(id)@\(lamport)" }
}

/// A document's id: the `<UUID>` of its `<UUID>.lnote` package.
public struct DocumentID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var uuid: UUID
    public init(_ uuid: UUID = UUID()) { self.uuid = uuid }
    public init?(_ string: String) {
        guard let u = UUID(uuidString: string) else { return nil }
        uuid = u
    }
    public var description: String { uuid.uuidString }
    /// The order of their `description`s (`uuid.sortsBefore`), without formatting them.
    public static func < (l: DocumentID, r: DocumentID) -> Bool { l.uuid.sortsBefore(r.uuid) }
}

/// A page's id: the `<page-uuid>` of `pages/<page-uuid>.content`.
public struct PageID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var uuid: UUID
    public init(_ uuid: UUID = UUID()) { self.uuid = uuid }
    public init?(_ string: String) {
        guard let u = UUID(uuidString: string) else { return nil }
        uuid = u
    }
    public var description: String { uuid.uuidString }
    /// The order of their `description`s (`uuid.sortsBefore`), without formatting them.
    public static func < (l: PageID, r: PageID) -> Bool { l.uuid.sortsBefore(r.uuid) }
}

extension UUID {
    /// True when `uuidString` sorts before `other.uuidString`: the order of the 16 bytes
    /// compared as unsigned numbers, first byte first (two uppercase hex digits per byte, and
    /// the digits 0-9 then A-F keep the bytes' order; the hyphens sit at the same places in
    /// both). Compared as two big-endian words: formatting the strings cost `snprintf` calls
    /// in every sort of ids.
    public func sortsBefore(_ other: UUID) -> Bool {
        func words(_ u: uuid_t) -> (UInt64, UInt64) {
            withUnsafeBytes(of: u) { b in
                (UInt64(bigEndian: b.loadUnaligned(fromByteOffset: 0, as: UInt64.self)),
                 UInt64(bigEndian: b.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
            }
        }
        return words(uuid) < words(other.uuid)
    }

    /// The 16 bytes of the UUID in RFC 4122 order.
    public var bytes: [UInt8] {
        let u = uuid
        return [u.0, u.1, u.2, u.3, u.4, u.5, u.6, u.7, u.8, u.9, u.10, u.11, u.12, u.13, u.14, u.15]
    }
    /// Builds a UUID from exactly 16 bytes.
    public init?(bytes b: some Collection<UInt8>) {
        let a = Array(b)
        guard a.count == 16 else { return nil }
        self.init(uuid: (a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7],
                         a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15]))
    }
}

/// A content address: the SHA-256 of an asset's bytes, as 64 lowercase hex digits.
public struct AssetID: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The 32 digest bytes.
    public let digest: [UInt8]
    public init?(digest: [UInt8]) {
        guard digest.count == 32 else { return nil }
        self.digest = digest
    }
    public init?(hex: String) {
        guard hex.count == 64 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(32)
        var it = hex.utf8.makeIterator()
        while let h = it.next(), let l = it.next() {
            guard let hi = hexValue(h), let lo = hexValue(l) else { return nil }
            out.append(hi << 4 | lo)
        }
        digest = out
    }
    public var description: String { hexString(digest) }
    public static func < (l: AssetID, r: AssetID) -> Bool { l.digest.lexicographicallyPrecedes(r.digest) }
}

@inline(__always) func hexValue(_ c: UInt8) -> UInt8? {
    switch c {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
    default: return nil
    }
}

/// Lowercase hex of some bytes.
public func hexString(_ bytes: some Sequence<UInt8>) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out: [UInt8] = []
    for b in bytes {
        out.append(digits[Int(b >> 4)])
        out.append(digits[Int(b & 15)])
    }
    return String(decoding: out, as: UTF8.self)
}
