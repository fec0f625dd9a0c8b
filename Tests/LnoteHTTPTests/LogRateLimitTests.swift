import Testing
import LnoteServer
import LnoteTestSupport

/// The cap on the lines a server's log puts on the operator's stderr ([SYNC-83]), driven
/// with made-up instants: no test waits for a clock.
@Suite struct LogRateLimitTests {
    /// [SYNC-83] 25 lines within one second: 20 go out, 5 are held back; the next line after
    /// the second ends goes out and carries the count 5, the one after it 0.
    @Test func twentyLinesASecondAndTheRestCounted() {
        let t0 = ContinuousClock.now
        var limit = LogRateLimit(perSecond: 20)
        let first = (0..<25).map { limit.admit(at: t0 + .milliseconds($0 * 10)) }
        #expect(first.prefix(20).allSatisfy { $0 == 0 }, "\(first)")
        #expect(first.suffix(5).allSatisfy { $0 == nil }, "\(first)")
        #expect(limit.admit(at: t0 + .milliseconds(999)) == nil)
        #expect(limit.admit(at: t0 + .milliseconds(1000)) == 6)
        #expect(limit.admit(at: t0 + .milliseconds(1001)) == 0)
    }

    /// [SYNC-83] A flood at random times over 30 simulated seconds (seeded): no window of one
    /// second lets more than 20 lines out, no second of any kind more than 40, and each line
    /// written carries exactly the number held back since the previous one.
    @Test func aFloodNeverPassesTheCapAndEveryLineIsAccountedFor() {
        let seed = UInt64.random(in: 1...UInt64.max)
        var rng = SeededRNG(seed: seed)
        let t0 = ContinuousClock.now
        var limit = LogRateLimit(perSecond: 20)
        var at = Duration.zero
        var written: [Duration] = []
        var heldBack = 0
        var lines = 0
        while at < .seconds(30) {
            at += .microseconds(Int64(rng.next() % 40_000))
            lines += 1
            if let dropped = limit.admit(at: t0 + at) {
                #expect(dropped == heldBack, "seed \(seed): line at \(at) says \(dropped) held back, not \(heldBack)")
                written.append(at)
                heldBack = 0
            } else {
                heldBack += 1
            }
        }
        // Windows of one second, each opened by the first line after the last one closed.
        var windowStart = Duration.zero
        var inWindow = 0
        for t in written {
            if inWindow > 0, t - windowStart < .seconds(1) { inWindow += 1 } else { (windowStart, inWindow) = (t, 1) }
            #expect(inWindow <= 20, "seed \(seed): the window at \(windowStart) let \(inWindow) lines out")
        }
        for (i, t) in written.enumerated() {
            let second = written[i...].prefix { $0 - t < .seconds(1) }.count
            #expect(second <= 40, "seed \(seed): \(second) lines within a second of \(t)")
        }
        // About 50 lines a second arrive: the cap, not the arrivals, decides what goes out.
        #expect(lines > 30 * 40 && written.count >= 20 * 28 && written.count <= 20 * 31,
                "seed \(seed): \(lines) lines, \(written.count) written")
        ReliabilityReport.record(family: "abuse", detail: "LogRateLimitTests: a flood of server log lines at random times",
                                 cases: lines)
    }
}
