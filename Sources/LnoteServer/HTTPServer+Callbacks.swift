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
    let handler: HTTPServer.Handler
    let maxBody: Int
    /// PEM text as C strings, alive as long as the daemon (libmicrohttpd keeps the pointers).
    let certificate: UnsafeMutablePointer<CChar>?
    let key: UnsafeMutablePointer<CChar>?
    let liveRequests = Atomic<Int>(0)
    let log = Mutex<[String]>([])

    init(handler: @escaping HTTPServer.Handler, maxBody: Int, certificate: String?, key: String?) {
        self.handler = handler
        self.maxBody = maxBody
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
    }
}

/// One request being read: created by the URI-log callback, stored as libmicrohttpd's
/// per-request pointer, released by the completion callback.
///
/// Touched only by the thread serving its connection.
final class RequestState {
    let target: String
    var started = false
    /// The body is over the limit: it is dropped and the answer is 413.
    var rejected = false
    /// The 413 is queued.
    var answered = false
    /// Bytes of an over-limit body read and dropped.
    var discarded = 0
    var method = ""
    var path = ""
    var version = ""
    var headers = HTTPHeaders()
    var body: [UInt8] = []
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
let requestCompletedCallback: MHD_RequestCompletedCallback = { cls, _, conCls, _ in
    guard let conCls, let pointer = conCls.pointee else { return }
    Unmanaged<RequestState>.fromOpaque(pointer).release()
    conCls.pointee = nil
    let server = Unmanaged<ServerContext>.fromOpaque(cls!).takeUnretainedValue()
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

/// The access handler: called once when headers are in, once per chunk of body, and once
/// more when the body is complete.
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

        if !state.started {
            state.started = true
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
            if let length = state.headers["Content-Length"], let n = Int(length) {
                if n > maxBody {
                    state.rejected = true
                    let waitsForContinue = state.headers["Expect"]?.lowercased() == "100-continue"
                    if n > drainLimit || waitsForContinue {
                        // Answered at once, and the connection closed: a client waiting for
                        // `100 Continue` has sent nothing and reads the 413; a body too big
                        // to read only to drop it is cut off (a client still sending may see
                        // a reset).
                        state.answered = true
                        return queue(connection, tooLarge(), close: true)
                    }
                    // Read and dropped below, then answered 413: a client that is still
                    // sending gets the answer rather than a reset.
                    return .YES
                }
                state.body.reserveCapacity(min(n, 8 << 20))
            }
            return .YES
        }

        if uploadDataSize.pointee > 0 {
            let n = uploadDataSize.pointee
            uploadDataSize.pointee = 0
            if state.rejected {
                // A body past the limit: libmicrohttpd cannot queue a response in the middle
                // of a body, so the rest is read and dropped, up to `drainLimit` bytes; past
                // that (a chunked body that keeps growing) the connection is closed without
                // an answer.
                state.discarded += n
                return state.discarded > drainLimit ? .NO : .YES
            }
            if state.body.count > maxBody - n {
                // A body without Content-Length (chunked) grew past the limit.
                state.rejected = true
                state.discarded = state.body.count + n
                state.body = []
            } else if let uploadData {
                state.body.append(contentsOf: UnsafeRawBufferPointer(start: uploadData, count: n))
            }
            return .YES
        }
        if state.rejected && !state.answered {
            state.answered = true
            return queue(connection, tooLarge(), close: true)
        }

        if state.rejected { return .YES } // the 413 is already queued

        let query = state.target.firstIndex(of: "?").map { String(state.target[state.target.index(after: $0)...]) } ?? ""
        let request = HTTPServerRequest(
            method: state.method, path: state.path, target: state.target, query: query,
            queryItems: Self.values(connection, .GET_ARGUMENT_KIND).map { HTTPQueryItem(name: $0.name, value: $0.value) },
            version: state.version, headers: state.headers, body: state.body,
            remoteAddress: state.remoteAddress, remotePort: state.remotePort)
        state.body = []
        let response = handler(request)
        return queue(connection, response, close: false)
    }

    /// How many bytes of an over-limit body are read (and dropped) so that it can still be
    /// answered 413: the limit again, at least 1 MiB.
    private var drainLimit: Int { maxBody > Int.max / 2 ? Int.max : maxBody + max(maxBody, 1 << 20) }

    private func tooLarge() -> HTTPServerResponse {
        .text(413, "request body exceeds \(maxBody) bytes\n")
    }

    /// Queues `response`; an invalid status or header from the handler becomes a 500.
    private func queue(_ connection: OpaquePointer, _ response: HTTPServerResponse, close: Bool) -> MHD_Result {
        var response = response
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
        if close { _ = MHD_add_response_header(mhdResponse, "Connection", "close") }
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
