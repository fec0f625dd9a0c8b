import CLnoteCurl
import LnoteModel

/// Largest total size of response header lines kept (beyond it the transfer is aborted).
let maxResponseHeaderBytes = 1 << 20

extension Transfer {
    /// Configures the easy handle for this request, runs `curl_easy_perform` (blocking), and
    /// turns the outcome into a response or an error. Runs on a worker thread.
    func perform(_ h: UnsafeMutableRawPointer, errorBuffer: UnsafeMutablePointer<CChar>) throws -> HTTPResponse {
        curl_easy_reset(h) // keeps live connections, DNS and TLS session caches
        errorBuffer[0] = 0
        let url = request.url
        let config = configuration
        var setupError: CURLcode = CURLE_OK
        func set(_ rc: CURLcode) { if setupError == CURLE_OK && rc != CURLE_OK { setupError = rc } }

        set(clnote_curl_setopt_pointer(h, CURLOPT_ERRORBUFFER, errorBuffer))
        set(clnote_curl_setopt_string(h, CURLOPT_URL, url))
        set(clnote_curl_setopt_string(h, CURLOPT_PROTOCOLS_STR, "http,https"))
        set(clnote_curl_setopt_string(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https"))
        set(clnote_curl_setopt_long(h, CURLOPT_NOSIGNAL, 1))
        set(clnote_curl_setopt_long(h, CURLOPT_TCP_KEEPALIVE, 1))
        set(clnote_curl_setopt_long(h, CURLOPT_FOLLOWLOCATION, config.followRedirects ? 1 : 0))
        set(clnote_curl_setopt_long(h, CURLOPT_MAXREDIRS, 5))
        set(clnote_curl_setopt_string(h, CURLOPT_USERAGENT, config.userAgent))
        set(clnote_curl_setopt_string(h, CURLOPT_PROXY, config.proxy ?? "")) // "" disables env proxies

        // Timeouts.
        set(clnote_curl_setopt_long(h, CURLOPT_CONNECTTIMEOUT_MS, max(1, milliseconds(config.connectTimeout))))
        if let total = request.timeout ?? config.requestTimeout {
            set(clnote_curl_setopt_long(h, CURLOPT_TIMEOUT_MS, max(1, milliseconds(total))))
        }
        if let lowTime = request.lowSpeedTime ?? config.lowSpeedTime {
            let seconds = max(1, (milliseconds(lowTime) + 999) / 1000)
            var limit = config.lowSpeedLimitBytesPerSecond
            if let rate = config.maxReceiveBytesPerSecond, rate > 0 { limit = min(limit, rate / 4) }
            set(clnote_curl_setopt_long(h, CURLOPT_LOW_SPEED_LIMIT, max(1, limit)))
            set(clnote_curl_setopt_long(h, CURLOPT_LOW_SPEED_TIME, seconds))
        }

        if let rate = config.maxReceiveBytesPerSecond, rate > 0 {
            set(clnote_curl_setopt_off(h, CURLOPT_MAX_RECV_SPEED_LARGE, curl_off_t(rate)))
            // libcurl reads up to 100 buffers in one pass before it looks at the rate: with
            // buffers of a millisecond's worth (1 KiB to 16 KiB), a pass is at most a tenth of
            // a second's, so the limit holds from the first bytes rather than after a burst.
            set(clnote_curl_setopt_long(h, CURLOPT_BUFFERSIZE, min(16_384, max(1_024, rate / 1_000))))
        }

        // TLS: verification always on; optional CA bundle.
        set(clnote_curl_setopt_long(h, CURLOPT_SSL_VERIFYPEER, 1))
        set(clnote_curl_setopt_long(h, CURLOPT_SSL_VERIFYHOST, 2))
        if let ca = config.caFile { set(clnote_curl_setopt_string(h, CURLOPT_CAINFO, ca)) }

        // Response size cap: curl refuses early when Content-Length says too much; the write
        // callback enforces it for bodies of unknown length.
        set(clnote_curl_setopt_off(h, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(config.maxResponseBytes)))

        // Callbacks: context through the userdata pointer, never a capture.
        let context = Unmanaged.passRetained(self)
        defer { context.release() }
        let userdata = context.toOpaque()
        set(clnote_curl_setopt_data_callback(h, CURLOPT_WRITEFUNCTION, { data, size, count, userdata in
            Transfer.fromUserdata(userdata).receiveBody(data, size * count)
        }))
        set(clnote_curl_setopt_pointer(h, CURLOPT_WRITEDATA, userdata))
        set(clnote_curl_setopt_data_callback(h, CURLOPT_HEADERFUNCTION, { data, size, count, userdata in
            Transfer.fromUserdata(userdata).receiveHeader(data, size * count)
        }))
        set(clnote_curl_setopt_pointer(h, CURLOPT_HEADERDATA, userdata))
        set(clnote_curl_setopt_long(h, CURLOPT_NOPROGRESS, 0))
        set(clnote_curl_setopt_xferinfo(h, { userdata, dlTotal, dlNow, ulTotal, ulNow in
            Transfer.fromUserdata(userdata).reportProgress(dlTotal: dlTotal, dlNow: dlNow, ulTotal: ulTotal, ulNow: ulNow)
        }))
        set(clnote_curl_setopt_pointer(h, CURLOPT_XFERINFODATA, userdata))

        // Method and body.
        let method = request.method // case-sensitive (RFC 9110 section 9.1)
        let sendsBody = !request.body.isEmpty || ["POST", "PUT", "PATCH"].contains(method)
        if method == "HEAD" && request.body.isEmpty {
            set(clnote_curl_setopt_long(h, CURLOPT_NOBODY, 1))
        } else if method == "GET" && request.body.isEmpty {
            set(clnote_curl_setopt_long(h, CURLOPT_HTTPGET, 1))
        } else if method != "POST" {
            // DELETE, PUT, PATCH, ...: the body (if any) goes out as POSTFIELDS below.
            set(clnote_curl_setopt_string(h, CURLOPT_CUSTOMREQUEST, method))
        }

        // Headers.
        var requestHeaders = request.headers
        if !requestHeaders.contains("Authorization"), let token = config.bearerToken {
            requestHeaders.add("Authorization", "Bearer \(token)")
        }
        if sendsBody && !requestHeaders.contains("Content-Type") {
            requestHeaders.add("Content-Type", "application/octet-stream")
        }
        requestHeaders.remove("Expect")
        var list: UnsafeMutablePointer<curl_slist>? = nil
        defer { curl_slist_free_all(list) }
        // An empty `Expect:` stops curl from waiting for `100 Continue` before a body.
        for line in requestHeaders.map({ $0.value.isEmpty ? "\($0.name);" : "\($0.name): \($0.value)" }) + ["Expect:"] {
            guard let appended = curl_slist_append(list, line) else {
                throw LnoteError(.network, "out of memory building headers", path: url)
            }
            list = appended
        }
        set(clnote_curl_setopt_slist(h, CURLOPT_HTTPHEADER, list))

        guard setupError == CURLE_OK else {
            throw LnoteError(.network, "\(method) \(url): cannot configure the transfer", path: url,
                             underlying: CurlCode.describe(setupError))
        }

        // The body pointer stays valid for the whole (blocking) perform.
        let rc: CURLcode = request.body.withUnsafeBufferPointer { buffer in
            if sendsBody {
                // POSTFIELDS needs a non-NULL pointer even for an empty body.
                let empty: StaticString = ""
                let pointer = buffer.baseAddress.map { UnsafeMutableRawPointer(mutating: $0) }
                    ?? UnsafeMutableRawPointer(mutating: empty.utf8Start)
                _ = clnote_curl_setopt_off(h, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(buffer.count))
                _ = clnote_curl_setopt_pointer(h, CURLOPT_POSTFIELDS, pointer)
            }
            return curl_easy_perform(h)
        }
        // Drop the pointers into this transfer's memory before the handle is reused.
        _ = clnote_curl_setopt_pointer(h, CURLOPT_POSTFIELDS, nil)
        _ = clnote_curl_setopt_slist(h, CURLOPT_HTTPHEADER, nil)

        if rc == CURLE_OK {
            var code = 0
            _ = clnote_curl_getinfo_long(h, CURLINFO_RESPONSE_CODE, &code)
            return HTTPResponse(status: code, headers: self.headers, body: body)
        }
        if cancelled.load(ordering: .relaxed) {
            throw CancellationError()
        }
        let detail = errorBuffer[0] != 0 ? String(cString: errorBuffer) : String(cString: curl_easy_strerror(rc))
        if exceededCap || rc == CURLE_FILESIZE_EXCEEDED {
            throw LnoteError(.limitExceeded,
                             "\(method) \(url): response exceeds the limit of \(config.maxResponseBytes) bytes",
                             path: url, underlying: CurlCode.describe(rc))
        }
        if rc == CURLE_OUT_OF_MEMORY && (headerBytes > 0 || detail.lowercased().contains("header")) {
            // libcurl refuses a header line over 100 KB this way: it is the answer, not memory.
            throw LnoteError(.network, "\(method) \(url) failed: the server's response headers are too large",
                             path: url, underlying: CurlCode.describe(rc))
        }
        throw LnoteError(.network, "\(method) \(url) failed: \(detail)", path: url,
                         underlying: CurlCode.describe(rc))
    }

    static func fromUserdata(_ userdata: UnsafeMutableRawPointer?) -> Transfer {
        Unmanaged<Transfer>.fromOpaque(userdata!).takeUnretainedValue()
    }

    /// CURLOPT_WRITEFUNCTION: append, or return 0 (abort) past the cap.
    func receiveBody(_ data: UnsafeMutablePointer<CChar>?, _ n: Int) -> Int {
        guard n > 0 else { return 0 }
        guard let data else { return 0 }
        if body.count > configuration.maxResponseBytes - n {
            exceededCap = true
            return 0
        }
        body.append(contentsOf: UnsafeRawBufferPointer(start: data, count: n))
        return n
    }

    /// CURLOPT_HEADERFUNCTION: one header line per call, status lines included.
    func receiveHeader(_ data: UnsafeMutablePointer<CChar>?, _ n: Int) -> Int {
        guard let data, n > 0 else { return n }
        headerBytes += n
        if headerBytes > maxResponseHeaderBytes {
            exceededCap = true
            return 0
        }
        // Strip CR LF as bytes ("\r\n" is one Character in a Swift String).
        let raw = UnsafeRawBufferPointer(start: data, count: n)
        var end = n
        while end > 0 && (raw[end - 1] == 10 || raw[end - 1] == 13) { end -= 1 }
        let line = String(decoding: raw[..<end], as: UTF8.self)
        if line.hasPrefix("HTTP/") {
            // A new response (after 1xx or a redirect): keep only the final one's headers.
            headers = HTTPHeaders()
        } else if let colon = line.firstIndex(of: ":") {
            let name = String(line[..<colon]).trimmingCharacters(in: " \t")
            let value = String(line[line.index(after: colon)...]).trimmingCharacters(in: " \t")
            if !name.isEmpty { headers.add(name, value) }
        }
        return n
    }

    /// CURLOPT_XFERINFOFUNCTION: report changes; a non-zero return aborts (cancellation).
    func reportProgress(dlTotal: curl_off_t, dlNow: curl_off_t, ulTotal: curl_off_t, ulNow: curl_off_t) -> Int32 {
        if cancelled.load(ordering: .relaxed) { return 1 }
        let now = HTTPProgress(uploaded: Int64(ulNow), uploadTotal: Int64(ulTotal),
                               downloaded: Int64(dlNow), downloadTotal: Int64(dlTotal))
        if now != lastProgress {
            lastProgress = now
            progress?(now)
        }
        return 0
    }
}

/// Whole milliseconds in `d`, saturating at `Int.max`.
func milliseconds(_ d: Duration) -> Int {
    let (seconds, attoseconds) = d.components
    let (ms, overflow) = seconds.multipliedReportingOverflow(by: 1000)
    if overflow { return seconds < 0 ? 0 : Int.max }
    return Int(ms) + Int(attoseconds / 1_000_000_000_000_000)
}

extension String {
    fileprivate func trimmingCharacters(in set: String) -> String {
        var s = Substring(self)
        while let f = s.first, set.contains(f) { s.removeFirst() }
        while let l = s.last, set.contains(l) { s.removeLast() }
        return String(s)
    }
}
