import Foundation
import LnoteModel

/// A moment of a log's history (merge-semantics.md [MERGE-81]): a vector clock, an
/// operation, or a wall time. Its clock is found among a log's operations by
/// `History.clock(of:in:applied:)`.
public enum HistoryPoint: Hashable, Sendable, CustomStringConvertible {
    /// The cut of this clock ([MERGE-80]).
    case clock(VectorClock)
    /// The state the operation's author had just made: its context plus its id.
    case operation(OpID)
    /// Every operation stamped at or before this wall time (ms since 1970, UTC), with what
    /// those operations had seen.
    case wallTime(Int64)

    /// Parses the forms people type:
    /// - an operation id `REPLICA.COUNTER` (`a1.17`, replica in hex);
    /// - a vector clock `{REPLICA:COUNTER, ...}` (`{}` is the empty page);
    /// - an ISO 8601 time with a zone (`2026-12-02T10:00:00Z`, `…T11:00:00.250+01:00`) or a
    ///   date alone (`2026-12-02`, midnight UTC, so the moment is the end of the day before);
    /// - `@MS`, milliseconds since 1970 (`@1764669600000`).
    /// Nil for anything else.
    public init?(parsing text: String) {
        let s = text.trimmingCharacters(in: .whitespaces)
        if let id = OpID(parsing: s) {
            self = .operation(id)
        } else if s.hasPrefix("{") {
            guard let c = VectorClock(parsing: s) else { return nil }
            self = .clock(c)
        } else if s.hasPrefix("@") {
            guard let ms = Int64(s.dropFirst()) else { return nil }
            self = .wallTime(ms)
        } else if let ms = HistoryPoint.parseTime(s) {
            self = .wallTime(ms)
        } else {
            return nil
        }
    }

    /// Why `text` is not a moment, when a form is recognizably meant but wrong (nil: say
    /// which forms there are). A clock entry with counter 0 is the one case people write:
    /// the textual clock leaves a replica out instead (page-snapshot.md [SHR-5]).
    public static func refusal(_ text: String) -> String? {
        let s = text.trimmingCharacters(in: .whitespaces)
        guard s.hasPrefix("{"), s.hasSuffix("}") else { return nil }
        let entries = s.dropFirst().dropLast().split(separator: ",")
        for e in entries {
            let parts = e.split(separator: ":", maxSplits: 1)
            if parts.count == 2, let n = UInt64(parts[1].trimmingCharacters(in: .whitespaces)), n == 0 {
                return "the clock entry \(e.trimmingCharacters(in: .whitespaces)) has counter 0: leave that replica out "
                    + "(a clock names only replicas it has operations of)"
            }
        }
        return nil
    }

    /// The forms `init?(parsing:)` takes, for error messages and help.
    public static let forms = "an operation id (a1.17), a clock ({a1:17, b2:3}), a time (2026-12-02T10:00:00Z, 2026-12-02) or @MS since 1970"

    public var description: String {
        switch self {
        case .clock(let c): c.description
        case .operation(let id): id.description
        case .wallTime(let ms): "@\(ms)"
        }
    }

    /// ISO 8601 with an explicit zone, optional fractional seconds (to the millisecond), or a
    /// date alone (UTC midnight).
    static func parseTime(_ s: String) -> Int64? {
        // Formatters are made per call: they are not Sendable, and parsing is not hot.
        let withFraction = ISO8601DateFormatter()
        withFraction.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let plain = ISO8601DateFormatter()
        plain.formatOptions = [.withInternetDateTime]
        let day = ISO8601DateFormatter()
        day.formatOptions = [.withFullDate]
        // The formatters roll an impossible day over (February 30 into March): the date is
        // checked first.
        guard calendarDateExists(s), let date = plain.date(from: s) ?? withFraction.date(from: s)
                ?? (s.count == 10 ? day.date(from: s) : nil) else { return nil }
        let ms = (date.timeIntervalSince1970 * 1000).rounded()
        guard ms.isFinite, abs(ms) < 9.0e15 else { return nil }
        return Int64(ms)
    }

    /// True when `s` starts with `YYYY-MM-DD` naming a day of the proleptic Gregorian
    /// calendar: month 1 to 12, day within that month (February 29 in leap years only).
    static func calendarDateExists(_ s: String) -> Bool {
        let u = Array(s.utf8.prefix(10))
        guard u.count == 10, u[4] == UInt8(ascii: "-"), u[7] == UInt8(ascii: "-") else { return false }
        func number(_ r: Range<Int>) -> Int? {
            var n = 0
            for i in r {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(u[i]) else { return nil }
                n = n * 10 + Int(u[i] - UInt8(ascii: "0"))
            }
            return n
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10), (1...12).contains(month)
        else { return false }
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
        return (1...days).contains(day)
    }
}

extension VectorClock {
    /// Parses `{REPLICA:COUNTER, ...}` as `description` prints it (replica in hex, counters
    /// positive, each replica once; spaces ignored). Nil for anything else.
    public init?(parsing text: String) {
        let s = text.filter { $0 != " " }
        guard s.hasPrefix("{"), s.hasSuffix("}") else { return nil }
        let body = s.dropFirst().dropLast()
        self.init()
        guard !body.isEmpty else { return }
        for entry in body.split(separator: ",", omittingEmptySubsequences: false) {
            let parts = entry.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2, let r = ReplicaID(hex: String(parts[0])), let c = UInt64(parts[1]), c > 0,
                  self[r] == 0 else { return nil }
            self[r] = c
        }
    }
}

extension HistoryPoint {
    /// True for a wall time, the one form that names a moment of every log of a document
    /// ([MERGE-83]).
    public var isWallTime: Bool {
        if case .wallTime = self { return true }
        return false
    }
}
