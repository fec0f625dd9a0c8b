import Foundation
import LnoteModel

extension HTTPClient {
    /// How `sendWithRetry` spaces its attempts: exponential backoff with jitter, capped.
    ///
    /// The delay before retry `n` (1 for the first retry) is
    /// `min(maxDelay, initialDelay * multiplier^(n-1)) * (1 - jitter * u)` with `u` uniform in
    /// `[0, 1)` drawn from the caller's generator, so a seeded generator gives reproducible
    /// delays. A `Retry-After` header in seconds on a 429/503 raises the delay to that value
    /// (still capped at `maxDelay`).
    public struct RetryPolicy: Sendable, Hashable {
        /// Total attempts including the first (1 = never retry).
        public var maxAttempts: Int
        public var initialDelay: Duration
        public var multiplier: Double
        public var maxDelay: Duration
        /// Fraction of each delay that is randomized, 0...1.
        public var jitter: Double

        public init(maxAttempts: Int = 4, initialDelay: Duration = .milliseconds(250), multiplier: Double = 2,
                    maxDelay: Duration = .seconds(10), jitter: Double = 0.5) {
            self.maxAttempts = maxAttempts
            self.initialDelay = initialDelay
            self.multiplier = multiplier
            self.maxDelay = maxDelay
            self.jitter = jitter
        }

        /// The pause before retry number `retry` (1-based).
        public func delay(beforeRetry retry: Int, using rng: inout some RandomNumberGenerator) -> Duration {
            let cap = seconds(maxDelay)
            let exponent = Double(max(0, retry - 1))
            let base = min(cap, seconds(initialDelay) * pow(max(1, multiplier), exponent))
            let j = min(1, max(0, jitter))
            let u = Double.random(in: 0..<1, using: &rng)
            return .nanoseconds(Int64((base * (1 - j * u) * 1e9).rounded()))
        }

        private func seconds(_ d: Duration) -> Double {
            let (s, atto) = d.components
            return Double(s) + Double(atto) / 1e18
        }
    }

    /// Whether `error` is a failure worth retrying: no connection (refused, unreachable,
    /// DNS), a timeout, a connection reset or cut short, an empty reply.
    ///
    /// TLS verification failures, bad requests, size-limit aborts and cancellation are not.
    public static func isTransient(_ error: any Error) -> Bool {
        guard let e = error as? LnoteError, e.code == .network, let u = e.underlying else { return false }
        let name = u.prefix { $0 != " " }
        return transientCurlCodes.contains(String(name))
    }

    /// Whether a response status asks for a later retry: 429, 502, 503, 504.
    public static func isTransient(status: Int) -> Bool {
        status == 429 || status == 502 || status == 503 || status == 504
    }

    static let transientCurlCodes: Set<String> = [
        "CURLE_COULDNT_RESOLVE_PROXY", "CURLE_COULDNT_RESOLVE_HOST", "CURLE_COULDNT_CONNECT",
        "CURLE_HTTP2", "CURLE_PARTIAL_FILE", "CURLE_OPERATION_TIMEDOUT", "CURLE_GOT_NOTHING",
        "CURLE_SEND_ERROR", "CURLE_RECV_ERROR", "CURLE_HTTP2_STREAM", "CURLE_HTTP3", "CURLE_QUIC_CONNECT_ERROR",
    ]

    /// `send`, retried per `policy` on transient errors and on 429/502/503/504 responses.
    ///
    /// Returns the first non-transient response, or the last response when attempts run
    /// out on a transient status. Throws the first non-transient error, or the last error
    /// (its message noting the attempt count) when attempts run out.
    /// - Parameter rng: the jitter source; pass a seeded generator for reproducible delays.
    public func sendWithRetry(_ request: HTTPRequest, policy: RetryPolicy = RetryPolicy(),
                              using rng: inout some RandomNumberGenerator,
                              progress: (@Sendable (HTTPProgress) -> Void)? = nil) async throws -> HTTPResponse {
        let attempts = max(1, policy.maxAttempts)
        var attempt = 1
        while true {
            var retryAfter: Duration? = nil
            do {
                let response = try await send(request, progress: progress)
                guard Self.isTransient(status: response.status), attempt < attempts else { return response }
                if let value = response.headers["Retry-After"], let s = Int64(value), s >= 0 {
                    retryAfter = .seconds(s)
                }
            } catch {
                guard Self.isTransient(error) else { throw error }
                guard attempt < attempts else {
                    if var e = error as? LnoteError {
                        e.message += " (after \(attempt) attempts)"
                        throw e
                    }
                    throw error
                }
            }
            var pause = policy.delay(beforeRetry: attempt, using: &rng)
            if let retryAfter { pause = min(policy.maxDelay, max(pause, retryAfter)) }
            try await Task.sleep(for: pause)
            attempt += 1
        }
    }

    /// `sendWithRetry` with the system random generator for jitter.
    public func sendWithRetry(_ request: HTTPRequest, policy: RetryPolicy = RetryPolicy(),
                              progress: (@Sendable (HTTPProgress) -> Void)? = nil) async throws -> HTTPResponse {
        var rng = SystemRandomNumberGenerator()
        return try await sendWithRetry(request, policy: policy, using: &rng, progress: progress)
    }
}
