import Testing
import LnoteModel

@Suite("Parallel.map")
struct ParallelTests {
    /// `map` gives exactly the serial map, for any count, parallel or not.
    @Test func mapEqualsSerialMap() {
        for count in [0, 1, 2, 3, 7, 8, 9, 100, 1001] {
            let serial = (0..<count).map { $0 &* 2_654_435_761 }
            #expect(Parallel.map(count) { $0 &* 2_654_435_761 } == serial, "count \(count)")
            #expect(Parallel.map(count, parallel: false) { $0 &* 2_654_435_761 } == serial, "count \(count)")
        }
    }
}
