import Synchronization
import Testing
import LnoteModel

@Suite("Parallel: map and both")
struct ParallelTests {
    /// `map` gives exactly the serial map, for any count, parallel or not.
    @Test func mapEqualsSerialMap() {
        for count in [0, 1, 2, 3, 7, 8, 9, 100, 1001] {
            let serial = (0..<count).map { $0 &* 2_654_435_761 }
            #expect(Parallel.map(count) { $0 &* 2_654_435_761 } == serial, "count \(count)")
            #expect(Parallel.map(count, parallel: false) { $0 &* 2_654_435_761 } == serial, "count \(count)")
        }
    }

    /// `both` returns each closure's own result, runs each exactly once, and each may use
    /// `map` inside (as the page loader's two decoders do).
    @Test func bothRunsEachOnceWithNestedMaps() {
        for round in 0..<50 {
            let calls = Atomic<Int>(0)
            let (a, b) = Parallel.both({
                calls.add(1, ordering: .relaxed)
                return Parallel.map(500 + round) { $0 * 3 }
            }, {
                calls.add(10, ordering: .relaxed)
                return Parallel.map(300) { "\($0)" }
            })
            #expect(a == (0..<(500 + round)).map { $0 * 3 }, "round \(round)")
            #expect(b == (0..<300).map { "\($0)" }, "round \(round)")
            #expect(calls.load(ordering: .relaxed) == 11, "round \(round)")
        }
    }
}
