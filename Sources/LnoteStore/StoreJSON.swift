import Foundation
import LnoteModel

/// The one JSON configuration of the store ([PKG-10]): sorted keys, two-space pretty
/// printing, no escaped slashes, a final newline, integers only (times are integer
/// milliseconds, so no date or float strategy ever applies; both are set to throwing or
/// explicit values anyway). Equal values give identical bytes.
enum StoreJSON {
    static func encoder() -> JSONEncoder {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        e.dateEncodingStrategy = .millisecondsSince1970
        e.dataEncodingStrategy = .base64
        e.nonConformingFloatEncodingStrategy = .throw
        e.keyEncodingStrategy = .useDefaultKeys
        return e
    }

    static func decoder() -> JSONDecoder {
        let d = JSONDecoder()
        d.dateDecodingStrategy = .millisecondsSince1970
        d.dataDecodingStrategy = .base64
        d.nonConformingFloatDecodingStrategy = .throw
        d.keyDecodingStrategy = .useDefaultKeys
        return d
    }

    static func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        do {
            var bytes = Array(try encoder().encode(value))
            bytes.append(0x0A)
            return bytes
        } catch {
            throw LnoteError(.invalidArgument, "JSON encoding failed: \(error)")
        }
    }

    /// Decodes, turning every failure into `corrupt` naming the file.
    static func decode<T: Decodable>(_ type: T.Type, _ bytes: [UInt8], path: String) throws -> T {
        do {
            return try decoder().decode(type, from: Data(bytes))
        } catch let e as LnoteError {
            throw e.at(path: path)
        } catch let DecodingError.dataCorrupted(ctx) {
            throw LnoteError(.corrupt, "invalid JSON: \(ctx.debugDescription) at \(codingPath(ctx.codingPath))", path: path)
        } catch let DecodingError.keyNotFound(key, ctx) {
            throw LnoteError(.corrupt, "missing field \(codingPath(ctx.codingPath + [key]))", path: path)
        } catch let DecodingError.typeMismatch(_, ctx) {
            throw LnoteError(.corrupt, "wrong type at \(codingPath(ctx.codingPath)): \(ctx.debugDescription)", path: path)
        } catch let DecodingError.valueNotFound(_, ctx) {
            throw LnoteError(.corrupt, "null at \(codingPath(ctx.codingPath))", path: path)
        } catch {
            throw LnoteError(.corrupt, "invalid JSON: \(error)", path: path)
        }
    }

    private static func codingPath(_ keys: [CodingKey]) -> String {
        keys.isEmpty ? "top level" : keys.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
    }
}

/// Text forms used inside the JSON files ([PKG-11]).
enum JSONText {
    /// `00000000000000a1.17@5`
    static func ref(_ r: OpRef) -> String { "\(r.id)@\(r.lamport)" }

    static func ref(_ s: String) throws -> OpRef {
        let parts = s.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 2, let id = OpID(parsing: String(parts[0])), let l = UInt64(parts[1]) else {
            throw LnoteError(.corrupt, "bad operation reference \"\(s)\"")
        }
        return OpRef(id: id, lamport: l)
    }

    /// `{"00000000000000a1": 17}`
    static func clock(_ c: VectorClock) -> [String: UInt64] {
        Dictionary(uniqueKeysWithValues: c.entries.map { ($0.replica.description, $0.counter) })
    }

    static func clock(_ d: [String: UInt64]) throws -> VectorClock {
        var pairs: [(ReplicaID, UInt64)] = []
        for (k, v) in d {
            guard k.count == 16, let r = ReplicaID(hex: k), r.rawValue != 0, v > 0 else {
                throw LnoteError(.corrupt, "bad clock entry \"\(k)\": \(v)")
            }
            pairs.append((r, v))
        }
        return VectorClock(pairs)
    }

    /// The text form of [PKG-11]: `5`, `5.80ff`, `7/:00000000000000a1.3.80`.
    static func zkey(_ z: ZKey) -> String { z.description }

    static func zkey(_ s: String) throws -> ZKey {
        guard let z = ZKey(parsing: s) else { throw LnoteError(.corrupt, "bad z key \"\(s)\"") }
        return z
    }

    static func hexDigit(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        default: nil
        }
    }

    /// 16 lowercase hex digits.
    static func u64(_ v: UInt64) -> String {
        let s = String(v, radix: 16)
        return String(repeating: "0", count: 16 - s.count) + s
    }

    static func u64(_ s: String) throws -> UInt64 {
        guard s.count == 16, s.utf8.allSatisfy({ hexDigit($0) != nil }), let v = UInt64(s, radix: 16) else {
            throw LnoteError(.corrupt, "bad 64-bit hex value \"\(s)\"")
        }
        return v
    }
}
