import Foundation
import Synchronization
import LnoteModel
import LnoteSync

/// Maps the HTTP binding of the sync protocol ([SYNC-20]..[SYNC-24]) onto `SyncEndpoint`s:
/// routing, auth, id validation, version negotiation, limits, JSON errors, and long polls
/// ([SYNC-70]..[SYNC-74], `SyncHTTPService+LongPoll.swift`).
///
/// `respond` is an `HTTPServer.AsyncHandler`: the servers run it while libmicrohttpd keeps
/// the connection suspended, so a held long poll holds no thread. Work that blocks (SQLite,
/// disk) runs where the authorizer and the endpoint put it (the relay: its store's queue),
/// never on Swift's cooperative threads.
public struct SyncHTTPService: Sendable {
    /// What the request's token opens, and for which device ([SYNC-57]).
    public typealias Authorizer = @Sendable (_ token: String?, _ notebook: UUID) async throws -> Access
    /// The endpoint of a notebook for the device of the request's token (nil: no such notebook).
    public typealias Resolver = @Sendable (_ notebook: UUID, _ device: String?) async throws -> (any SyncEndpoint)?
    /// The web view of a notebook whose token was checked ([SYNC-90]); nil: no view.
    public typealias ViewResolver = @Sendable (_ notebook: UUID) async throws -> WebView?

    /// "peer" or "relay", reported by `GET /v1/hello`.
    public let kind: String
    public let authorize: Authorizer
    public let endpoint: Resolver
    public let maxBodyBytes: Int
    /// Where sync requests with `wait` are held ([SYNC-71]); nil: answered at once, as if
    /// they had none.
    public let longPolls: LongPolls?
    /// The longest a request is held, whatever its `wait` asks ([SYNC-70]).
    public let maxWait: UInt32
    /// The read-only web view ([SYNC-90]); nil: `/view/…` and `…/view/…` are 404.
    public let view: ViewResolver?
    /// The view answers being built at once, at most `maxViewAnswers` ([SYNC-95]).
    let viewSlots: ViewSlots
    /// The most view answers built at once by this server (default 2): past it a view
    /// request is answered 503 with `Retry-After` at once, never queued.
    public var maxViewAnswers: Int { viewSlots.limit }

    public init(kind: String, maxBodyBytes: Int = SyncCodec.maxBodySize, longPolls: LongPolls? = nil,
                maxWait: UInt32 = SyncCodec.maxWait, authorize: @escaping Authorizer, endpoint: @escaping Resolver,
                view: ViewResolver? = nil, maxViewAnswers: Int = 2) {
        self.view = view
        viewSlots = ViewSlots(limit: max(1, maxViewAnswers))
        self.kind = kind
        self.authorize = authorize
        self.endpoint = endpoint
        self.maxBodyBytes = maxBodyBytes
        self.longPolls = longPolls
        self.maxWait = maxWait
    }

    static func json(_ status: Int, _ object: Any) -> HTTPServerResponse {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        return HTTPServerResponse(status: status, headers: ["Content-Type": "application/json"], body: [UInt8](data))
    }

    /// The JSON error body ([SYNC-22]), with the status that carries `code`.
    static func error(_ code: SyncErrorCode, _ message: String) -> HTTPServerResponse {
        switch code {
        case .unsupportedVersion:
            return json(code.status, ["error": code.rawValue, "message": message, "versions": [Int(SyncCodec.version)]])
        case .unavailable:
            // [SYNC-74] Retried by the client ([SYNC-26]); not on this connection, which closes.
            var r = json(code.status, ["error": code.rawValue, "message": message])
            r.headers.add("Retry-After", "1")
            r.headers.add("Connection", "close")
            return r
        default:
            return json(code.status, ["error": code.rawValue, "message": message])
        }
    }

    /// The error code for a failure ([SYNC-22]).
    ///
    /// A state the client cannot change (a closed store, a document whose writes failed) is
    /// the server's failure: only a `SyncRefusal` — a state the client can act on — is 409.
    static func code(for e: LnoteError) -> SyncErrorCode {
        switch e.code {
        case .truncated, .corrupt, .invalidArgument, .ambiguous: .badRequest
        case .unauthorized: .unauthorized
        case .notFound: .notFound
        case .limitExceeded: .tooLarge
        case .unsupportedVersion, .protocolMismatch: .unsupportedVersion
        case .invalidState, .alreadyExists, .io, .database, .network: .serverError
        }
    }

    static func response(for e: LnoteError) -> HTTPServerResponse {
        let code = code(for: e)
        // Damage in one of the server's own files (a corrupt log on the peer's disk, a damaged
        // row of the relay's database, named by a path absolute or as the operator gave it)
        // is the server's failure, not the client's bad request, and its path is not the
        // client's business ([SYNC-81]). What a request carries is named by its own labels.
        let serverFile = (e.path.map { !isRequestLabel($0) } ?? false) || (e.underlying?.contains("/") ?? false)
        if code == .serverError || (code == .badRequest && serverFile) {
            return failure(what(e.code), detail: e.description)
        }
        // Byte offsets and causes help the client's author with a bad request; other answers
        // carry the message alone (a 404 naming the relay's file says only what is missing).
        return error(code, code == .badRequest ? e.description : e.message)
    }

    /// The names errors give what a request carries: its body, the operations it pushes, its
    /// hash ranges, an uploaded checkpoint or asset. Any other path is the server's own.
    static func isRequestLabel(_ path: String) -> Bool {
        ["request body", "push", "hashRanges", "sync", "snapshot"].contains(path)
            || path.hasPrefix("checkpoints/") || path.hasPrefix("checkpoint of ") || path.hasPrefix("documents/")
    }

    /// What failed, in the general terms a 500's message uses.
    private static func what(_ code: LnoteError.Code) -> String {
        switch code {
        case .io: "storage I/O"
        case .database: "the database"
        case .network: "the network"
        case .corrupt, .truncated: "damaged stored data"
        default: "the server's state"
        }
    }

    /// [SYNC-81] A 500 `server_error` whose body says what failed in general terms and gives an
    /// incident id; `detail` (paths, errno) goes to the server's log under that id, never to
    /// the client.
    static func failure(_ what: String, detail: String) -> HTTPServerResponse {
        var rng = SystemRandomNumberGenerator()
        let incident = String(rng.next() as UInt64, radix: 16).leftPadded(to: 16)
        var r = json(500, ["error": SyncErrorCode.serverError.rawValue, "incident": incident,
                           "message": "the server failed (\(what)); incident \(incident) in its log"])
        r.logEntry = "incident \(incident): \(detail)"
        return r
    }

    /// 409 with the refusal's own code ([SYNC-8], [SYNC-43]).
    static func response(for r: SyncRefusal) -> HTTPServerResponse {
        error(r.reason.code, r.error.message)
    }

    /// 403 `forbidden` for an owned replica ([SYNC-57]), with the replica and its owner as
    /// fields of their own; 400 `bad_checkpoint` ([SYNC-59]).
    static func response(for r: ServerRefusal) -> HTTPServerResponse {
        var body: [String: Any] = ["error": r.reason.code, "message": r.error.message]
        if case .replicaOwned(let replica, let owner, let operation, let log) = r.reason {
            body["replica"] = replica.description
            body["device"] = owner
            body["operation"] = operation.description
            body["log"] = log.description
        }
        return json(r.reason.status, body)
    }

    /// `2026-03-01T12:00:00Z` for milliseconds since 1970.
    static func utcDate(milliseconds: Int64) -> String {
        let f = ISO8601DateFormatter()
        f.timeZone = TimeZone(identifier: "UTC")
        return f.string(from: Date(timeIntervalSince1970: Double(milliseconds) / 1000))
    }

    static func bearer(_ headers: HTTPHeaders) -> String? {
        guard let v = headers["Authorization"] else { return nil }
        let parts = v.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        return String(parts[1]).trimmingCharacters(in: .whitespaces)
    }

    /// A UUID in canonical text form, or nil ([SYNC-23]: no separators, no `..`).
    static func uuid(_ s: Substring) -> UUID? {
        guard s.count == 36, s.allSatisfy({ $0.isHexDigit || $0 == "-" }) else { return nil }
        return UUID(uuidString: String(s))
    }

    /// What the request's line and headers decide.
    private enum Gate {
        /// `GET /v1/hello`, which needs no token.
        case hello
        /// `GET /view/<notebook>`: the web view's shell, which needs no token ([SYNC-91]).
        case shell
        /// Answered without reading the body: a refusal.
        case answer(HTTPServerResponse)
        /// A notebook request whose token opens the notebook.
        case open(notebook: UUID, endpoint: any SyncEndpoint, rest: [Substring])
    }

    /// Checks the path, the protocol version, the token and the notebook: everything the
    /// headers decide ([SYNC-78]).
    private func gate(_ request: HTTPServerRequest) async -> Gate {
        let segments = Array(request.path.split(separator: "/", omittingEmptySubsequences: false).dropFirst())
        // [SYNC-23] A NUL byte, sent as %00, ends the decoded path libmicrohttpd hands over:
        // what follows it would go unchecked and the rest be answered as if it were the path.
        if request.target.prefix(while: { $0 != "?" }).contains("%00") {
            return .answer(Self.error(.badRequest, "a NUL byte (%00) in the path"))
        }
        // [SYNC-23] Nothing that could name another path reaches routing or storage.
        if segments.contains(where: { $0 == ".." || $0 == "." || $0.contains("\\") || $0.contains("\0") }) {
            return .answer(Self.error(.badRequest, "path segments . and .. are not allowed"))
        }
        if segments == ["v1", "hello"] {
            // [SYNC-22] A known route asked with another method: 405, before any token.
            return request.method == "GET" ? .hello : .answer(Self.notAllowed(request.method))
        }
        // [SYNC-91] The shell names no notebook's content: the same bytes for any id.
        if view != nil, segments.count == 2, segments[0] == "view", request.method == "GET", Self.uuid(segments[1]) != nil {
            return .shell
        }
        guard segments.count >= 4, segments[0] == "v1", segments[1] == "notebooks" else {
            return .answer(Self.error(.notFound, "no such resource: \(request.path)"))
        }
        guard let notebook = Self.uuid(segments[2]) else {
            return .answer(Self.error(.badRequest, "notebook id must be a UUID"))
        }
        if let v = request.headers["Lnote-Protocol"], v != String(SyncCodec.version) {
            return .answer(Self.error(.unsupportedVersion, "protocol \(v) is not spoken here"))
        }
        // A store that cannot answer is a server error (500), never a 401 that would send
        // a user hunting for a token problem.
        let access: Access
        do { access = try await authorize(Self.bearer(request.headers), notebook) } catch let e as LnoteError {
            return .answer(Self.response(for: e))
        } catch {
            return .answer(Self.failure("the token store", detail: "\(error)"))
        }
        switch access.result {
        case .ok: break
        case .unauthorized: return .answer(Self.error(.unauthorized, "missing or wrong token"))
        case .expired(let at):
            return .answer(Self.error(.tokenExpired, "this token expired at \(Self.utcDate(milliseconds: at)); ask the relay's operator "
                                      + "for a new one (lnote relay token create)"))
        case .forbidden: return .answer(Self.error(.forbidden, "this token does not open notebook \(notebook)"))
        }
        do {
            guard let ep = try await endpoint(notebook, access.device) else {
                return .answer(Self.error(.notFound, "no notebook \(notebook) here"))
            }
            return .open(notebook: notebook, endpoint: ep, rest: Array(segments[3...]))
        } catch let e as LnoteError {
            return .answer(Self.response(for: e))
        } catch {
            return .answer(Self.failure("the notebook store", detail: "\(error)"))
        }
    }

    /// The `HTTPServer.Admission` of the sync servers ([SYNC-78]): the path, the version, the
    /// token and the notebook are checked from the headers, and an `assets/missing` body
    /// announced over its limit ([SYNC-82]) is refused, before any byte of the body is read.
    public func admit(_ head: HTTPServerRequest) async -> HTTPServerResponse? {
        switch await gate(head) {
        case .hello, .shell:
            return nil
        case .answer(let refusal):
            return Self.isView(head.path) ? WebView.secured(refusal) : refusal
        case .open(_, _, let rest):
            // A body over the server's limit is HTTPServer's to refuse (413, once admitted).
            let length = head.headers["Content-Length"].flatMap { Int($0) }
            if rest.count == 4, rest[0] == "documents", rest[2] == "assets", rest[3] == "missing",
               let length, length > SyncCodec.maxMissingAssetsBody {
                return Self.error(.tooLarge, "assets/missing body of \(length) bytes exceeds \(SyncCodec.maxMissingAssetsBody)")
            }
            return nil
        }
    }

    /// Answers one request of the HTTP binding. Never throws: every failure is a JSON error;
    /// every answer under the view's routes, errors included, carries the headers of [SYNC-94].
    public func respond(_ request: HTTPServerRequest) async -> HTTPServerResponse {
        let r = await answer(request)
        return Self.isView(request.path) ? WebView.secured(r) : r
    }

    /// Whether a path is under the web view's routes: `/view/…` or `/v1/notebooks/<id>/view…`.
    static func isView(_ path: String) -> Bool {
        let s = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        let segments = Array(s)
        if segments.first == "view" { return true }
        return segments.count >= 4 && segments[0] == "v1" && segments[1] == "notebooks" && segments[3] == "view"
    }

    private func answer(_ request: HTTPServerRequest) async -> HTTPServerResponse {
        let notebook: UUID, ep: any SyncEndpoint, rest: [Substring]
        switch await gate(request) {
        case .hello:
            return Self.json(200, ["protocol": [Int(SyncCodec.version)], "server": "lnote", "kind": kind])
        case .shell:
            return WebView.shell
        case .answer(let refusal):
            return refusal
        case .open(let n, let e, let r):
            (notebook, ep, rest) = (n, e, r)
        }
        guard request.body.count <= maxBodyBytes else {
            return Self.error(.tooLarge, "request body of \(request.body.count) bytes exceeds \(maxBodyBytes)")
        }
        do {
            return try await route(ep, notebook, rest, request)
        } catch is ServerClosing {
            return Self.error(.unavailable, "the server is shutting down; retry")
        } catch let r as SyncRefusal {
            return Self.response(for: r)
        } catch let r as ServerRefusal {
            return Self.response(for: r)
        } catch let e as LnoteError {
            return Self.response(for: e)
        } catch {
            return Self.failure("internal error", detail: "\(request.method) \(request.path): \(error)")
        }
    }

    private func route(_ ep: any SyncEndpoint, _ notebook: UUID, _ rest: [Substring],
                       _ r: HTTPServerRequest) async throws -> HTTPServerResponse {
        switch (r.method, rest.count) {
        case ("GET", _) where rest[0] == "view":
            // [SYNC-92] The view's fragments and pictures, behind the token like the rest.
            guard let view else { return Self.error(.notFound, "this server has no web view") }
            // [SYNC-95] A few answers are built at once; the others are told to come back,
            // never queued behind them.
            guard viewSlots.enter() else {
                return Self.error(.unavailable, "the web view is building \(viewSlots.limit) other answers; retry")
            }
            defer { viewSlots.leave() }
            guard let v = try await view(notebook) else { return Self.error(.notFound, "this server has no web view") }
            do { return try await v.respond(rest.dropFirst()) } catch let e as LnoteError where e.code == .corrupt || e.code == .truncated {
                // What the view reads is stored data (a relay's rows on any backend, a folder's
                // files), never the request's: damage there is the server's failure ([SYNC-81]).
                return Self.failure("damaged stored data", detail: e.description)
            }
        case ("POST", 1) where rest[0] == "sync":
            let q = try SyncCodec.decodeRequest(r.body, path: "request body")
            let answer: SyncResponse
            // [SYNC-73] The holder of a long poll: its token (as its digest, never the token).
            let holder = Self.bearer(r.headers).map { hexString(SHA256.hash(Array($0.utf8)).prefix(16)) }
            do { answer = try await self.answer(q, from: ep, notebook: notebook, holder: holder) } catch let e as LnoteError where e.path == "push" {
                // [SYNC-30] Name the operation where it is in the body, not in its frame.
                throw PushLocator.locate(e, in: r.body)
            }
            return .bytes(200, SyncCodec.encode(answer))
        case ("GET", 1) where rest[0] == "devices":
            // [SYNC-57] Who owns each replica id, for clients to show device names.
            if let relay = ep as? RelayEndpoint {
                let owners = try await relay.owners().map { ["replica": $0.replica.description, "device": $0.device] }
                return Self.json(200, owners)
            }
            // A peer: the names its folder knows, its own machine's included.
            guard let names = try await ep.deviceNames() else { return Self.error(.notFound, "this server keeps no devices") }
            return Self.json(200, names.keys.sorted().map { ["replica": $0.description, "device": names[$0]!] })
        case (_, 4) where rest[0] == "documents" && rest[2] == "assets",
             (_, 5) where rest[0] == "documents" && rest[2] == "assets":
            guard let doc = Self.uuid(rest[1]).map(DocumentID.init) else {
                throw LnoteError(.invalidArgument, "document id must be a UUID")
            }
            if rest.count == 4, rest[3] == "missing" {
                guard r.method == "POST" else { return Self.notAllowed(r.method) }
                // [SYNC-82] The list and the work it costs are bounded: a longer one is 413.
                guard r.body.count <= SyncCodec.maxMissingAssetsBody else {
                    throw LnoteError(.limitExceeded, "assets/missing body of \(r.body.count) bytes exceeds "
                                        + "\(SyncCodec.maxMissingAssetsBody)")
                }
                guard let list = try? JSONSerialization.jsonObject(with: Data(r.body)) as? [String] else {
                    throw LnoteError(.invalidArgument, "expected a JSON array of asset ids")
                }
                guard list.count <= SyncCodec.maxMissingAssets else {
                    throw LnoteError(.limitExceeded, "assets/missing list of \(list.count) ids exceeds the limit "
                                        + "\(SyncCodec.maxMissingAssets)")
                }
                let ids = try list.map { s -> AssetID in
                    guard let id = AssetID(hex: s) else { throw LnoteError(.invalidArgument, "bad asset id \"\(s)\"") }
                    return id
                }
                return Self.json(200, try await ep.missingAssets(ids, document: doc).map(\.description))
            }
            guard rest.count == 4, let asset = AssetID(hex: String(rest[3])) else {
                throw LnoteError(.invalidArgument, "asset id must be 64 lowercase hex digits")
            }
            switch r.method {
            case "PUT":
                // [SYNC-10] 201 when new, 204 when already held.
                let new = try await ep.putAsset(r.body, id: asset, document: doc)
                return HTTPServerResponse(status: new ? 201 : 204)
            case "GET":
                return .bytes(200, try await ep.getAsset(asset, document: doc))
            default:
                return Self.notAllowed(r.method)
            }
        case ("GET", 1) where rest[0] == "checkpoints":
            guard let relay = ep as? RelayEndpoint else { return Self.error(.notFound, "this server keeps no checkpoints") }
            return .bytes(200, Checkpoint.encodeList(try await relay.checkpoints()))
        case ("PUT", 4) where rest[0] == "documents" && rest[2] == "checkpoints":
            guard let relay = ep as? RelayEndpoint else { return Self.error(.notFound, "this server keeps no checkpoints") }
            guard let doc = Self.uuid(rest[1]).map(DocumentID.init) else {
                throw LnoteError(.invalidArgument, "document id must be a UUID")
            }
            let checkpoint = try Checkpoint.decode(r.body, path: "request body")
            // The path names the log: the document's own id for its document log, else a page id.
            let page: PageID? = rest[3] == rest[1] ? nil : try Self.uuid(rest[3]).map(PageID.init) ?? {
                throw LnoteError(.invalidArgument, "log id must be a UUID")
            }()
            guard checkpoint.log == LogRef(document: doc, page: page) else {
                throw LnoteError(.invalidArgument, "checkpoint body is for log \(checkpoint.log), the path names another")
            }
            try await relay.putCheckpoint(checkpoint)
            return HTTPServerResponse(status: 204)
        default:
            // [SYNC-22] A known route asked with another method is 405, any other path 404.
            if Self.isKnownRoute(rest) { return Self.notAllowed(r.method) }
            return Self.error(.notFound, "no such resource: \(r.path)")
        }
    }

    /// The routes under `/v1/notebooks/<id>/` (`rest`: the segments after the id) that some
    /// method answers: `sync`, `devices`, `checkpoints`, a document's checkpoint of a log, its
    /// assets (answered by `route` itself). Not the view's paths: [SYNC-92] answers any other
    /// method there with 404.
    static func isKnownRoute(_ rest: [Substring]) -> Bool {
        if rest.count == 1, ["sync", "devices", "checkpoints"].contains(rest[0]) { return true }
        return rest.count == 4 && rest[0] == "documents" && rest[2] == "checkpoints"
    }

    /// 405 `method_not_allowed` ([SYNC-22]).
    static func notAllowed(_ method: String) -> HTTPServerResponse {
        error(.methodNotAllowed, "\(method) is not allowed here")
    }
}

extension String {
    fileprivate func leftPadded(to n: Int) -> String { count >= n ? self : String(repeating: "0", count: n - count) + self }
}

/// One bearer token held as its SHA-256 digest ([SYNC-25]): what `lnote serve` checks.
public struct TokenDigest: Sendable, Hashable {
    public let digest: [UInt8]
    public init(token: String) { digest = RelayToken.digest(token) }

    /// True when `token` hashes to this digest, compared in constant time.
    public func matches(_ token: String) -> Bool {
        RelayToken.constantTimeEqual(digest, RelayToken.digest(token))
    }
}

/// Counts the web view answers being built, up to a limit ([SYNC-95]).
final class ViewSlots: Sendable {
    let limit: Int
    private let busy = Mutex(0)
    init(limit: Int) { self.limit = limit }

    /// Takes a slot; false when all `limit` are taken.
    func enter() -> Bool {
        busy.withLock { n in
            guard n < limit else { return false }
            n += 1
            return true
        }
    }

    func leave() { busy.withLock { $0 -= 1 } }
}
