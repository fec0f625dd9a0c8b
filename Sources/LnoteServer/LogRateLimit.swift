/// How many lines of a server's log an output takes per second: at most `perSecond` in each
/// window of one second (a window starts with the first line after the last one ended); lines
/// over the limit are counted, and the count is given with the next line let through, so that
/// a client who makes a server log cannot flood the operator's terminal or log file, and the
/// operator still learns that lines were left out ([SYNC-81]).
///
/// A value: the caller keeps it (under its lock) and gives it the time, so tests can drive it
/// with any clock.
public struct LogRateLimit: Sendable {
    /// The most lines let through in one window.
    public let perSecond: Int
    private var windowStart: ContinuousClock.Instant?
    private var admitted = 0
    private var dropped = 0

    public init(perSecond: Int = 20) {
        self.perSecond = perSecond
    }

    /// Whether a line logged at `now` goes out, and how many lines were held back since the
    /// last one that went out (to be told with it). `nil`: this line is held back too.
    public mutating func admit(at now: ContinuousClock.Instant) -> Int? {
        if let start = windowStart, now - start < .seconds(1) {
            guard admitted < perSecond else {
                dropped += 1
                return nil
            }
        } else {
            windowStart = now
            admitted = 0
        }
        admitted += 1
        defer { dropped = 0 }
        return dropped
    }
}
