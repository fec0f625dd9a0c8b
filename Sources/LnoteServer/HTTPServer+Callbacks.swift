import CLnoteMicroHTTPD
import Foundation
import LnoteModel
import LnoteSync
import Synchronization

/// What the daemon's callbacks share: the handler, the limits, counters and the log.
///
/// Reached from C through the `void *` closure arguments; retained by the server for as
/// long as the daemon runs. `@unchecked Sendable`: the PEM pointers are written once at
/// init and only read afterwards; the rest is immutable, atomic or mutex-guarded.
final class ServerContext: @unchecked Sendable {
    /// How a request whose body is complete is answered.
    enum Answering {
        /// On libmicrohttpd's thread, which the handler may block.
        case blocking(HTTPServer.Handler)
        /// In a task of its own while the connection is suspended: no thread waits for it.
        case suspending(HTTPServer.AsyncHandler)
    }

    let answering: Answering
    /// Runs once a request's headers are in, before any byte of its body is read ([SYNC-78]).
    let admission: HTTPServer.Admission?
    let maxBody: Int
    /// `Configuration.overloadedResponse`: a body that does not fit in the budget ([SYNC-79]).
    let overloadedResponse: HTTPServerResponse
    /// Deadlines, the share of connections before admission, the body budget.
    let guardian: ConnectionGuard
    /// `Configuration.shutdownResponse`.
    let shutdownResponse: HTTPServerResponse
    /// `Configuration.tooLargeResponse`: a body over `maxBody` (413).
    let tooLargeResponse: HTTPServerResponse?
    /// `Configuration.badFramingResponse`: a body length told two ways ([SYNC-80]).
    let badFramingResponse: HTTPServerResponse?
    /// PEM text as C strings, alive as long as the daemon (libmicrohttpd keeps the pointers).
    let certificate: UnsafeMutablePointer<CChar>?
    let key: UnsafeMutablePointer<CChar>?
    let liveRequests = Atomic<Int>(0)
    let log = Mutex<[String]>([])
    /// `HTTPServer.setLogHandler`: also given each message as it is logged.
    let logHandler = Mutex<(@Sendable (String) -> Void)?>(nil)
    /// Set by `HTTPServer.stop()`: requests completed from then on are answered 503.
    let stopping = Atomic<Bool>(false)
    /// Requests suspended while their async handler runs (`Answering.suspending`), until their
    /// completion callback: `stop()` answers those still running before the daemon stops.
    let suspended = Mutex<[ObjectIdentifier: PendingAnswer]>([:])

    init(answering: Answering, admission: HTTPServer.Admission?, maxBody: Int, shutdownResponse: HTTPServerResponse,
         overloadedResponse: HTTPServerResponse, tooLargeResponse: HTTPServerResponse? = nil,
         badFramingResponse: HTTPServerResponse? = nil,
         limits: ConnectionGuard.Limits, certificate: String?, key: String?) {
        self.shutdownResponse = shutdownResponse
        self.tooLargeResponse = tooLargeResponse
        self.badFramingResponse = badFramingResponse
        self.overloadedResponse = overloadedResponse
        self.answering = answering
        self.admission = admission
        self.maxBody = maxBody
        guardian = ConnectionGuard(limits: limits)
        self.certificate = certificate.map { strdup($0) }
        self.key = key.map { strdup($0) }
    }

    deinit {
        free(certificate)
        if let key {
            // Do not leave the private key in freed memory.
            memset(key, 0, strlen(key))
            free(key)
        }
    }

    func record(_ message: String) {
        log.withLock { log in
            log.append(message)
            if log.count > 32 { log.removeFirst(log.count - 32) }
        }
        logHandler.withLock { $0 }?(message)
    }
}

/// A libmicrohttpd connection pointer handed to another thread. Only `PendingAnswer` uses
/// it, under its lock, while the connection is known to be suspended (hence alive).
struct ConnectionPointer: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// A request whose connection is suspended while its async handler runs: the one object
/// the handler's task and libmicrohttpd's thread share.
///
/// The handler's task hands the answer over with `finish`, which resumes the connection;
/// libmicrohttpd then calls the access handler again, which takes it (`take`) and queues it.
/// `finish` works once: a later call (the task finishing after `stop()` answered 503 for
/// it) does nothing, so the connection is never resumed twice nor after it was closed.
final class PendingAnswer: Sendable {
    enum Phase {
        /// The handler (or the admission hook) runs; the connection is suspended.
        case handling
        /// The answer is ready and the connection resumed (nil: the admission hook let the
        /// request in).
        case resumed(HTTPServerResponse?)
        /// The answer was taken by the access handler and queued.
        case queued
    }

    let connection: ConnectionPointer
    let phase = Mutex<Phase>(.handling)

    init(connection: OpaquePointer) { self.connection = ConnectionPointer(pointer: connection) }

    /// Hands `response` over and resumes the connection, if nothing did before.
    /// - Returns: true when this call answered the request.
    @discardableResult
    func finish(_ response: HTTPServerResponse?) -> Bool {
        phase.withLock { p in
            guard case .handling = p else { return false }
            p = .resumed(response)
            // Under the lock: `stop()` never sees this request as still handling once it is
            // resumed, so it never stops the daemon between the two steps.
            MHD_resume_connection(connection.pointer)
            return true
        }
    }

    /// The answer, once (`.some(nil)`: admitted); nil when it is not ready.
    func take() -> HTTPServerResponse?? {
        phase.withLock { p in
            guard case .resumed(let r) = p else { return nil }
            p = .queued
            return .some(r)
        }
    }
}

/// One request being read: created by the URI-log callback, stored as libmicrohttpd's
/// per-request pointer, released by the completion callback.
///
/// Touched only by the thread serving its connection (the async handler's task sees only
/// the request value and the `PendingAnswer`).
final class RequestState {
    enum Phase {
        /// Nothing but the URI seen yet.
        case new
        /// Headers read; the admission hook runs while the connection is suspended.
        case admitting(PendingAnswer)
        /// Headers read; the body is being accumulated.
        case reading
        /// The body is over the limit: read and dropped (`discarded` bytes so far), then
        /// answered 413.
        case draining(discarded: Int)
        /// A response is queued (the handler's, or a 413); `resumed` when it was handed over
        /// by an async handler's task (the request stays in `ServerContext.suspended` until
        /// its completion callback, so that `stop()` lets the answer go out).
        case answered(resumed: PendingAnswer?)
        /// The async handler runs while the connection is suspended.
        case handling(PendingAnswer)
    }

    let target: String
    var phase = Phase.new
    var method = ""
    var path = ""
    var version = ""
    var headers = HTTPHeaders()
    var body: [UInt8] = []
    /// Bytes of the server's body budget held for this request ([SYNC-79]), released when it
    /// completes.
    var reserved = 0
    /// Whether the body's length is announced (Content-Length) or not (chunked).
    var announcedLength: Int? = nil
    var remoteAddress = ""
    var remotePort: UInt16 = 0

    init(target: String) { self.target = target }
}

// MARK: - C callbacks (no captures: state travels through the void * arguments)

/// MHD_OPTION_URI_LOG_CALLBACK: the first callback of each request; its return value becomes
/// the request's `*con_cls`.
let uriLogCallback: clnote_mhd_uri_log_callback = { cls, uri, _ in
    let server = Unmanaged<ServerContext>.fromOpaque(cls!).takeUnretainedValue()
    let state = RequestState(target: uri.map { String(cString: $0) } ?? "")
    server.liveRequests.add(1, ordering: .relaxed)
    return Unmanaged.passRetained(state).toOpaque()
}

/// MHD_OPTION_NOTIFY_COMPLETED: runs once per request that reached the URI-log callback,
/// completed or aborted.
let requestCompletedCallback: MHD_RequestCompletedCallback = { cls, connection, conCls, _ in
    guard let conCls, let pointer = conCls.pointee else { return }
    let state = Unmanaged<RequestState>.fromOpaque(pointer).takeUnretainedValue()
    let server = Unmanaged<ServerContext>.fromOpaque(cls!).takeUnretainedValue()
    switch state.phase {
    case .handling(let pending), .admitting(let pending), .answered(resumed: let pending?):
        _ = server.suspended.withLock { $0.removeValue(forKey: ObjectIdentifier(pending)) }
    default:
        break
    }
    server.guardian.release(state.reserved)
    state.reserved = 0
    // A kept-alive connection waits for its next request's headers, from now ([SYNC-76]).
    if let connection { server.guardian.set(connection, .awaitingHeaders(since: .now)) }
    Unmanaged<RequestState>.fromOpaque(pointer).release()
    conCls.pointee = nil
    server.liveRequests.subtract(1, ordering: .relaxed)
}

/// MHD_OPTION_EXTERNAL_LOGGER: keeps libmicrohttpd's messages instead of printing them.
let logCallback: MHD_LogCallback = { cls, format, args in
    guard let cls, let format, let args else { return }
    var buffer = [CChar](repeating: 0, count: 512)
    _ = vsnprintf(&buffer, buffer.count, format, args)
    let length = buffer.firstIndex(of: 0) ?? buffer.count
    let message = String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        .trimmingCharacters(in: .whitespacesAndNewlines)
    Unmanaged<ServerContext>.fromOpaque(cls).takeUnretainedValue().record(message)
}

/// The access handler: called once when headers are in, once per chunk of body, once more
/// when the body is complete, and (async handlers) once after the connection is resumed.
let accessHandlerCallback: MHD_AccessHandlerCallback = { cls, connection, url, method, version, uploadData, uploadDataSize, conCls in
    guard let cls, let connection, let uploadDataSize, let conCls else { return .NO }
    let server = Unmanaged<ServerContext>.fromOpaque(cls).takeUnretainedValue()
    return server.access(connection, url: url, method: method, version: version,
                         uploadData: uploadData, uploadDataSize: uploadDataSize, conCls: conCls)
}

extension ServerContext {
    func access(_ connection: OpaquePointer, url: UnsafePointer<CChar>?, method: UnsafePointer<CChar>?,
                version: UnsafePointer<CChar>?, uploadData: UnsafePointer<CChar>?,
                uploadDataSize: UnsafeMutablePointer<Int>,
                conCls: UnsafeMutablePointer<UnsafeMutableRawPointer?>) -> MHD_Result {
        let state: RequestState
        if let pointer = conCls.pointee {
            state = Unmanaged<RequestState>.fromOpaque(pointer).takeUnretainedValue()
        } else {
            // The URI-log callback always runs first; this is a safety net.
            state = RequestState(target: url.map { String(cString: $0) } ?? "")
            liveRequests.add(1, ordering: .relaxed)
            conCls.pointee = Unmanaged.passRetained(state).toOpaque()
        }

        switch state.phase {
        case .new:
            return begin(state, connection, url: url, method: method, version: version)
        case .admitting(let pending):
            // Called again after the resume (still before the body): the hook's verdict.
            guard let verdict = pending.take() else { return .YES }
            if let refusal = verdict {
                state.phase = .answered(resumed: pending)
                guardian.set(connection, .busy)
                return queue(connection, refusal, close: true)
            }
            _ = suspended.withLock { $0.removeValue(forKey: ObjectIdentifier(pending)) }
            return admitted(state, connection)
        case .answered:
            return .YES // a response is queued (a 413 sent before the body was read)
        case .handling(let pending):
            // Called again after the resume: the answer is ready.
            guard let verdict = pending.take(), let response = verdict else { return .YES }
            state.phase = .answered(resumed: pending)
            return queue(connection, response, close: stopping.load(ordering: .relaxed))
        case .draining(let discarded):
            let n = uploadDataSize.pointee
            if n > 0 {
                // A body past the limit: libmicrohttpd cannot queue a response in the middle
                // of a body, so the rest is read and dropped, up to `drainLimit` bytes; past
                // that (a chunked body that keeps growing) the connection is closed without
                // an answer.
                uploadDataSize.pointee = 0
                guardian.received(connection, n)
                state.phase = .draining(discarded: discarded + n)
                return discarded + n > drainLimit ? .NO : .YES
            }
            state.phase = .answered(resumed: nil)
            return queue(connection, tooLarge(), close: true)
        case .reading:
            let n = uploadDataSize.pointee
            if n > 0 {
                uploadDataSize.pointee = 0
                guardian.received(connection, n)
                if state.body.count > maxBody - n {
                    // A body without Content-Length (chunked) grew past the limit.
                    state.phase = .draining(discarded: state.body.count + n)
                    state.body = []
                    guardian.release(state.reserved)
                    state.reserved = 0
                } else if let uploadData {
                    if state.body.count + n > state.reserved {
                        // [SYNC-79] A chunked body grows into the budget step by step; one that
                        // outgrows it cannot be answered mid-body: its connection is closed.
                        let step = max(state.body.count + n - state.reserved, min(1 << 16, maxBody))
                        guard guardian.reserve(step) else {
                            guardian.overBudget.add(1, ordering: .relaxed)
                            record("chunked body of \(state.method) \(state.path) outgrew the body budget; connection closed")
                            return .NO
                        }
                        state.reserved += step
                    }
                    state.body.append(contentsOf: UnsafeRawBufferPointer(start: uploadData, count: n))
                }
                return .YES
            }
            return answer(state, connection)
        }
    }

    /// The first call of a request: its line, headers and peer; an announced body over the
    /// limit is refused here.
    private func begin(_ state: RequestState, _ connection: OpaquePointer, url: UnsafePointer<CChar>?,
                       method: UnsafePointer<CChar>?, version: UnsafePointer<CChar>?) -> MHD_Result {
        state.phase = .reading
        state.method = method.map { String(cString: $0) } ?? ""
        state.path = url.map { String(cString: $0) } ?? ""
        state.version = version.map { String(cString: $0) } ?? ""
        state.headers = Self.values(connection, .HEADER_KIND).reduce(into: HTTPHeaders()) {
            $0.add($1.name, $1.value ?? "")
        }
        var buffer = [CChar](repeating: 0, count: 64)
        var port: UInt16 = 0
        if clnote_mhd_client_address(connection, &buffer, buffer.count, &port) == 0 {
            let length = buffer.firstIndex(of: 0) ?? buffer.count
            state.remoteAddress = String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            state.remotePort = port
        }
        // [SYNC-80] One body length, told one way: conflicting Content-Length values, or
        // Content-Length with Transfer-Encoding (RFC 9112 §6.3), are refused before any byte
        // of the body is read, and the connection is closed (where its body ends is unknown).
        let lengths = state.headers.values(for: "Content-Length")
            .flatMap { $0.split(separator: ",", omittingEmptySubsequences: false) }
            .map { $0.trimmingCharacters(in: .whitespaces) }
        if !lengths.isEmpty {
            func badFraming(_ reason: String) -> HTTPServerResponse {
                record("\(state.method) \(state.path) refused: \(reason)")
                return badFramingResponse ?? .text(400, reason + "\n")
            }
            if Set(lengths).count > 1 {
                return refuse(state, connection, badFraming("conflicting Content-Length values: \(lengths.joined(separator: ", "))"))
            }
            if !state.headers.values(for: "Transfer-Encoding").isEmpty {
                return refuse(state, connection, badFraming("Content-Length together with Transfer-Encoding"))
            }
            guard !lengths[0].isEmpty, lengths[0].utf8.allSatisfy({ (48...57).contains($0) }), let n = Int(lengths[0]) else {
                return refuse(state, connection, badFraming("bad Content-Length \"\(lengths[0])\""))
            }
            state.announcedLength = n
        }
        guard let admission, case .suspending = answering else { return admitted(state, connection) }
        // [SYNC-78] The hook decides from the headers alone, while the connection is suspended
        // (libmicrohttpd reads nothing of it meanwhile) and holds no thread; libmicrohttpd calls
        // the access handler again, still before the body, once it is resumed.
        let head = HTTPServerRequest(
            method: state.method, path: state.path, target: state.target, query: Self.query(of: state.target),
            queryItems: Self.values(connection, .GET_ARGUMENT_KIND).map { HTTPQueryItem(name: $0.name, value: $0.value) },
            version: state.version, headers: state.headers, body: [],
            remoteAddress: state.remoteAddress, remotePort: state.remotePort)
        if stopping.load(ordering: .relaxed) {
            return refuse(state, connection, shutdownResponse)
        }
        let pending = PendingAnswer(connection: connection)
        state.phase = .admitting(pending)
        guardian.set(connection, .admitting)
        suspended.withLock { $0[ObjectIdentifier(pending)] = pending }
        MHD_suspend_connection(connection)
        Task.detached {
            pending.finish(await admission(head))
        }
        return .YES
    }

    /// Answers `response` before the body is read, and closes the connection.
    private func refuse(_ state: RequestState, _ connection: OpaquePointer, _ response: HTTPServerResponse) -> MHD_Result {
        state.phase = .answered(resumed: nil)
        guardian.set(connection, .busy)
        return queue(connection, response, close: true)
    }

    /// The request may send its body: its announced length is taken from the body budget
    /// ([SYNC-79]), or it is answered `overloadedResponse` at once; its body rate is watched
    /// from now ([SYNC-77]).
    private func admitted(_ state: RequestState, _ connection: OpaquePointer) -> MHD_Result {
        state.phase = .reading
        if let n = state.announcedLength, n > maxBody {
            // After the admission: a client without a token is refused before this, and never
            // has its body read even to be dropped.
            let waitsForContinue = state.headers["Expect"]?.lowercased() == "100-continue"
            if n > drainLimit || waitsForContinue {
                // Answered at once, and the connection closed: a client waiting for
                // `100 Continue` has sent nothing and reads the 413; a body too big
                // to read only to drop it is cut off (a client still sending may see
                // a reset).
                return refuse(state, connection, tooLarge())
            }
            // Read and dropped (at the minimum rate, [SYNC-77]), then answered 413: a client
            // that is still sending gets the answer rather than a reset.
            state.phase = .draining(discarded: 0)
            guardian.set(connection, .body(since: .now, received: 0))
            return .YES
        }
        if let n = state.announcedLength, n > 0 {
            guard guardian.reserve(n) else {
                guardian.overBudget.add(1, ordering: .relaxed)
                return refuse(state, connection, overloadedResponse)
            }
            state.reserved = n
            state.body.reserveCapacity(min(n, 8 << 20))
        }
        guardian.set(connection, .body(since: .now, received: 0))
        return .YES
    }

    private static func query(of target: String) -> String {
        target.firstIndex(of: "?").map { String(target[target.index(after: $0)...]) } ?? ""
    }

    /// The body is complete: the handler answers, on this thread or in a task while the
    /// connection is suspended.
    private func answer(_ state: RequestState, _ connection: OpaquePointer) -> MHD_Result {
        let query = Self.query(of: state.target)
        guardian.set(connection, .busy)
        let request = HTTPServerRequest(
            method: state.method, path: state.path, target: state.target, query: query,
            queryItems: Self.values(connection, .GET_ARGUMENT_KIND).map { HTTPQueryItem(name: $0.name, value: $0.value) },
            version: state.version, headers: state.headers, body: state.body,
            remoteAddress: state.remoteAddress, remotePort: state.remotePort)
        state.body = []
        switch answering {
        case .blocking(let handler):
            state.phase = .answered(resumed: nil)
            return queue(connection, handler(request), close: false)
        case .suspending(let handler):
            if stopping.load(ordering: .relaxed) {
                state.phase = .answered(resumed: nil)
                return queue(connection, shutdownResponse, close: true)
            }
            let pending = PendingAnswer(connection: connection)
            state.phase = .handling(pending)
            suspended.withLock { $0[ObjectIdentifier(pending)] = pending }
            MHD_suspend_connection(connection)
            Task.detached {
                pending.finish(await handler(request))
            }
            return .YES
        }
    }

    /// How many bytes of an over-limit body are read (and dropped) so that it can still be
    /// answered 413: the limit again, at least 1 MiB.
    private var drainLimit: Int { maxBody > Int.max / 2 ? Int.max : maxBody + max(maxBody, 1 << 20) }

    private func tooLarge() -> HTTPServerResponse {
        tooLargeResponse ?? .text(413, "request body exceeds \(maxBody) bytes\n")
    }

    /// Queues `response`; an invalid status or header from the handler becomes a 500.
    private func queue(_ connection: OpaquePointer, _ response: HTTPServerResponse, close: Bool) -> MHD_Result {
        var response = response
        if let entry = response.logEntry {
            // Details for the operator, never for the client ([SYNC-81]).
            record(entry)
            response.logEntry = nil
        }
        if !(100...999).contains(response.status) || (try? response.headers.validate()) == nil {
            record("handler returned an invalid status \(response.status) or header; sent 500")
            response = .text(500, "internal error: invalid response\n")
        }
        let mhdResponse: OpaquePointer? = response.body.withUnsafeBytes { raw in
            MHD_create_response_from_buffer(raw.count, UnsafeMutableRawPointer(mutating: raw.baseAddress),
                                            .RESPMEM_MUST_COPY)
        }
        guard let mhdResponse else { return .NO }
        defer { MHD_destroy_response(mhdResponse) }
        for field in response.headers where field.name.lowercased() != "content-length" {
            if MHD_add_response_header(mhdResponse, field.name, field.value) != .YES { return .NO }
        }
        if close && response.headers["Connection"] == nil { _ = MHD_add_response_header(mhdResponse, "Connection", "close") }
        return MHD_queue_response(connection, UInt32(response.status), mhdResponse)
    }

    /// Header or query pairs of the current request, in order.
    private static func values(_ connection: OpaquePointer, _ kind: MHD_ValueKind) -> [(name: String, value: String?)] {
        final class Box { var items: [(name: String, value: String?)] = [] }
        let box = Box()
        let unmanaged = Unmanaged.passRetained(box)
        defer { unmanaged.release() }
        _ = MHD_get_connection_values(connection, kind, { cls, _, key, value in
            guard let cls, let key else { return .YES }
            let box = Unmanaged<Box>.fromOpaque(cls).takeUnretainedValue()
            box.items.append((String(cString: key), value.map { String(cString: $0) }))
            return .YES
        }, unmanaged.toOpaque())
        return box.items
    }
}
