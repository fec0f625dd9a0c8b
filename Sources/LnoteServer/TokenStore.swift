import LnoteModel

/// Bearer tokens ([SYNC-25]): 32 random bytes written as 64 lowercase hex digits. A server
/// stores only the SHA-256 of the token's text (its 64 ASCII digits).
public enum RelayToken {
    /// A new token from the system's cryptographic generator.
    public static func generate() -> String {
        var g = SystemRandomNumberGenerator()
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32)
        for _ in 0..<4 {
            var word = g.next()
            for _ in 0..<8 {
                bytes.append(UInt8(truncatingIfNeeded: word))
                word >>= 8
            }
        }
        return hexString(bytes)
    }

    /// The digest stored for `token`: SHA-256 of its UTF-8 text.
    public static func digest(_ token: String) -> [UInt8] { SHA256.hash(Array(token.utf8)) }

    /// [SYNC-28] The fewest hex digits a token chosen by hand may have: 32 (128 bits).
    public static let minimumHexDigits = 32
    /// The most bytes a token presented to a server may have (longer ones are refused
    /// unread).
    public static let maximumBytes = 256

    /// [SYNC-28] Throws unless `token` is strong enough for a server to accept it as its
    /// token: 32 to 256 hex digits (either case), at least 128 bits when random. The one
    /// check of the rule: `PeerServer.init` runs it, and `lnote serve` on `--token` or
    /// `$LNOTE_TOKEN` before it opens the folder.
    /// - Throws: `.invalidArgument` naming the rule, what the token is instead, and how to
    ///   make a good one.
    public static func checkServerToken(_ token: String) throws {
        let digits = token.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) || (0x41...0x46).contains($0) }
        if digits && (minimumHexDigits...maximumBytes).contains(token.utf8.count) { return }
        let what = digits ? "\(token.utf8.count) hex digits" : "\(token.utf8.count) characters, not all hex digits"
        throw LnoteError(.invalidArgument, "a token of \(what): a server token must be \(minimumHexDigits) to \(maximumBytes) "
                         + "hex digits (at least 128 bits, [SYNC-28]); "
                         + "make one with `openssl rand -hex 32`")
    }

    /// Whether `token` has the form tokens are issued in (64 lowercase hex digits).
    public static func isWellFormed(_ token: String) -> Bool {
        token.utf8.count == 64 && token.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    /// Throws `.invalidArgument` unless `name` can name a device ([SYNC-57]): 1 to 128
    /// bytes of UTF-8, no control character (it is printed on one line, and in error
    /// messages), no space at either end, and not of the form `token-…`, which names the
    /// devices of tokens made without one.
    public static func checkDeviceName(_ name: String) throws {
        if let problem = PrintableText.deviceNameProblem(name) { throw LnoteError(.invalidArgument, problem) }
        guard !name.hasPrefix(unnamedPrefix) else {
            throw LnoteError(.invalidArgument, "device names starting with \"\(unnamedPrefix)\" name tokens made without a device")
        }
    }

    static let unnamedPrefix = "token-"

    /// The longest lifetime a token may be given: 100 years.
    public static let maximumLifetimeSeconds: Int64 = 100 * 366 * 86_400

    /// [SYNC-29] A lifetime written as a positive whole number and a unit: `90m` (minutes),
    /// `12h` (hours), `30d` (days), `2w` (weeks). nil for anything else, or over 100 years.
    public static func parseLifetime(_ text: String) -> Duration? {
        guard let unit = text.last, let n = Int64(text.dropLast()), n > 0, text.first?.isNumber == true else { return nil }
        let scale: Int64
        switch unit {
        case "m": scale = 60
        case "h": scale = 3600
        case "d": scale = 86_400
        case "w": scale = 7 * 86_400
        default: return nil
        }
        let (seconds, overflow) = n.multipliedReportingOverflow(by: scale)
        guard !overflow, seconds <= maximumLifetimeSeconds else { return nil }
        return .seconds(seconds)
    }

    /// The device of a token made without one: `token-` and the first 8 hex digits of its
    /// digest.
    public static func unnamedDevice(digest: [UInt8]) -> String { unnamedPrefix + String(hexString(digest).prefix(8)) }

    /// Compares two byte strings in time that depends only on their lengths.
    public static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var diff: UInt8 = 0
        for i in 0..<a.count { diff |= a[i] ^ b[i] }
        return diff == 0
    }
}

/// What a request's token allows for one notebook.
public enum AuthResult: Sendable, Equatable {
    case ok
    /// No token, or a token the relay does not know (HTTP 401).
    case unauthorized
    /// A valid token of another notebook (HTTP 403): nothing is read or written.
    case forbidden
    /// A token the relay knows whose time ran out ([SYNC-29]): HTTP 401 `token_expired`,
    /// nothing read or written.
    case expired(at: Int64)
}

/// What a request's token opens, and for which device ([SYNC-57]).
public struct Access: Sendable, Equatable {
    public var result: AuthResult
    /// The token's device when `result` is `.ok`; nil for a server without devices (a
    /// peer server) or when access is refused.
    public var device: String?
    public init(_ result: AuthResult, device: String? = nil) {
        self.result = result
        self.device = device
    }
}

/// A token as listed: never the token itself.
public struct TokenInfo: Sendable, Equatable {
    /// The first 16 hex digits of the token's SHA-256: names it for `revokeToken`
    /// without revealing it.
    public var id: String
    public var notebook: NotebookID
    public var label: String
    /// The device the token belongs to ([SYNC-57]): its name, or `token-<8 hex>` for a
    /// token made without one.
    public var device: String
    /// False for a token made without a device (before devices existed).
    public var deviceNamed: Bool
    /// Milliseconds since 1970.
    public var created: Int64
    /// When the token stops opening its notebook ([SYNC-29]), in milliseconds since 1970;
    /// nil: never.
    public var expires: Int64?

    /// True when the token has expired at `now` (milliseconds since 1970).
    public func isExpired(at now: Int64) -> Bool { expires.map { now >= $0 } ?? false }
}

extension RelayStore {
    /// Issues a token for `notebook`; only its digest is stored, so the returned text is
    /// the only copy.
    ///
    /// - Parameters:
    ///   - device: the device the token belongs to ([SYNC-57]); several tokens may name the
    ///     same device (a token replaced). Without one, the token is its own unnamed device,
    ///     `token-<8 hex>`, as tokens made before devices existed.
    ///   - expiresIn: how long the token opens the notebook, from now ([SYNC-29]); nil:
    ///     until it is revoked.
    /// - Throws: `.notFound` for an unknown notebook; `.invalidArgument` for a label over
    ///   1,024 bytes, a device name `RelayToken.checkDeviceName` refuses, or a lifetime that
    ///   is not positive or is over 100 years.
    public func createToken(notebook: NotebookID, label: String, device: String? = nil,
                            expiresIn: Duration? = nil) throws -> String {
        guard label.utf8.count <= 1024 else { throw LnoteError(.invalidArgument, "token label over 1024 bytes") }
        if let device { try RelayToken.checkDeviceName(device) }
        let created = Self.now()
        var expires: Int64?
        if let expiresIn {
            let (seconds, attoseconds) = expiresIn.components
            guard expiresIn > .zero, seconds <= RelayToken.maximumLifetimeSeconds else {
                throw LnoteError(.invalidArgument, "a token lifetime must be positive and at most 100 years, not \(expiresIn)")
            }
            expires = created + seconds * 1000 + attoseconds / 1_000_000_000_000_000
        }
        let token = RelayToken.generate()
        try database.transaction(.write) { tx in
            let (nb, _) = try row(of: notebook, tx)
            try tx.execute("INSERT INTO tokens (digest, nb, label, created, device, expires) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                           [.blob(RelayToken.digest(token)), .integer(nb), .text(label), .integer(created),
                            device.map { .text($0) } ?? .null, expires.map { .integer($0) } ?? .null])
        }
        return token
    }

    /// Decides what `token` (nil: the request had none) may do with `notebook`.
    ///
    /// The presented token's SHA-256 is looked up by an index, then compared with the
    /// stored digest in constant time. The lookup compares digests, never tokens: its
    /// timing could only tell how long a prefix the SHA-256 of a guess shares with a stored
    /// digest, which says nothing about any token.
    /// A notebook that does not exist gives `.forbidden` to a valid token (of another
    /// notebook) and `.unauthorized` to an unknown one: it never reveals more than a
    /// wrong notebook would. A known token past its expiry gives `.expired` ([SYNC-29])
    /// whatever notebook it is presented for: only its holder can present it.
    public func authorize(token: String?, notebook: NotebookID) throws -> AuthResult {
        try access(token: token, notebook: notebook).result
    }

    /// `authorize`, with the token's device ([SYNC-57]) when access is granted.
    public func access(token: String?, notebook: NotebookID) throws -> Access {
        guard let token, !token.isEmpty, token.utf8.count <= RelayToken.maximumBytes else { return Access(.unauthorized) }
        let digest = RelayToken.digest(token)
        let now = Self.now()
        return try database.transaction(.read) { tx in
            let rows = try tx.query("""
                SELECT t.digest, n.id, t.device, t.expires FROM tokens t JOIN notebooks n ON n.nb = t.nb WHERE t.digest = ?1
                """, [.blob(digest)])
            guard let r = rows.first, let stored = r[0].bytes, RelayToken.constantTimeEqual(stored, digest) else {
                return Access(.unauthorized)
            }
            if let expires = r[3].int64, now >= expires { return Access(.expired(at: expires)) }
            guard r[1].string == notebook.description else { return Access(.forbidden) }
            return Access(.ok, device: r[2].string ?? RelayToken.unnamedDevice(digest: stored))
        }
    }

    /// The notebook's tokens, oldest first.
    public func listTokens(notebook: NotebookID) throws -> [TokenInfo] {
        try database.transaction(.read) { tx in
            let (nb, _) = try row(of: notebook, tx)
            return try tx.query("""
                SELECT digest, label, created, device, expires FROM tokens WHERE nb = ?1
                ORDER BY created, \(database.tokenInsertionOrder)
                """, [.integer(nb)]).map { r in
                let digest = r[0].bytes ?? []
                return TokenInfo(id: String(hexString(digest).prefix(16)), notebook: notebook,
                                 label: r[1].string ?? "", device: r[3].string ?? RelayToken.unnamedDevice(digest: digest),
                                 deviceNamed: r[3].string != nil, created: r[2].int64 ?? 0, expires: r[4].int64)
            }
        }
    }

    /// Revokes the token whose id (as listed) is `id`, or that starts with `id` (at least
    /// 8 hex digits). Takes effect for the next request.
    /// - Throws: `.notFound` when no token of the notebook matches; `.ambiguous` when
    ///   several do; `.invalidArgument` for an id that is not 8 to 64 lowercase hex digits.
    public func revokeToken(notebook: NotebookID, id: String) throws {
        guard (8...64).contains(id.utf8.count),
              id.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else {
            throw LnoteError(.invalidArgument, "token id must be 8 to 64 lowercase hex digits")
        }
        try database.transaction(.write) { tx in
            let (nb, _) = try row(of: notebook, tx)
            let matches = try tx.query("SELECT digest FROM tokens WHERE nb = ?1", [.integer(nb)])
                .filter { hexString($0[0].bytes ?? []).hasPrefix(id) }
            guard let first = matches.first else {
                throw LnoteError(.notFound, "no token \(id) for notebook \(notebook)", path: path)
            }
            guard matches.count == 1 else {
                throw LnoteError(.ambiguous, "\(matches.count) tokens of notebook \(notebook) start with \(id)", path: path)
            }
            // `digest` is UNIQUE.
            try tx.execute("DELETE FROM tokens WHERE digest = ?1", [first[0]])
        }
    }
}
